#!/usr/bin/env bash
# The main job, end to end: start a master from conf/master.conf, write data, show INFO.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/demo.py "$@"
