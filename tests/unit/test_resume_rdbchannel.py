"""A cut rdb-channel full sync resumes, replica side (issue 40, part 3; pyrepl's extension of
Redis 8's dialect between pyrepl nodes).

The "master" is the test. The rdb channel's ``+FULLRESYNC`` names the snapshot; the payload is
cut at any byte (hypothesis) while the main channel had buffered any prefix of the stream,
by the loss of either connection. The replica keeps both, asks ``REPLCONF resume <id>
resume-offset <payload bytes> stream-offset <next stream byte>`` on its new connection, and
goes on from ``$RESUME:``: the dataset must be the snapshot with the whole stream applied once,
in order, and the offset the stream's length. A refused resume gives the buffer's file back.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl.replication.replica import ReplState
from tests.support.cores import cmd
from tests.support.rdbchannel_replica import (
    MARK,
    MASTER_ID,
    Node,
    big_stream,
    expected_digest,
    snapshot,
    to_rdbchannel,
)

S = ReplState
RID = "5d41402abc4b2a76b9719d911017c592bbbbbbbb"
WINDOW = ("repl-full-sync-resume-window", ["60"])
PAYLOAD = snapshot(0) + MARK
STREAM = big_stream(40, value_size=64) + cmd("SET", "after", "sync")
DIGEST = expected_digest(STREAM)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _cut(n: Node, have: int, buffered: int, by: str) -> None:
    to_rdbchannel(n)
    n.rdb(b"+FULLRESYNC %s 0 %s\r\n" % (MASTER_ID.encode(), RID.encode())
          + b"$EOF:" + MARK + b"\r\n" + PAYLOAD[:have])
    if buffered:
        n.main(STREAM[:buffered])
    assert n.side.state is S.TRANSFER
    if by == "main":
        n.side.on_closed(n.io.token, "Connection reset by peer")
    else:
        n.side.on_rdb_closed(n.io.rdb_token, "Connection reset by peer")
    assert n.side.state is not S.TRANSFER


def _handshake_again(n: Node) -> bytes:
    n.tick(1000)
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n")
    return n.io.take(n.io.token)


@SETTINGS
@given(cut=st.floats(0, 1), buffered=st.integers(0, len(STREAM)),
       by=st.sampled_from(["main", "rdb"]), split=st.integers(1, 1 << 16))
def test_a_cut_rdb_channel_sync_resumes_with_its_buffer(cut: float, buffered: int, by: str,
                                                         split: int) -> None:
    have = min(int(len(PAYLOAD) * cut), len(PAYLOAD) - 1)
    n = Node(WINDOW)
    _cut(n, have, buffered, by)
    parked = n.repl.replica.load.parked
    assert parked is not None and parked.stream_next == buffered + 1
    assert n.info()["master_sync_resume_kept_bytes"] == have
    sent = _handshake_again(n)
    assert sent.endswith(cmd("REPLCONF", "resume", RID, "resume-offset", str(have),
                             "stream-offset", str(buffered + 1)))
    n.main(b"+OK\r\n")
    assert n.io.take(n.io.token).startswith(b"*3\r\n$5\r\nPSYNC")
    rest = (b"+FULLRESYNC %s 0 %s\r\n" % (MASTER_ID.encode(), RID.encode())
            + b"$RESUME:%d\r\n" % have + PAYLOAD[have:] + STREAM[buffered:])
    for i in range(0, len(rest), split):
        n.main(rest[i:i + split])
        n.drain()
    assert n.side.state is S.CONNECTED
    assert not n.side.channel.buffering
    assert n.digest() == DIGEST
    assert n.side.stream.master.reploff == len(STREAM)
    assert n.info()["master_sync_resume_kept_bytes"] == 0
    assert f"MASTER <-> REPLICA sync: resuming snapshot {RID} from byte {have}" in n.logs()


def test_a_refused_resume_lets_go_of_the_buffer_and_its_file(tmp_path) -> None:
    n = Node(WINDOW, ("repl-full-sync-spill-threshold", ["1"]), ("dir", [str(tmp_path)]))
    _cut(n, len(PAYLOAD) // 2, len(STREAM) // 2, "rdb")
    parked = n.repl.replica.load.parked
    assert parked is not None and parked.stream is not None and parked.stream.on_disk > 0
    buf = parked.stream
    _handshake_again(n)
    n.main(b"-ERR no snapshot " + RID.encode() + b" to resume\r\n")
    assert n.repl.replica.load.parked is None
    assert buf.disk is None        # (its spill file was closed)
    assert n.io.take(n.io.token) == cmd("PSYNC", "?", "-1")


def test_a_sync_the_master_named_no_snapshot_is_not_kept() -> None:
    n = Node(WINDOW)
    to_rdbchannel(n)
    n.rdb(b"+FULLRESYNC %s 0\r\n" % MASTER_ID.encode() + b"$EOF:" + MARK + b"\r\n"
          + PAYLOAD[:100])
    n.main(STREAM[:50])
    n.side.on_rdb_closed(n.io.rdb_token, "Connection reset by peer")
    assert n.repl.replica.load.parked is None
    assert not n.side.channel.buffering
