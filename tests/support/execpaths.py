"""Two servers fed the same requests through different execution paths (a run of commands,
the C handlers, the C dispatch) must end the same: ``warm_server`` is a server (with a
backlog, with keyspace events heard by a subscriber) whose commands have all been through
their first call; ``server_state`` is everything a difference would show in; ``requests``
draws plain requests over a few keys (hypothesis)."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.keyspace.strtab import _native as _strtab
from pyrepl.replication.manager import Replication
from tests.support.cores import NOW, cmd

KEYS = ["s", "n", "l", "h", "z", "x:1"]


def seed_picks(seed: int = 7) -> None:
    """The random picks (SPOP's, SRANDMEMBER's: the C table's generator and Python's) start
    from ``seed``: two servers that run the same commands after it pick the same members."""
    if _strtab is not None:
        _strtab.seed(seed)
    random.seed(seed)


@st.composite
def requests(draw: st.DrawFn) -> list[str]:
    key = draw(st.sampled_from(KEYS))
    return draw(st.sampled_from([
        ["SET", key, draw(st.sampled_from(["v", "12", ""]))],
        ["GET", key], ["INCR", key], ["INCRBY", key, "2"], ["LPUSH", key, "a", "b"],
        ["HSET", key, "f", "1"], ["HGET", key, "f"], ["ZADD", key, "1.5", "m"],
        ["ZSCORE", key, "m"], ["SELECT", draw(st.sampled_from(["0", "1"]))], ["PING"],
        ["ECHO", "hi"], ["EXISTS", key], ["TTL", key], ["MGET", key, "n"],
        ["INCR"], ["GET", key, "extra"],          # wrong arity: errors where they stand
        ["DEL", key], ["MULTI"], ["EXEC"], ["DISCARD"], ["WATCH", key],  # not plain
        ["SETEX", key, "100", "v"], ["NOSUCH", key], ["HELLO", "3"], ["HELLO", "2"],
        # propagated otherwise than as they arrive, or not at all
        ["EXPIRE", key, "100"], ["SET", key, "v", "EX", "100"], ["INCRBYFLOAT", key, "1.5"],
        ["GETEX", key, "PX", "5000"], ["SADD", key, "a", "b"], ["HINCRBYFLOAT", key, "f", "0.5"],
        ["SET", key, "v", "NX"], ["GET", draw(st.sampled_from(["e1", "e2"]))],  # expired
        ["EXISTS", "e1", "e2"],
    ]))


def warm_server(backlog: bool, events: bool = False,
                config: list[tuple[str, list[str]]] | None = None) -> tuple[ServerCore, object]:
    core = ServerCore(Config.load(None, [("save", [""]), *(config or [])]), now_ms=NOW)
    if backlog:
        Replication(core).create_backlog()
        assert core.stream_live
    c = core.connection_made()
    if events:     # keyspace events, heard by a subscriber whose output server_state compares
        c.receive_data(cmd("CONFIG", "SET", "notify-keyspace-events", "KEA"))
        core.subscriber = core.connection_made()  # type: ignore[attr-defined]
        core.subscriber.receive_data(cmd("PSUBSCRIBE", "__key*__:*"))  # type: ignore
    for r in (["SET", "w", "1"], ["GET", "w"], ["INCR", "w"], ["INCRBY", "w", "1"],
              ["LPUSH", "wl", "a"], ["HSET", "wh", "f", "1"], ["HGET", "wh", "f"],
              ["ZADD", "wz", "1", "m"], ["ZSCORE", "wz", "m"], ["PING"], ["ECHO", "e"],
              ["EXISTS", "w"], ["TTL", "w"], ["MGET", "w"], ["EXPIRE", "w", "9"],
              ["SET", "w", "1", "EX", "9"], ["INCRBYFLOAT", "w", "1"], ["GETEX", "w"],
              ["SADD", "ws", "a"], ["HINCRBYFLOAT", "wh", "f", "1"], ["SELECT", "0"], ["FLUSHALL"],
              ["SET", "e1", "v", "PX", "10"], ["SET", "e2", "v", "PX", "10"]):
        c.receive_data(cmd(*r))    # every command's first call takes the full path
    c.data_to_send()
    core.now_ms += 100             # e1 and e2 expired: a read deletes them (and propagates)
    return core, c


def server_state(core: ServerCore, c) -> dict[str, object]:
    return {
        "digest": dataset_digest(core.dbs, NOW),
        "cmdstats": {k.name: (s.calls, s.failed, s.rejected) for k, s in core.cmdstats.items()},
        "errorstats": dict(core.errorstats),
        "errors": core.stats.total_error_replies,
        "commands": c.commands,
        "db": c.db.id,
        "proto": c.proto,
        "propagated": b"".join(core.replication.backlog.read_from(1))
        if core.replication is not None else None,
        "blocks": (core.replication.backlog.nblocks, core.replication.backlog.mem)
        if core.replication is not None else None,
        "woff": c.woff,
        "stats": (core.dirty, core.stats.keyspace_hits, core.stats.keyspace_misses,
                  core.stats.expired_keys),
        "events": core.subscriber.data_to_send() if hasattr(core, "subscriber") else None,
    }
