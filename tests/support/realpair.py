"""A pyrepl master with real redis-server replicas, for the e2e and interop tests: INFO as the
server wrote it, starting the master (with its NDJSON sync log) and a replica of it, the
master's sync events, DEBUG DIGEST, and waiting until a replica has everything."""

from __future__ import annotations

import redis

from pyrepl.collect.info import parse_info
from tests.support.procs import ServerProcess, start_pyrepl, start_redis, sync_events
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for

# The replication user Redis documents (``user repl on >pw +psync +replconf +ping``) as server
# arguments, and a replica's arguments to sync as it.
REPL_USER = ("--user", "repl", "on", ">pw", "+psync", "+replconf", "+ping")
AS_REPL = ("--masteruser", "repl", "--masterauth", "pw")


def info(r: redis.Redis, section: str) -> dict[str, str]:
    """INFO as the server wrote it (field -> raw text value)."""
    port = r.connection_pool.connection_kwargs["port"]
    with RawClient(port) as c:
        raw = parse_reply(c.call("INFO", section))
    assert isinstance(raw, bytes), raw
    return parse_info(raw.decode())


def start_master(*extra: str) -> ServerProcess:
    return start_pyrepl("--sync-log-file", "sync.ndjson", "--loglevel", "notice", *extra)


def start_replica_of(master: ServerProcess, *extra: str) -> ServerProcess:
    return start_redis("--replicaof", "127.0.0.1", str(master.port),
                       "--enable-debug-command", "yes", *extra)


def events(master: ServerProcess, name: str | None = None) -> list[dict]:
    return [e for e in sync_events(master) if name is None or e["event"] == name]


def digest(r: redis.Redis) -> str:
    """DEBUG DIGEST (with a long read timeout: pyrepl digests a large dataset in Python, which
    takes seconds on a loaded machine)."""
    kw = r.connection_pool.connection_kwargs
    with redis.Redis(host=kw.get("host", "localhost"), port=kw["port"], db=kw.get("db", 0),
                     socket_timeout=120) as slow:
        d = slow.execute_command("DEBUG", "DIGEST")
    return d.decode() if isinstance(d, bytes) else d


def wait_in_sync(m: redis.Redis, rep: redis.Redis, timeout: float = 60.0) -> None:
    """Until the replica's link is up and it processed everything the master wrote."""

    def synced() -> bool:
        ri = info(rep, "replication")
        mi = info(m, "replication")
        port = rep.connection_pool.connection_kwargs["port"]
        lines = [v for k, v in mi.items() if k.startswith("slave")]
        return (ri.get("master_link_status") == "up"
                and ri.get("slave_repl_offset") == mi["master_repl_offset"]
                and any(f"port={port},state=online" in v for v in lines))

    wait_for(synced, timeout, interval=0.05, what="replica in sync with the master")
