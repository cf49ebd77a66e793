#!/usr/bin/env bash
# Redis's own sources, for the tests that read Redis's files: the RDB files of its test suite
# (tests/assets), the redis.conf that ships with Redis 7.0 and 8.x, and a Redis 8 redis-server
# built from them for the interop tests that want Redis 8.
#
# Everything lands under .cache/redis-src/ inside the repository (ignored by git):
#   .cache/redis-src/redis-7.0.15/        Debian bookworm's `apt-get source redis` (7.0.15)
#   .cache/redis-src/redis-8/             Debian experimental's `apt-get source redis` (8.x),
#                                         upstream redis.conf kept as redis.conf.orig
#   .cache/redis-src/redis-8/src/redis-server   built with `make BUILD_TLS=no` (skip: REDIS8_BUILD=no)
#   .cache/redis-src/valkey-8/            Debian trixie's `apt-get source valkey` (8.1), its
#                                         upstream tarball alone (Debian's patches unbundle deps)
#   .cache/redis-src/valkey-8/src/valkey-server built with `make BUILD_TLS=no` (skip: VALKEY_BUILD=no),
#                                         for the interop tests of Valkey's dual-channel replication
# A deb-src line for bookworm, trixie and experimental is added to apt's sources when apt-get
# cannot find a source package. Runs only what is missing; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=.cache/redis-src
mkdir -p "$CACHE"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

need_tools=()
command -v dpkg-source >/dev/null 2>&1 || need_tools+=(dpkg-dev)
command -v make >/dev/null 2>&1 || need_tools+=(make)
command -v gcc >/dev/null 2>&1 || need_tools+=(gcc)
command -v xz >/dev/null 2>&1 || need_tools+=(xz-utils)

srcs_added=""
# (grep reads all of apt-cache's output: with -q it would stop early, and pipefail would
# count apt-cache's SIGPIPE as the package missing)
ensure_deb_src() {
  [ -n "$srcs_added" ] && return 0
  srcs_added=yes
  if ! apt-cache showsrc redis 2>/dev/null | grep '^Version: 5:8\.' >/dev/null \
      || ! apt-cache showsrc valkey 2>/dev/null | grep '^Version: 8\.1' >/dev/null; then
    echo "adding a deb-src line (bookworm, trixie, experimental) for redis's and valkey's source packages" >&2
    $SUDO tee /etc/apt/sources.list.d/pyrepl-redis-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm trixie experimental
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    if [ ${#need_tools[@]} -gt 0 ]; then
      $SUDO apt-get update -qq
      $SUDO apt-get install -y -qq --no-install-recommends "${need_tools[@]}" >/dev/null
      need_tools=()
    else
      $SUDO apt-get update -qq
    fi
  fi
  if [ ${#need_tools[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need_tools[@]}" >/dev/null
    need_tools=()
  fi
}

fetch_source() {  # $1 = suite, $2 = directory name wanted under $CACHE
  local suite="$1" want="$2" tmp
  [ -d "$CACHE/$want" ] && return 0
  ensure_deb_src
  tmp="$(mktemp -d "$CACHE/tmp.XXXXXX")"
  echo "fetching redis's source package from $suite" >&2
  (cd "$tmp" && apt-get source -qq "redis/$suite" >/dev/null 2>&1) || {
    echo "apt-get source redis/$suite failed" >&2; rm -rf "$tmp"; return 1; }
  local dir
  dir="$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'redis-*' | head -n 1)"
  # Keep upstream's own redis.conf next to Debian's patched one.
  tar -xzOf "$tmp"/redis_*.orig.tar.gz --wildcards '*/redis.conf' > "$dir/redis.conf.orig" 2>/dev/null || true
  mv "$dir" "$CACHE/$want"
  basename "$dir" > "$CACHE/$want/.debian-source-dir"
  rm -rf "$tmp"
}

fetch_source bookworm redis-7.0.15
fetch_source experimental redis-8 || echo "no Redis 8 source: the Redis 8 tests will skip" >&2

if [ "${REDIS8_BUILD:-yes}" != "no" ] && [ -d "$CACHE/redis-8" ] && [ ! -x "$CACHE/redis-8/src/redis-server" ]; then
  echo "building $(cat "$CACHE/redis-8/.debian-source-dir") (make BUILD_TLS=no, a few minutes)" >&2
  if ! make -C "$CACHE/redis-8" -j"$(nproc)" BUILD_TLS=no USE_SYSTEMD=no > "$CACHE/redis-8-build.log" 2>&1; then
    echo "Redis 8 build failed (see $CACHE/redis-8-build.log); the Redis 8 tests will skip" >&2
  fi
fi
fetch_valkey() {  # upstream's tarball only: Debian's patches build against system libraries
  local want="valkey-8" tmp dir
  [ -d "$CACHE/$want" ] && return 0
  ensure_deb_src
  tmp="$(mktemp -d "$CACHE/tmp.XXXXXX")"
  echo "fetching valkey's source package from trixie" >&2
  (cd "$tmp" && apt-get source -qq --tar-only "valkey/trixie" >/dev/null 2>&1) || {
    echo "apt-get source valkey/trixie failed" >&2; rm -rf "$tmp"; return 1; }
  tar -xJf "$tmp"/valkey_*.orig.tar.xz -C "$tmp"
  dir="$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'valkey-*' | head -n 1)"
  mv "$dir" "$CACHE/$want"
  basename "$dir" > "$CACHE/$want/.debian-source-dir"
  rm -rf "$tmp"
}

fetch_valkey || echo "no Valkey source: the Valkey tests will skip" >&2

if [ "${VALKEY_BUILD:-yes}" != "no" ] && [ -d "$CACHE/valkey-8" ] && [ ! -x "$CACHE/valkey-8/src/valkey-server" ]; then
  echo "building $(cat "$CACHE/valkey-8/.debian-source-dir") (make BUILD_TLS=no, a few minutes)" >&2
  if ! make -C "$CACHE/valkey-8" -j"$(nproc)" BUILD_TLS=no USE_SYSTEMD=no > "$CACHE/valkey-8-build.log" 2>&1; then
    echo "Valkey build failed (see $CACHE/valkey-8-build.log); the Valkey tests will skip" >&2
  fi
fi
exit 0
