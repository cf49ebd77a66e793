"""The Redis/Valkey log parser on real log lines (no Spark: fast).

tests/data/redislog/ holds the logs of ``redislog_scenario.py`` run once each against Debian's
redis-server 7.0.15, the Redis 8.6 build of ``make redis-src`` (``--repl-rdb-channel yes``) and
Valkey 9.1 (``--dual-channel-replication-enabled yes``): in each, two fresh replicas full-sync,
two link kills give partial syncs, a frozen replica falls out of a 16 KiB backlog, and a
promotion is followed by partial syncs through the secondary replication id.
"""

from __future__ import annotations

import datetime as dt
import gzip
import os
from collections import Counter

import pytest

from pyrepl.analytics import logline, redislog
from pyrepl.analytics.logread import (
    kind_of,
    parse_logs,
    resolve_nodes,
    set_key,
    timezone,
)
from pyrepl.events import EVENTS, FIELD_TYPES

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "redislog")
FLAVOURS = {"redis7": redislog.REDIS, "redis8": redislog.REDIS, "valkey9": redislog.VALKEY}
MODE = {"redis7": "diskless", "redis8": "rdb-channel", "valkey9": "dual-channel"}
FULL = {"redis7": "full", "redis8": "rdbchannel", "valkey9": "dualchannel"}


