"""A master core and a replica core linked in memory, driven by hypothesis through faults.

Theory of operation: two real ``ServerCore`` + ``Replication`` objects
(tests/support/memnet.py's ``MemNode``) talk over ``MemConn`` byte queues; the only stand-ins
are the OS-boundary adapters (connections, the snapshot child, the disk bulk transfer, fork).
Hypothesis chooses the
configuration (disk, diskless or Redis 8 rdb-channel full sync, a replica full-sync buffer
limit that stops reading the main connection, backlog sizes small enough to force full syncs,
ping period, repl-timeout) and a schedule of steps: write commands of every type (MULTI/EXEC,
SELECT, TTLs, non-deterministic ones the master must rewrite), moving bytes in chunks of any
size in either direction, letting queued connection events, snapshot children and disk
transfers progress, advancing the fake clock (ACKs, PINGs, keepalives, timeouts, reconnects)
and dropping the link from either side or in the network at any point (before, during and
after the snapshot, mid-stream; either connection of an rdb-channel sync). The schedule is cut
into segments; after some of them, and at the end, the network is run to quiescence (the clock
advancing a second at a time) and the two nodes must agree: same ``master_repl_offset``, the
replica's ``slave_repl_offset`` equal to it, the same ids, identical backlog bytes where both
backlogs overlap, and equal ``DEBUG DIGEST``; every full sync the master decided carries a
reason code from ``psync.FULL_REASONS``; and the replica never met a protocol or load error
(the master is honest, and a corrupt stream would otherwise heal itself through a full sync).
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from pyrepl.replication.master import SlaveState
from pyrepl.replication.psync import FULL_REASONS
from pyrepl.replication.replica import ReplState
from tests.support.memnet import MemNet, MemNode

MASTER_PORT = 7101
REPLICA_PORT = 7102
NOW = 1_700_000_000_000

# -- commands ------------------------------------------------------------------------------

VAL = st.one_of(st.integers(-1000, 10**6).map(str), st.sampled_from(["", "x", "a b", "é"]),
                st.integers(1, 300).map(lambda n: "v" * n))
NUM = st.integers(-100, 100).map(str)
IDX = st.integers(-5, 5).map(str)
SUF = st.sampled_from(["a", "b", "c"])


def key(prefix: str) -> st.SearchStrategy[str]:
    return SUF.map(lambda s: f"{prefix}:{s}")


def cmd(*parts: st.SearchStrategy[str] | str) -> st.SearchStrategy[list[str]]:
    return st.tuples(*[p if isinstance(p, st.SearchStrategy) else st.just(p)
                       for p in parts]).map(list)


ANYKEY = st.one_of(key("s"), key("l"), key("h"), key("z"), key("t"), key("n"))
STRING_CMDS = st.one_of(
    cmd("SET", key("s"), VAL),
    st.tuples(cmd("SET", key("s"), VAL), st.sampled_from(
        [["EX", "1"], ["PX", "2500"], ["KEEPTTL"], ["NX"], ["XX"], ["GET"], ["EX", "100"]])
    ).map(lambda t: t[0] + t[1]),
    cmd("APPEND", key("s"), VAL), cmd("INCR", key("n")), cmd("DECRBY", key("n"), NUM),
    cmd("INCRBYFLOAT", key("n"), st.sampled_from(["1.5", "-0.25", "3e2"])),
    cmd("SETRANGE", key("s"), st.integers(0, 20).map(str), VAL),
    cmd("GETDEL", key("s")), cmd("GETEX", key("s"), "PX", st.integers(1, 3000).map(str)),
    cmd("GETEX", key("s"), "PERSIST"), cmd("SETEX", key("s"), "2", VAL),
    cmd("PSETEX", key("s"), "1500", VAL), cmd("MSET", key("s"), VAL, key("s"), VAL),
    cmd("SETNX", key("s"), VAL), cmd("GETSET", key("s"), VAL),
)
LIST_CMDS = st.one_of(
    cmd("RPUSH", key("l"), VAL, VAL), cmd("LPUSH", key("l"), VAL), cmd("LPOP", key("l")),
    cmd("RPOP", key("l"), st.integers(1, 3).map(str)),
    cmd("LMOVE", key("l"), key("l"), st.sampled_from(["LEFT", "RIGHT"]),
        st.sampled_from(["LEFT", "RIGHT"])),
    cmd("RPOPLPUSH", key("l"), key("l")), cmd("LTRIM", key("l"), IDX, IDX),
    cmd("LSET", key("l"), IDX, VAL), cmd("LINSERT", key("l"), "BEFORE", VAL, VAL),
    cmd("LREM", key("l"), IDX, VAL), cmd("LMPOP", "2", key("l"), key("l"), "RIGHT", "COUNT", "2"),
)
SET_CMDS = st.one_of(
    cmd("SADD", key("t"), VAL, VAL, VAL), cmd("SREM", key("t"), VAL),
    cmd("SPOP", key("t")), cmd("SPOP", key("t"), st.integers(1, 3).map(str)),
    cmd("SMOVE", key("t"), key("t"), VAL),
    cmd(st.sampled_from(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), key("t"), key("t"),
        key("t")),
)
HASH_CMDS = st.one_of(
    cmd("HSET", key("h"), VAL, VAL, VAL, VAL), cmd("HDEL", key("h"), VAL),
    cmd("HINCRBY", key("h"), "cnt", NUM), cmd("HINCRBYFLOAT", key("h"), "f", "0.5"),
    cmd("HSETNX", key("h"), VAL, VAL),
)
ZSET_CMDS = st.one_of(
    cmd("ZADD", key("z"), NUM, VAL, st.sampled_from(["1.5", "-inf", "inf", "0"]), VAL),
    cmd("ZINCRBY", key("z"), "2.5", VAL), cmd("ZREM", key("z"), VAL),
    cmd(st.sampled_from(["ZPOPMIN", "ZPOPMAX"]), key("z"), st.integers(1, 2).map(str)),
    cmd("ZMPOP", "2", key("z"), key("z"), "MIN"),
    cmd(st.sampled_from(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), key("z"), "2",
        key("z"), key("z")),
    cmd("ZRANGESTORE", key("z"), key("z"), "0", "-1"),
    cmd("ZREMRANGEBYSCORE", key("z"), "-10", "10"), cmd("ZREMRANGEBYRANK", key("z"), "0", "0"),
)
KEY_CMDS = st.one_of(
    cmd(st.sampled_from(["DEL", "UNLINK"]), ANYKEY, ANYKEY),
    cmd("EXPIRE", ANYKEY, st.sampled_from(["1", "3", "100"])),
    cmd("PEXPIRE", ANYKEY, st.sampled_from(["1", "700", "2000"])),
    cmd("PEXPIREAT", ANYKEY, st.integers(-2000, 5000).map(lambda d: str(NOW + d))),
    cmd("PERSIST", ANYKEY), cmd("RENAME", ANYKEY, ANYKEY), cmd("RENAMENX", ANYKEY, ANYKEY),
    cmd("COPY", ANYKEY, ANYKEY, "REPLACE"), cmd("MOVE", ANYKEY, st.sampled_from(["0", "1"])),
    cmd("SELECT", st.sampled_from(["0", "1", "2"])),
    cmd("SWAPDB", st.sampled_from(["0", "1"]), st.sampled_from(["1", "2"])),
)
RARE_CMDS = st.sampled_from([["FLUSHDB"], ["FLUSHALL"]])
ONE_CMD = st.one_of(STRING_CMDS, LIST_CMDS, SET_CMDS, HASH_CMDS, ZSET_CMDS, KEY_CMDS,
                    STRING_CMDS, KEY_CMDS)
WRITE = st.one_of(
    ONE_CMD.map(lambda c: [c]),
    st.lists(ONE_CMD, min_size=1, max_size=4).map(lambda cs: [["MULTI"], *cs, ["EXEC"]]),
    RARE_CMDS.map(lambda c: [c]),
)

# -- the schedule --------------------------------------------------------------------------

WRITE_STEP = st.tuples(st.just("write"), WRITE)
DROP_STEP = st.tuples(st.just("drop"),
                     st.sampled_from(["kill-replica", "kill-master", "reset", "reset-rdb"]))
SETTLE_STEP = st.one_of(st.just(("settle",)),
                        st.tuples(st.just("advance"), st.integers(1, 60)))
# a gap in the link followed by writes: what a small backlog cannot cover
GAP_STEP = st.tuples(st.just("gap"), st.sampled_from(["kill-replica", "kill-master", "reset"]),
                     st.lists(WRITE, min_size=1, max_size=5))
# writes while a snapshot is being made / transferred / loaded (held or buffered stream)
SNAPSHOT_WRITES_STEP = st.tuples(st.just("snapshot-writes"), st.lists(WRITE, min_size=1,
                                                                       max_size=5))
STEP = st.one_of(
    WRITE_STEP, WRITE_STEP, WRITE_STEP, SETTLE_STEP, SETTLE_STEP, DROP_STEP, GAP_STEP,
    SNAPSHOT_WRITES_STEP,
    st.tuples(st.just("deliver"), st.sampled_from(["m2r", "r2m"]),
              st.sampled_from([1, 7, 40, 200, 1500, 1 << 20]), st.booleans()),
    st.tuples(st.just("event")),
    st.tuples(st.just("background")),
    st.tuples(st.just("pump")),
    st.tuples(st.just("tick"), st.sampled_from([10, 300, 1000, 2500, 7000])),
)

CONFIG = st.fixed_dictionaries({
    "repl-diskless-sync": st.sampled_from(["yes", "yes", "no"]),
    "repl-rdb-channel": st.sampled_from(["yes", "yes", "no"]),  # Redis 8's (needs diskless)
    "repl-diskless-sync-delay": st.sampled_from(["0", "1"]),
    "repl-backlog-size": st.sampled_from(["64", "300", "2048", "1mb"]),
    "repl-ping-replica-period": st.sampled_from(["1", "3", "10"]),
    "repl-timeout": st.sampled_from(["2", "5", "60"]),
    # replica only: "1" stops reading the main connection at the first buffered read
    "replica-full-sync-buffer-limit": st.sampled_from(["0", "1"]),
})
REPLICA_ONLY = ("replica-full-sync-buffer-limit",)


# Redis 7.0's one-connection full sync (the regression test below speaks it by hand).
CLASSIC = [("repl-rdb-channel", ["no"])]


def run_writes(m: MemNode, block: list[list[str]]) -> None:
    for argv in block:
        m.run(*argv)


def current_conn(r: MemNode, rdb: bool = False):  # noqa: ANN201 - the MemConn, or None
    io = r.host.replica_io
    return io.rdb_conn if rdb else io.conn


def do_step(net: MemNet, m: MemNode, r: MemNode, step: tuple) -> None:
    kind = step[0]
    if kind == "write":
        run_writes(m, step[1])
    elif kind == "deliver":
        conn = current_conn(r, step[3])
        if conn is not None:
            net.deliver(conn, step[1], step[2])
    elif kind == "event":
        if net.events:
            net.events.popleft()()
            net.flush()
    elif kind == "background":
        net.background()
    elif kind == "pump":
        net.pump()
    elif kind == "advance":  # the first n things in flight happen: a random cut point
        for _ in range(step[1]):
            if not net.step() and not net.background():
                break
    elif kind == "settle":  # everything in flight happens, but the clock stands still
        for _ in range(50):
            net.pump()
            if not net.background():
                break
    elif kind == "tick":
        net.tick(step[1])
    elif kind == "snapshot-writes":
        for _ in range(200):  # things happen until a snapshot child exists (bounded)
            if m.repl.master.snapshots.current is not None:
                break
            if not net.step() and not net.background():
                break
        for block in step[1]:
            run_writes(m, block)
    elif kind == "gap":
        do_step(net, m, r, ("drop", step[1]))
        for block in step[2]:
            run_writes(m, block)
    elif kind == "drop":
        how = step[1]
        if how == "kill-replica":
            m.run("CLIENT", "KILL", "TYPE", "replica")
        elif how == "kill-master":
            r.run("CLIENT", "KILL", "TYPE", "master")
        else:
            conn = current_conn(r, how == "reset-rdb")
            if conn is not None:
                net.abort(conn)


def synced(m: MemNode, r: MemNode) -> bool:
    side = r.side
    links = m.repl.master.links
    return (side.state is ReplState.CONNECTED and side.stream.master is not None
            # rdb channel closed, buffer drained
            and side.channel.fsbuf is None and side.channel.rdbch is None
            and len(links) == 1 and links[0].state is SlaveState.ONLINE and links[0].streaming
            and side.stream.master.reploff == m.repl.master_repl_offset)


def quiesce(net: MemNet, m: MemNode, r: MemNode, rounds: int = 400) -> None:
    """Run the network, the children and the cron until the pair is in sync (bounded)."""
    ticks = 0
    for _ in range(rounds):
        net.pump()
        if net.background():
            continue
        if synced(m, r):
            return
        net.tick(1000)
        ticks += 1
    raise AssertionError(f"the pair did not converge after {ticks} ticks: replica "
                         f"{r.side.state.name}, master links "
                         f"{[lk.state.name for lk in m.repl.master.links]}")


def info(n: MemNode) -> dict[str, object]:
    return dict(n.repl.info_fields())


def offsets_hold(*nodes: MemNode) -> None:
    """master_repl_offset is kept once (Replication); a node's backlog, when it has one, ends
    at it: ``first_byte_offset + histlen - 1 == master_repl_offset``."""
    for n in nodes:
        b = n.repl.backlog
        if b is not None:
            assert b.first_byte_offset + b.histlen - 1 == n.repl.master_repl_offset


def check_agree(m: MemNode, r: MemNode) -> None:
    """The pair is in sync: offsets, ids, the verbatim stream, the datasets, the reasons."""
    mi, ri = info(m), info(r)
    assert ri["master_link_status"] == "up"
    assert ri["master_repl_offset"] == mi["master_repl_offset"]
    assert ri["slave_repl_offset"] == mi["master_repl_offset"]
    assert ri["slave_read_repl_offset"] == mi["master_repl_offset"]
    assert ri["master_replid"] == mi["master_replid"]
    mb, rb = m.repl.backlog, r.repl.backlog
    assert mb is not None and rb is not None
    offsets_hold(m, r)
    start = max(mb.first_byte_offset, rb.first_byte_offset)
    assert b"".join(rb.read_from(start)) == b"".join(mb.read_from(start))
    assert r.run("DEBUG", "DIGEST") == m.run("DEBUG", "DIGEST")
    decisions = [e for e in m.events if e["event"] == "psync_decision"]
    # a full sync is decided on the main connection: classic, or through an rdb channel
    full = [e for e in decisions if e["result"] in ("full", "rdbchannel")]
    assert all(e.get("reason") in FULL_REASONS for e in full), full
    stats = m.core.stats
    assert full and full[0]["reason"] == "no-history"  # the first sync is always full
    # (a cut full sync that resumed is neither: the fake I/O keeps no copies, so none does)
    resumed = [e for e in decisions if e["result"] == "resume"]
    assert len(resumed) == stats.repl_resumed_syncs == 0
    assert len(decisions) - len(full) == stats.sync_partial_ok
    assert all(e["reason"] == "continue" for e in decisions if e["result"] == "continue")
    # sync_full counts a classic decision at once, an rdb-channel one when its rdb channel
    # asks for the snapshot (a main connection dropped before that never gets one)
    classic = sum(e["result"] == "full" for e in decisions)
    assert classic <= stats.sync_full <= len(full)
    assert stats.sync_full >= 1
    replies = [e for e in r.events if e["event"] == "psync_reply"]
    assert sum(e["result"] in ("full", "rdbchannel") for e in replies) <= len(full)
    # The master is honest: the replica never sees a broken stream or payload (a corrupt
    # stream would heal itself through a full sync and hide behind equal digests), and no
    # command that succeeded on the master fails on the replica.
    bad = [e for e in r.events if e["event"] in ("link_down", "sync_failed")
           and e.get("reason") in ("protocol-error", "load-error", "bad-protocol")]
    assert not bad, bad
    critical = [msg for _, msg in r.core.log.lines
                if "CRITICAL" in msg or "Protocol error" in msg or "state machine" in msg]
    assert not critical, critical


SEGMENTS = st.lists(st.tuples(st.lists(STEP, min_size=4, max_size=20), st.booleans()),
                    min_size=1,
                    max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(cfg=CONFIG, before=st.lists(WRITE, max_size=6), segments=SEGMENTS,
       rng=st.randoms(use_true_random=False))
def test_pair_converges_through_any_schedule_of_faults(cfg: dict[str, str], before: list,
                                                       segments: list, rng) -> None:  # noqa: ANN001
    """Segments of random steps; after a segment marked so, and at the end, the pair must
    converge and agree."""
    with tempfile.TemporaryDirectory(prefix="pyrepl-sim-") as tmp:
        net = MemNet(NOW, rng)
        overrides = [(k, [v]) for k, v in cfg.items() if k not in REPLICA_ONLY]
        m = MemNode(net, MASTER_PORT, tmp, *overrides)
        rdir = tempfile.mkdtemp(dir=tmp)  # each node has its own dump.rdb
        r = MemNode(net, REPLICA_PORT, rdir, *[(k, [cfg[k]]) for k in (
            "repl-timeout", "repl-rdb-channel", "replica-full-sync-buffer-limit")],
            replicaof=MASTER_PORT)
        for block in before:
            run_writes(m, block)
        r.repl.start()
        for i, (steps, converge) in enumerate(segments):
            for step in steps:
                do_step(net, m, r, step)
                offsets_hold(m, r)
            if converge or i == len(segments) - 1:
                quiesce(net, m, r)
                check_agree(m, r)

        stats = m.core.stats
        for e in [e for e in m.events if e["event"] == "psync_decision"][1:]:
            event(f"later decision: {e['reason']}")
        event(f"partial syncs: {min(stats.sync_partial_ok, 3)}+")
        drained = [e for e in r.events if e["event"] == "buffer_drained"]
        event(f"rdb-channel syncs: {min(len(drained), 2)}+, "
              f"{'some' if any(e.get('bytes') for e in drained) else 'no'} buffered stream")
        event(f"replica_lost reasons: "
              f"{sorted({e.get('reason') for e in m.events if e['event'] == 'replica_lost'})}")
        event(f"replica link_down reasons: "
              f"{sorted({e.get('reason') for e in r.events if e['event'] == 'link_down'})}")
        event(f"sync_failed: "
              f"{sorted({e.get('reason') for e in r.events if e['event'] == 'sync_failed'})}")
        # it keeps up: more writes after the faults arrive exactly
        m.run("SET", "after:faults", "1")
        m.run("SELECT", "0")
        m.run("INCR", "after:faults:n")
        net.pump()
        assert r.side.stream.master.reploff == m.repl.master_repl_offset
        assert r.run("DEBUG", "DIGEST") == m.run("DEBUG", "DIGEST")



@pytest.mark.parametrize("limit", ["0", "1"])
@pytest.mark.parametrize("seed", range(4))
def test_rdb_channel_buffers_the_stream_during_the_load_and_drains_it_in_order(
        limit: str, seed: int) -> None:
    """The Redis 8 path on purpose: writes land while the snapshot is made and loaded, the
    replica buffers the main connection (and with a 1-byte limit stops reading it), then
    drains it after the swap; chunks of any size, a few seeds."""
    import random

    with tempfile.TemporaryDirectory(prefix="pyrepl-sim-") as tmp:
        net = MemNet(NOW, random.Random(seed))
        m = MemNode(net, MASTER_PORT, tmp, ("repl-diskless-sync-delay", ["0"]))
        r = MemNode(net, REPLICA_PORT, tempfile.mkdtemp(dir=tmp),
                    ("replica-full-sync-buffer-limit", [limit]), replicaof=MASTER_PORT)
        for i in range(50):
            m.run("RPUSH", f"l{i % 5}", *[f"v{i}-{j}" for j in range(20)])
        r.repl.start()
        for _ in range(500):  # up to the fork of the rdb channel's snapshot
            if m.repl.master.snapshots.current is not None:
                break
            assert net.step() or net.background()
        assert m.repl.master.snapshots.current is not None
        for i in range(300):  # streamed on the main connection from the fork on
            m.run("SET", f"during:{i}", "x" * (i % 50))
            if i % 40 == 0:
                net.step()
        quiesce(net, m, r)
        check_agree(m, r)
        drained = [e for e in r.events if e["event"] == "buffer_drained"]
        assert len(drained) == 1 and drained[0]["bytes"] > 0
        assert m.core.stats.sync_full == 1 and m.core.stats.sync_partial_ok == 0
        stopped = any("Replication buffer limit has been reached" in msg
                      for _, msg in r.core.log.lines)
        assert stopped == (limit == "1")
        assert r.run("GET", "during:299") == b"$49\r\n" + b"x" * 49 + b"\r\n"

# -- regression: an EOF-marked RDB cut short ------------------------------------------------------

class _MasterWire:
    """The replica side's I/O port with the test as the master: records what it sends."""

    def __init__(self) -> None:
        self.token = 0
        self.sent: list[bytes] = []

    def connect(self, token: int, host: str, port: int) -> None:
        self.token = token

    def send(self, token: int, data: bytes) -> None:
        self.sent.append(data)

    def close(self, token: int) -> None:
        pass

    def link_info(self, token: int) -> None:
        return None


