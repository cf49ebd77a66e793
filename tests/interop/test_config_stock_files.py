"""Redis's own configuration files start pyrepl unchanged, and every directive reads as in Redis.

* Debian's ``/etc/redis/redis.conf`` (7.0.15, installed with redis-server) and the
  ``redis.conf`` shipped in Redis 8's source (``make redis-src`` fetches it) start a pyrepl
  process given only the overrides redis-server itself would need on this machine (port, dir,
  logfile, pidfile, daemonize no); CONFIG GET of every directive then equals what the real
  ``redis-server`` (7.0.15, resp. the Redis 8 built from the same source) answers when started
  from the same file with the same arguments.
* Every mutable directive of Redis 7.0.15's table, set to a spread of valid and invalid values,
  gets the same CONFIG SET reply (Redis's error texts) and the same CONFIG GET afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from pyrepl import config
from pyrepl.config import split_args
from tests.support import procs
from tests.support.paths import redis_source_file

pytestmark = [pytest.mark.slow, pytest.mark.interop]

DEBIAN_CONF = "/etc/redis/redis.conf"


def file_directives(path: str) -> list[str]:
    """The directive names a redis.conf sets, in order, lowercased, without repeats."""
    names: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            argv = split_args(line)
            if argv and argv[0].lower() not in names:
                names.append(argv[0].lower())
    return names


def overrides(tmpdir: str, port: int) -> list[str]:
    return ["--port", str(port), "--dir", tmpdir, "--logfile", os.path.join(tmpdir, "server.log"),
            "--pidfile", os.path.join(tmpdir, "server.pid"), "--daemonize", "no"]


def start_real(exe: str, conf: str, tmpdir: str) -> procs.ServerProcess:
    port = procs.free_port()
    return procs.ServerProcess([exe, conf, *overrides(tmpdir, port)], port, tmpdir,
                               f"redis-{port}").start()


def start_ours(conf: str, tmpdir: str) -> procs.ServerProcess:
    port = procs.free_port()
    # start_pyrepl adds its test defaults (--save "", --bind, --enable-debug-command); here the
    # file's own values must stand, so the process is built by hand.
    import sys
    argv = [sys.executable, "-m", "pyrepl.cli.main", "master", "--config", conf,
            *overrides(tmpdir, port)]
    return procs.ServerProcess(argv, port, tmpdir, f"pyrepl-{port}").start()


def config_get(port: int, name: str) -> dict[str, str]:
    with redis.Redis(port=port, decode_responses=True, protocol=2) as c:
        reply = c.execute_command("CONFIG", "GET", name)
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


@pytest.fixture
def debian_pair(tmp_path: Any) -> Iterator[tuple[procs.ServerProcess, procs.ServerProcess]]:
    if not os.path.exists(DEBIAN_CONF) or procs.redis_server_path() is None:
        pytest.skip(f"{DEBIAN_CONF} is absent: Debian's redis-server is not installed "
                    "(the test command installs it)")
    (tmp_path / "real").mkdir()
    (tmp_path / "ours").mkdir()
    real = start_real(procs.redis_server_path() or "", DEBIAN_CONF, str(tmp_path / "real"))
    try:
        ours = start_ours(DEBIAN_CONF, str(tmp_path / "ours"))
    except BaseException:
        real.stop()
        raise
    yield real, ours
    ours.stop()
    real.stop()


# Values that legitimately differ between two servers started side by side.
PER_SERVER = {"port", "dir", "logfile", "pidfile"}


def test_debian_redis_conf_starts_pyrepl_and_reads_as_redis_7(
        debian_pair: tuple[procs.ServerProcess, procs.ServerProcess]) -> None:
    real, ours = debian_pair
    names = file_directives(DEBIAN_CONF)
    assert len(names) >= 65    # the stock file sets 69 directives
    for name in names:
        if name in PER_SERVER:
            continue
        assert config_get(ours.port, name) == config_get(real.port, name), name
    # and not only the file's: the whole CONFIG GET * agrees
    theirs = config_get(real.port, "*")
    mine = config_get(ours.port, "*")
    for name in PER_SERVER:
        theirs.pop(name, None)
        mine.pop(name, None)
    assert {k: v for k, v in mine.items() if k not in config.BEYOND_REDIS_7} == theirs
    # the directives with no effect are named once at startup
    with open(os.path.join(ours.dir, "server.log"), encoding="utf-8") as fh:
        log = fh.read()
    lines = [ln for ln in log.splitlines() if "Accepted with no effect in pyrepl:" in ln]
    assert len(lines) == 1 and "lazyfree-lazy-server-del" in lines[0]
    assert "appendfsync" not in lines[0]     # (the AOF's directives act: pyrepl/aof)
    for acting in ("maxmemory-samples", "lazyfree-lazy-eviction", "lfu-log-factor",
                   "lazyfree-lazy-expire", "lazyfree-lazy-user-del", "set-proc-title"):
        assert acting not in lines[0], acting       # (they act: eviction, lazy freeing, the title)


def test_redis_8_redis_conf_starts_pyrepl_and_reads_as_redis_8(tmp_path: Any) -> None:
    exe = procs.redis8_server_path()
    if exe is None:
        pytest.skip("no Redis 8 redis-server: `make redis-src` builds it from Debian "
                    "experimental's source package (skipped when that source is unavailable)")
    conf = redis_source_file("redis.conf.orig", version=8)   # upstream's file, unpatched
    (tmp_path / "real").mkdir()
    (tmp_path / "ours").mkdir()
    real = start_real(exe, conf, str(tmp_path / "real"))
    try:
        ours = start_ours(conf, str(tmp_path / "ours"))
        try:
            names = file_directives(conf)
            assert "locale-collate" in names and "set-max-listpack-entries" in names
            compared = 0
            for name in names:
                if name in PER_SERVER:
                    continue
                assert config_get(ours.port, name) == config_get(real.port, name), name
                compared += 1
            assert compared >= 60
        finally:
            ours.stop()
    finally:
        real.stop()


# -- CONFIG SET of every mutable directive, side by side ----------------------------------------

# Left out, each for a reason that is about the test, not about pyrepl's parsing:
SKIP_SET = {
    "port", "bind", "dir", "dbfilename",        # move the server under the test's feet
    "requirepass", "masteruser", "masterauth",  # change authentication of the test client
    "appendonly",                               # Redis starts an AOF rewrite child
    "timeout", "maxmemory-clients", "maxclients",  # Redis would drop the test's own client
    "maxmemory",                                # Redis evicts/refuses while we compare
    "watchdog-period",                          # arms SIGALRM in Redis
    "tls-port",                                 # opens a TLS port (test_tls.py moves it)
    "oom-score-adj", "oom-score-adj-values",    # Redis writes /proc/self/oom_score_adj
}
VALUES = ["0", "1", "-1", "7", "yes", "no", "YES", "100mb", "1GB", "10%", "abc", "",
          "512", "0777", "everysec", "local", "nosave now", "save nosave", "Kx", "AKE",
          "50 99.9", "101", "{title}", "{nope}", "2147483648", "-2147483649",
          "99999999999999999999"]


def compare_config_sets(theirs: redis.Redis, ours: redis.Redis, names: list[str],
                        values: list[str]) -> int:
    """CONFIG SET every name to every value on both servers: the same reply (Redis's error
    texts) and the same CONFIG GET afterwards. Returns how many pairs were compared."""
    compared = 0
    for name in names:
        for value in values:
            replies = []
            for client in (theirs, ours):
                try:
                    replies.append(("ok", client.execute_command("CONFIG", "SET", name, value)))
                except redis.ResponseError as e:
                    replies.append(("err", str(e)))
            assert replies[1] == replies[0], (name, value)
            assert ours.execute_command("CONFIG", "GET", name) == \
                theirs.execute_command("CONFIG", "GET", name), (name, value)
            compared += 1
    return compared


def test_config_set_of_every_directive_answers_as_redis_7() -> None:
    if procs.redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    real = procs.start_redis("--enable-protected-configs", "yes", "--enable-debug-command", "yes")
    ours = procs.start_pyrepl("--enable-protected-configs", "yes", "--protected-mode", "no",
                              "--appendonly", "no", "--daemonize", "no")
    try:
        rc = redis.Redis(port=real.port, decode_responses=True, protocol=2)
        oc = redis.Redis(port=ours.port, decode_responses=True, protocol=2)
        names = sorted(rc.execute_command("CONFIG", "GET", "*"))
        names = [n for n in names if n not in SKIP_SET]
        assert compare_config_sets(rc, oc, names, VALUES) > 150 * len(VALUES)
        rc.close()
        oc.close()
    finally:
        ours.stop()
        real.stop()


def test_config_set_of_the_redis_8_names_answers_as_redis_8(tmp_path: Any) -> None:
    """The Redis 8 additions pyrepl accepts (hidden from CONFIG GET * as 7.0 has none of
    them) parse, refuse and read back as a Redis 8 server built from source does."""
    exe = procs.redis8_server_path()
    if exe is None:
        pytest.skip("no Redis 8 redis-server: `make redis-src` builds it from Debian "
                    "experimental's source package (skipped when that source is unavailable)")
    from pyrepl.config import DIRECTIVES

    names = [d.name for d in DIRECTIVES if d.hidden and d.noop and d.mutable
             and d.name not in ("use-exit-on-panic", "watchdog-period", "key-load-delay",
                                "loading-process-events-interval-bytes")]
    assert len(names) >= 14
    (tmp_path / "r8").mkdir()
    port = procs.free_port()
    real = procs.ServerProcess([exe, "--port", str(port), "--dir", str(tmp_path / "r8"),
                                "--save", "", "--enable-debug-command", "yes"],
                               port, str(tmp_path / "r8"), "redis8").start()
    ours = procs.start_pyrepl()
    try:
        rc = redis.Redis(port=real.port, decode_responses=True, protocol=2)
        oc = redis.Redis(port=ours.port, decode_responses=True, protocol=2)
        compare_config_sets(rc, oc, names, [*VALUES, "CN", "off", "cpu net", "mem"])
        rc.close()
        oc.close()
    finally:
        ours.stop()
        real.stop()
