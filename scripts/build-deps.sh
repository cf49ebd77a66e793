#!/usr/bin/env bash
# What `pip install` needs to build pyrepl's one C file (pyrepl/resp/_scan.c, the request
# reader's fast path): a C compiler and the headers of the Python it builds for. Installed
# from Debian's packages only when missing.
set -euo pipefail
PY="${1:-python3}"
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
inc="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
[ -f "$inc/Python.h" ] || need+=(python3-dev)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
bash "$(dirname "$0")/apt-install.sh" "to build pyrepl's C file" "${need[@]}"
