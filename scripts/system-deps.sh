#!/usr/bin/env bash
# Install the system packages the tests and benchmarks use, only when they are missing:
# Debian's redis-server and redis-tools (real Redis to compare with), openssl (the TLS tests
# make their certificates with it), tcl (Redis's own test harness: scripts/redis_suite.py).
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-check-rdb >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v tclsh8.6 >/dev/null 2>&1 || need+=(tcl)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
bash "$(dirname "$0")/apt-install.sh" "real Redis to compare with, certificates, Redis's test harness" \
  $(printf '%s\n' "${need[@]}" | sort -u)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
# Debian starts a redis-server service on install; the tests start their own on free ports.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
  $SUDO systemctl stop redis-server || true
fi