MARK = b"5c1e0f7a9b3d2c4e6f8a0b1c3d5e7f9a2b4c6d8e"
OLD_ID = "1111111111111111111111111111111111111111"
NEW_ID = "2222222222222222222222222222222222222222"


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(1, 300), cuts=st.lists(st.integers(0, 6000), max_size=8))
@example(cut=200, cuts=[])  # the mark arrives while the decoder expects list elements
@example(cut=200, cuts=list(range(0, 6000, 7)))  # ... a few bytes at a time
def test_an_rdb_cut_short_before_its_eof_mark_fails_at_once_and_applies_nothing(
        cut: int, cuts: list[int]) -> None:
    """Regression: the replica used to wait for repl-timeout when the ``$EOF:`` mark arrived
    while the RDB decoder still expected data; Redis ends the transfer at the mark."""
    from pyrepl.rdb.encoder import encode_rdb_bytes

    with tempfile.TemporaryDirectory(prefix="pyrepl-sim-") as tmp:
        net = MemNet(NOW)
        src = MemNode(net, MASTER_PORT, tmp, *CLASSIC)
        for block in (["SET", "a", "1"], ["RPUSH", "l", *[f"e{i}" for i in range(100)]],
                      ["HSET", "h", "f", "v"], ["SELECT", "2"], ["SET", "b", "x" * 500]):
            src.run(*block)
        rdb_old = encode_rdb_bytes(src.core.dbs, aux={"repl-id": OLD_ID, "repl-offset": 0},
                                   now_ms=NOW)
        src.run("FLUSHALL")
        src.run("SET", "other", "dataset")
        rdb_new = encode_rdb_bytes(src.core.dbs, aux={"repl-id": NEW_ID, "repl-offset": 0},
                                   now_ms=NOW)
        r = MemNode(net, REPLICA_PORT, tempfile.mkdtemp(dir=tmp), *CLASSIC,
                    replicaof=MASTER_PORT)
        wire = _MasterWire()
        r.host.replica_io = wire
        side = r.side
        handshake = b"+PONG\r\n+OK\r\n+OK\r\n"
        side.start()
        side.on_connected(wire.token)
        side.on_data(wire.token, handshake + b"+FULLRESYNC %s 0\r\n$%d\r\n"
                     % (OLD_ID.encode(), len(rdb_old)) + rdb_old)
        assert side.state is ReplState.CONNECTED
        old_digest = r.run("DEBUG", "DIGEST")
        side.on_closed(wire.token, "Connection reset by peer")  # cached; reconnects at once
        side.on_connected(wire.token)
        payload = rdb_new[:-cut]
        data = (handshake + b"+FULLRESYNC %s 0\r\n$EOF:%s\r\n" % (NEW_ID.encode(), MARK)
                + payload + MARK)
        prev = 0
        for pos in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
            if pos > prev:
                side.on_data(wire.token, data[prev:pos])
                prev = pos
        # failed at once (at the mark, or earlier when mark bytes broke the RDB's structure
        # or checksum), not waiting for more
        assert side.state is ReplState.CONNECT
        errors = [msg for level, msg in r.core.log.lines if level == "warning"
                  and ("Failed trying to load the MASTER synchronization DB from socket" in msg
                       or "EOF marker is broken" in msg)]
        assert len(errors) == 1, r.core.log.lines[-5:]
        failed = [e for e in r.events if e["event"] == "sync_failed"]
        assert [e["reason"] for e in failed] == ["load-error"]
        assert r.run("DEBUG", "DIGEST") == old_digest  # nothing half-applied
        assert r.run("GET", "a") == b"$1\r\n1\r\n"
