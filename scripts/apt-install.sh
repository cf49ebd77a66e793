#!/usr/bin/env bash
# apt-install.sh WHY PACKAGE...: install Debian packages (sudo when not root), saying why. The
# *-deps.sh scripts call it with what they found missing.
set -euo pipefail
why="$1"
shift
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "installing: $* ($why)" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
