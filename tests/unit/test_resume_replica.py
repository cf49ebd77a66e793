"""A cut full sync that resumes, replica side (pyrepl.replication.replica.load.Parked): the
replica keeps the payload it had parsed when the link is cut, asks ``REPLCONF resume <id>
resume-offset <n>`` before its PSYNC, and goes on parsing from ``$RESUME:<n>``.

The "master" is the test: it cuts the payload at any byte (hypothesis), then answers the
resume as a pyrepl master does; the dataset loaded must be the source's, the stream applied.
A master that refuses (a Redis one never gets the capa; an -ERR), a different snapshot, a
header at another offset or the window passing all lead to an ordinary full sync.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.replication.replica import ReplState
from tests.support.cores import NOW, cmd
from tests.support.replica_side import MARK, MASTER_ID, RDB, REPLIES, SRC, Node

S = ReplState
RID = "5d41402abc4b2a76b9719d911017c592aaaaaaaa"
WINDOW = ("repl-full-sync-resume-window", ["60"])
STREAM = cmd("SELECT", "0") + cmd("SET", "after", "sync") + cmd("DEL", "s:1")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _source_after_stream() -> str:
    from tests.support.replica_side import source_dataset

    core = source_dataset()
    c = core.connection_made()
    c.receive_data(STREAM)
    return dataset_digest(core.dbs, NOW)


AFTER = _source_after_stream()


def _payload(diskless: bool) -> tuple[bytes, bytes]:
    """(header, payload) of the snapshot: $EOF:<mark> + RDB + mark, or $<len> + RDB."""
    if diskless:
        return b"$EOF:" + MARK + b"\r\n", RDB + MARK
    return b"$%d\r\n" % len(RDB), RDB


def _cut_node(diskless: bool, have: int) -> Node:
    n = Node(WINDOW)
    n.connect()
    head, payload = _payload(diskless)
    n.feed(REPLIES + b"+FULLRESYNC %s 0 %s\r\n" % (MASTER_ID.encode(), RID.encode()) + head
           + payload[:have])
    assert n.side.state is S.TRANSFER
    n.side.on_closed(n.io.token, "Connection reset by peer")
    return n


def _reconnect(n: Node) -> bytes:
    n.tick(1000)
    n.side.on_connected(n.io.token)
    n.io.take()
    n.feed(REPLIES)
    return n.io.take()


@SETTINGS
@given(diskless=st.booleans(), cut=st.floats(0, 1), cuts=st.lists(st.integers(0, 1 << 20),
                                                                    max_size=8))
def test_a_cut_payload_resumes_from_where_it_stopped(diskless: bool, cut: float,
                                                     cuts: list[int]) -> None:
    _, payload = _payload(diskless)
    have = min(int(len(payload) * cut), len(payload) - 1)
    n = _cut_node(diskless, have)
    assert n.repl.replica.load.parked is not None
    sent = _reconnect(n)
    assert sent.endswith(cmd("REPLCONF", "capa", "eof", "capa", "psync2", "capa",
                             "pyrepl-resume")
                         + cmd("REPLCONF", "resume", RID, "resume-offset", str(have)))
    n.feed(b"+OK\r\n")     # (the PSYNC only after the reply: no pipelining, as Redis needs)
    assert n.io.take() == cmd("PSYNC", "?", "-1")
    rest = (b"\n+FULLRESYNC %s 0 %s\r\n\n" % (MASTER_ID.encode(), RID.encode())
            + b"$RESUME:%d\r\n" % have + payload[have:] + STREAM)
    n.feed_split(rest, [c % (len(rest) + 1) for c in cuts])
    assert n.side.state is S.CONNECTED
    assert n.digest() == AFTER
    assert n.side.stream.master.reploff == len(STREAM)
    lines = [m for _, m in n.core.log.lines]
    assert f"MASTER <-> REPLICA sync: resuming snapshot {RID} from byte {have}" in lines
    assert n.repl.events.recent[[e["event"] for e in n.repl.events.recent].index(
        "psync_reply", 2)]["result"] == "resume"


def test_the_capa_is_said_with_the_window_and_not_without() -> None:
    n = Node(WINDOW)
    n.connect()
    n.io.take()
    n.feed(b"+PONG\r\n")
    assert n.io.take().endswith(cmd("REPLCONF", "capa", "eof", "capa", "psync2", "capa",
                                    "pyrepl-resume"))
    n = Node()      # window 0: Redis 7.0.15's bytes
    n.connect()
    n.io.take()
    n.feed(b"+PONG\r\n")
    assert n.io.take().endswith(cmd("REPLCONF", "capa", "eof", "capa", "psync2"))


@pytest.mark.parametrize("answer", ["refused", "other-snapshot", "wrong-offset"])
def test_a_resume_that_does_not_fit_ends_in_an_ordinary_full_sync(answer: str) -> None:
    have = len(RDB) // 2
    n = _cut_node(False, have)
    _reconnect(n)
    full = (b"+FULLRESYNC %s 7 %s\r\n" % (MASTER_ID.encode(), ("b" * 40).encode())
            + b"$%d\r\n" % len(RDB) + RDB)
    if answer == "refused":
        n.feed(b"-ERR no snapshot %s to resume\r\n" % RID.encode() + full)
    elif answer == "other-snapshot":
        n.feed(b"+OK\r\n" + full)
    else:
        n.feed(b"+OK\r\n+FULLRESYNC %s 0 %s\r\n$RESUME:%d\r\n" % (MASTER_ID.encode(),
                                                                  RID.encode(), have + 1))
        assert n.side.state is S.CONNECTING   # failed, and tries again at once
        assert n.repl.replica.load.parked is None   # (what was kept went)
        assert any("the resumed payload does not go on where it stopped" in m
                   for _, m in n.core.log.lines)
        return
    assert n.side.state is S.CONNECTED and n.repl.replica.load.parked is None
    assert n.digest() == dataset_digest(SRC.dbs, NOW)


def test_what_was_kept_goes_after_the_window() -> None:
    n = _cut_node(True, len(RDB) // 3)
    n.side.set_master("127.0.0.1", 6390)      # (not reconnecting to it: another master)
    for _ in range(61):
        n.tick(1000)
    assert n.repl.replica.load.parked is None