def sample(name: str) -> dict[str, bytes]:
    d = os.path.join(DATA, name)
    return {os.path.join(d, f): open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def own_port(data: bytes) -> int:
    for line in data.decode().splitlines():
        if "Running mode=" in line:
            return int(line.rsplit("port=", 1)[1].rstrip("."))
    raise AssertionError("no port")


@pytest.mark.parametrize("name", sorted(FLAVOURS))
def test_the_scenario_as_events(name: str) -> None:
    files = sample(name)
    events, infos = parse_logs(files)
    port = {os.path.basename(p)[:-4]: own_port(b) for p, b in files.items()}
    node = {n: f"127.0.0.1:{p}" for n, p in port.items()}
    m, r1, r2 = node["m"], node["r1"], node["r2"]
    # every line is known: no gap in the mapping for these versions
    for i in infos:
        assert i.counts.get("log-unknown", 0) == 0, i.unknown
        assert i.counts.get("log-unparseable", 0) == 0
    assert {e["source"] for e in events} == {FLAVOURS[name]}
    for e in events:
        assert e["event"] in EVENTS and set(e) <= set(FIELD_TYPES), e
    dec = [e for e in events if e["event"] == "psync_decision"]
    got = Counter((e["node"], e["peer"], e["result"], e["reason"]) for e in dec)
    full = FULL[name]
    assert got == Counter({
        (m, r1, full, "no-history"): 1, (m, r2, full, "no-history"): 1,
        (m, r1, "continue", "continue"): 2, (m, r2, "continue", "continue"): 1,
        (m, r2, full, "offset-before-backlog"): 1,
        # the promotion: R1 continues R2 and M through its secondary replication id
        (r1, r2, "continue", "continue"): 1, (r1, m, "continue", "continue"): 1}), got
    obb = next(e for e in dec if e["reason"] == "offset-before-backlog")
    assert obb["req_offset"] > 1
    if name == "valkey9":   # Valkey 9 logs the backlog's range: the gap is exact
        assert obb["gap"] > 200 * 1000 - 40 * 1024 and obb["backlog_histlen"] >= 16 * 1024
        assert obb["gap"] + obb["backlog_histlen"] == obb["master_repl_offset"] + 1 \
            - obb["req_offset"]
    sent = Counter((e["node"], e["peer"], e["req_replid"] == "?") for e in events
                   if e["event"] == "psync_sent")
    assert sent == Counter({(r1, m, True): 1, (r1, m, False): 2, (r2, m, True): 1,
                            (r2, m, False): 2, (r2, r1, False): 1, (m, r1, False): 1}), sent
    # each replica-side attempt is one sync_id from PSYNC to link up
    by_sid: dict[str, list[str]] = {}
    for e in events:
        if e["role"] == "replica" and e["event"] != "link_down":
            by_sid.setdefault(e["sync_id"], []).append(e["event"])
    fulls = [v for v in by_sid.values() if "load_done" in v]
    assert len(fulls) == 3
    for v in fulls:
        assert v[:2] == ["psync_sent", "psync_reply"] and "rdb_first_byte" in v \
            and "rdb_received" in v and "link_up" in v
        assert ("buffer_drained" in v) == (MODE[name] != "diskless")
    modes = {e["mode"] for e in events if e["event"] == "link_up" and e["result"] == "full"}
    assert modes == {MODE[name]}
    keys = sorted(e["keys"] for e in events if e["event"] == "load_done")
    assert keys == [200, 200, 420]
    downs = Counter((e["node"], e["reason"]) for e in events if e["event"] == "link_down")
    assert downs[(r1, "promoted")] == 1 and downs[(r2, "replicaof")] == 1
    assert downs[(r1, "connection-lost")] == 2 and downs[(r2, "connection-lost")] == 2
    # the master half and the replica half of each sync share the link and the request
    for e in dec:
        if e.get("req_offset") is not None and e.get("req_replid") is not None:
            assert any(s["node"] == e["peer"] and s["peer"] == e["node"]
                       and s["req_offset"] == e["req_offset"]
                       and abs(s["ts"] - e["ts"]) < 1 for s in events
                       if s["event"] == "psync_sent"), e


def test_master_side_reasons_from_single_lines() -> None:
    def decide(*msgs: str, backlog_freed: bool = False) -> dict:
        lines = ["1:M 23 Nov 2026 03:57:11.950 * Running mode=standalone, port=6379."]
        if backlog_freed:
            lines.append("1:M 23 Nov 2026 03:57:12.000 * Replication backlog freed after 3600 "
                         "seconds without connected replicas.")
        lines += [f"1:M 23 Nov 2026 03:57:12.{i:03d} * {m}" for i, m in enumerate(msgs, 100)]
        p = redislog.parse_lines(lines)
        return next(e for e in p.events if e["event"] == "psync_decision")

    ask = "Replica 10.0.0.2:6380 asks for synchronization"
    lack = ("Unable to partial resync with replica 10.0.0.2:6380 for lack of backlog (Replica "
            "request was: 5000).")
    d = decide(ask, lack)
    assert (d["result"], d["reason"], d["req_offset"], d["peer"]) == \
        ("full", "offset-before-backlog", 5000, "10.0.0.2:6380")
    d = decide(ask, lack, "Warning: replica 10.0.0.2:6380 tried to PSYNC with an offset that is "
                          "greater than the master replication offset.")
    assert d["reason"] == "offset-ahead"
    assert decide(ask, lack, backlog_freed=True)["reason"] == "backlog-inactive"
    d = decide(ask, "Partial resynchronization not accepted: Replication ID mismatch (Replica "
                    f"asked for '{'a' * 40}', my replication IDs are '{'b' * 40}' and "
                    f"'{'0' * 40}')")
    assert (d["reason"], d["replid"]) == ("replid-mismatch", "b" * 40)
    d = decide(ask, "Partial resynchronization not accepted: Requested offset for second ID "
                    "was 900, but I can reply up to 800")
    assert d["reason"] == "replid-mismatch"
    d = decide(ask, "Full resync requested by replica 10.0.0.2:6380")
    assert (d["reason"], d["req_replid"], d["req_offset"]) == ("no-history", "?", -1)
    d = decide(ask, "Starting BGSAVE for SYNC with target: disk")       # the old SYNC command
    assert (d["result"], d["reason"]) == ("full", "replica-requested")
    d = decide(ask, "Unable to partial resync with replica 10.0.0.2:6380 for lack of backlog "
                    f"(Replica request was {'c' * 40}:100, and I can only reply with the range "
                    "[1000, 5000])")
    assert (d["reason"], d["gap"], d["backlog_histlen"], d["master_repl_offset"]) == \
        ("offset-before-backlog", 900, 4001, 5000)
    d = decide(ask, "Unable to partial resync with replica 10.0.0.2:6380 for lack of backlog "
                    f"(Replica request was: {'c' * 40}:100).")
    assert d["reason"] == "backlog-inactive"


def test_output_buffer_limit_timeout_and_disk_sync_on_the_master() -> None:
    lines = [
        "7:M 01 Jan 2026 00:00:00.000 * Running mode=standalone, port=6379.",
        "7:M 01 Jan 2026 00:00:01.000 * Replica 10.0.0.2:6380 asks for synchronization",
        "7:M 01 Jan 2026 00:00:01.000 * Full resync requested by replica 10.0.0.2:6380",
        "7:M 01 Jan 2026 00:00:01.001 * Starting BGSAVE for SYNC with target: disk",
        "7:M 01 Jan 2026 00:00:01.002 * Background saving started by pid 9",
        "7:M 01 Jan 2026 00:00:03.000 # Client id=5 addr=10.0.0.2:41234 laddr=10.0.0.1:6379 "
        "fd=9 name= age=2 idle=0 flags=S db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 "
        "obl=0 oll=1 omem=300000000 cmd=psync user=default resp=2 scheduled to be closed ASAP "
        "for overcoming of output buffer limits.",
        "7:M 01 Jan 2026 00:00:03.001 # Connection with replica 10.0.0.2:6380 lost.",
        "7:M 01 Jan 2026 00:00:04.000 * Replica 10.0.0.3:6380 asks for synchronization",
        "7:M 01 Jan 2026 00:00:04.000 * Full resync requested by replica 10.0.0.3:6380",
        "7:M 01 Jan 2026 00:00:04.000 * Waiting for end of BGSAVE for SYNC",
        "7:M 01 Jan 2026 00:00:05.000 * Synchronization with replica 10.0.0.3:6380 succeeded",
        "7:M 01 Jan 2026 00:01:05.000 # Disconnecting timedout replica (streaming sync): "
        "10.0.0.3:6380",
        "7:M 01 Jan 2026 00:01:05.000 # Connection with replica 10.0.0.3:6380 lost.",
    ]
    ev = redislog.parse_lines(lines).events
    lost = [(e["peer"], e["reason"]) for e in ev if e["event"] == "replica_lost"]
    assert lost == [("10.0.0.2:6380", "output-buffer-limit"), ("10.0.0.3:6380", "timeout")]
    b = [e for e in ev if e["peer"] == "10.0.0.3:6380"]
    assert [e["event"] for e in b] == ["psync_decision", "fullsync_fork", "fullsync_rdb_sent",
                                       "replica_online", "replica_lost"]
    assert len({e["sync_id"] for e in b}) == 1
    assert b[1]["mode"] == "disk" and b[3]["duration_ms"] == 1000.0


def test_replica_side_failures_sized_transfer_and_timeouts() -> None:
    lines = [
        "8:S 01 Jan 2026 00:00:00.000 * Running mode=standalone, port=6380.",
        "8:S 01 Jan 2026 00:00:00.100 * Connecting to MASTER 10.0.0.1:6379",
        "8:S 01 Jan 2026 00:00:00.100 * MASTER <-> REPLICA sync started",
        "8:S 01 Jan 2026 00:00:00.101 # Error condition on socket for SYNC: Connection refused",
        "8:S 01 Jan 2026 00:00:01.100 * Connecting to MASTER 10.0.0.1:6379",
        "8:S 01 Jan 2026 00:00:01.100 * MASTER <-> REPLICA sync started",
        "8:S 01 Jan 2026 00:00:01.101 * Partial resynchronization not possible (no cached master)",
        f"8:S 01 Jan 2026 00:00:01.102 * Full resync from master: {'a' * 40}:100",
        "8:S 01 Jan 2026 00:00:02.102 * MASTER <-> REPLICA sync: receiving 4096 bytes from "
        "master to disk",
        "8:S 01 Jan 2026 00:00:03.102 * MASTER <-> REPLICA sync: Flushing old data",
        "8:S 01 Jan 2026 00:00:03.103 * MASTER <-> REPLICA sync: Loading DB in memory",
        "8:S 01 Jan 2026 00:00:03.200 * Done loading RDB, keys loaded: 7, keys expired: 0.",
        "8:S 01 Jan 2026 00:00:03.202 * MASTER <-> REPLICA sync: Finished with success",
        "8:S 01 Jan 2026 00:01:03.000 # MASTER timeout: no data nor PING received...",
        "8:S 01 Jan 2026 00:01:03.000 # Connection with master lost.",
        "8:S 01 Jan 2026 00:01:03.000 * Caching the disconnected master state.",
        "8:S 01 Jan 2026 00:01:03.001 * Reconnecting to MASTER 10.0.0.1:6379",
        "8:S 01 Jan 2026 00:01:03.001 * MASTER <-> REPLICA sync started",
        f"8:S 01 Jan 2026 00:01:03.002 * Trying a partial resynchronization (request "
        f"{'a' * 40}:5000).",
        "8:S 01 Jan 2026 00:01:03.003 * Master is currently unable to PSYNC but should be in the "
        "future: -NOMASTERLINK Can't SYNC while not connected with my master",
    ]
    p = redislog.parse_lines(lines)
    ev = [(e["event"], e.get("reason") or e.get("result")) for e in p.events]
    assert ev == [("sync_failed", "connect-error"), ("psync_sent", None),
                  ("psync_reply", "full"), ("rdb_first_byte", None), ("rdb_received", None),
                  ("load_done", None), ("link_up", "full"), ("link_down", "timeout"),
                  ("psync_sent", None), ("psync_reply", "try-later"),
                  ("sync_failed", "psync-try-later")]
    rec = next(e for e in p.events if e["event"] == "rdb_received")
    assert rec["bytes"] == 4096 and rec["duration_ms"] == 1000.0 and rec["mode"] == "disk"
    done = next(e for e in p.events if e["event"] == "load_done")
    assert done["keys"] == 7 and done["duration_ms"] == 100.0
    up = next(e for e in p.events if e["event"] == "link_up")
    down = next(e for e in p.events if e["event"] == "link_down")
    assert up["sync_id"] == down["sync_id"] != p.events[0]["sync_id"]


def test_lines_it_does_not_know_are_counted_never_fatal() -> None:
    lines = ["1:M 01 Jan 2026 00:00:00.000 * Running mode=standalone, port=6379.",
             "1:M 01 Jan 2026 00:00:00.001 * DB saved on disk",
             "1:M 01 Jan 2026 00:00:00.002 * Replica 1.2.3.4:5 did something new with the backlog",
             "garbage that is no log line",
             "1:M 99 Foo 2026 00:00:00.003 * a bad date",
             "1:signal-handler (1795406233) Received SIGTERM scheduling shutdown...",
             "                _._                                                  ",
             ""]
    p = redislog.parse_lines(lines)
    assert p.events == []
    assert p.counts == Counter({"lines": 7, "other": 3, "replication": 1, "log-unknown": 1,
                                "log-unparseable": 2})
    assert p.unknown == ["Replica 1.2.3.4:5 did something new with the backlog"]


def test_timestamps_time_zones_and_valkey_formats() -> None:
    utc = logline.parse_ts("23 Nov 2026 03:57:12.111", dt.UTC)
    assert utc == dt.datetime(2026, 11, 23, 3, 57, 12, 111000, dt.UTC).timestamp()
    assert logline.parse_ts("23 Nov 2026 03:57:12.111", timezone("+02:00")) == utc - 7200
    paris = timezone("Europe/Paris")   # winter: UTC+1; summer: UTC+2
    assert logline.parse_ts("23 Nov 2026 03:57:12.111", paris) == utc - 3600
    assert logline.parse_ts("23 Jul 2026 03:57:12.000", paris) == \
        dt.datetime(2026, 7, 23, 1, 57, 12, tzinfo=dt.UTC).timestamp()
    msg = "Replica 10.0.0.2:6380 asks for synchronization"
    for line in (f"5:M 2026-11-23T03:57:12.111+00:00 * {msg}",
                 f"5:M 1795406232111 * {msg}",
                 f'pid=5 role=primary timestamp="2026-11-23T03:57:12.111+00:00" level=notice '
                 f'message="{msg}"'):
        pid, role, ts, m = logline.split_line(line, dt.UTC)
        assert (pid, role, m) == ("5", "M", msg) and ts == pytest.approx(
            utc if "2026-11" in line else 1795406232.111)


def test_kind_is_told_by_content_and_rotated_sets_are_read_as_one(tmp_path) -> None:
    assert kind_of(b'{"ts":1,"event":"link_up","node":"a:1"}\n') is None
    r7 = sample("redis7")
    m = next(b for p, b in r7.items() if p.endswith("m.log"))
    assert kind_of(m) == redislog.REDIS
    assert kind_of(gzip.compress(m)) == redislog.REDIS
    assert kind_of(next(b for p, b in sample("valkey9").items() if p.endswith("m.log"))) == \
        redislog.VALKEY
    assert set_key("/l/redis.log.2.gz") == set_key("/l/redis.log.1") == set_key("/l/redis.log")
    assert set_key("/l/redis.log-20261123.gz") == "/l/redis.log"
    # the replica's log cut in three, rotated (the oldest gzipped) and named out of order:
    # the same events, one sync_id across the cuts, and the port from the first piece
    r2 = next(b for p, b in r7.items() if p.endswith("r2.log")).decode().splitlines(True)
    whole, _ = parse_logs({"/x/r2.log": "".join(r2).encode()})
    a, b = len(r2) // 3, 2 * len(r2) // 3
    while "Finished with success" not in r2[b]:   # cut inside a full sync
        b -= 1
    pieces = {"/x/r2.log.2.gz": gzip.compress("".join(r2[:a]).encode()),
              "/x/r2.log": "".join(r2[b:]).encode(), "/x/r2.log.1": "".join(r2[a:b]).encode()}
    cut, infos = parse_logs(pieces)
    assert len(infos) == 1
    strip = [{k: v for k, v in e.items() if k != "sync_id"} for e in whole]
    assert [{k: v for k, v in e.items() if k != "sync_id"} for e in cut] == strip
    assert [e["sync_id"] for e in cut] == [e["sync_id"].replace(
        whole[0]["sync_id"].split("-")[0], cut[0]["sync_id"].split("-")[0]) for e in whole]


def test_node_names_from_the_other_logs() -> None:
    # three nodes on port 6379 of three hosts: each host is named by the timing of the PSYNC
    # the replica logged and the decision the master logged about it
    def m_line(t: str, peer: str) -> list[str]:
        return [f"1:M 01 Jan 2026 00:00:{t} * Replica {peer} asks for synchronization",
                f"1:M 01 Jan 2026 00:00:{t} * Full resync requested by replica {peer}"]

    def r_lines(pid: int, t: str) -> list[str]:
        return [f"{pid}:S 01 Jan 2026 00:00:00.000 * Running mode=standalone, port=6379.",
                f"{pid}:S 01 Jan 2026 00:00:{t} * Connecting to MASTER 10.0.0.1:6379",
                f"{pid}:S 01 Jan 2026 00:00:{t} * MASTER <-> REPLICA sync started",
                f"{pid}:S 01 Jan 2026 00:00:{t} * Partial resynchronization not possible "
                "(no cached master)"]

    master = ["1:M 01 Jan 2026 00:00:00.000 * Running mode=standalone, port=6379.",
              *m_line("10.000", "10.0.0.2:6379"), *m_line("30.000", "10.0.0.3:6379")]
    files = {"/a/redis.log": "\n".join(master).encode(),
             "/b/redis.log": "\n".join(r_lines(2, "10.001")).encode(),
             "/c/redis.log": "\n".join(r_lines(3, "30.001")).encode(),
             "/d/redis.log": b"9:M 01 Jan 2026 00:00:00.000 * Connection with replica "
                             b"10.0.0.2:6379 lost.\n"}
    events, infos = parse_logs(files)
    nodes = {e["node"] for e in events}
    assert nodes == {"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}
    assert {e["node"] for e in events if e["event"] == "psync_sent"
            and e["ts"] > 1767225620} == {"10.0.0.3:6379"}
    names = resolve_nodes(infos)   # /d names no port of its own: its events are dropped
    assert sum(1 for v in names.values() if v is None) == 1
