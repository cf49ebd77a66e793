"""Full syncs that respect the network (issue 40, part 4): the pace of a snapshot transfer
(``repl-sync-max-bandwidth``) and the cap on transfers at once (``repl-full-sync-max-concurrent``).

The pacer is a pure token bucket: hypothesis drives it with any clock and rate changes and the
bytes it allows must stay within the bucket's bound. The diskless child's write loop
(``stream_to_sockets``, the very function the forked child runs) writes to a real socket pair
read by a thread, at a rate changed while it runs. The turns are the master side's, on the real
core with ``WireIO`` for the OS (tests/support/master_side.py): what each replica receives is
loaded by an independent core and compared by digest.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.net.master_io import stream_to_sockets
from pyrepl.replication.master.states import S
from pyrepl.replication.throttle import UNPACED, Pacer, burst_of
from tests.support.master_side import Master, ReplicaCore, fill, parse_full_sync

# -- the pacer -------------------------------------------------------------------------------

steps = st.lists(st.tuples(st.floats(0, 0.3), st.integers(0, 4_000_000),
                           st.integers(0, 1 << 20)), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_a_pacer_never_allows_more_than_its_burst_plus_the_rate(moves) -> None:  # noqa: ANN001
    now = 100.0
    p = Pacer(now)
    seg_start, seg_rate, seg_bytes, seg_burst = now, -1, 0, 0
    for dt, rate, want in moves:
        now += dt
        if rate != seg_rate:     # a new rate starts a new interval to judge
            seg_start, seg_rate, seg_bytes = now, rate, 0
            # what the new rate may start with: its burst at most (0 after an unpaced run)
            seg_burst = burst_of(rate)
        allow = p.allowance(rate, now)
        if rate == 0:
            assert allow == UNPACED
            continue
        n = min(allow, want)
        p.took(n)
        seg_bytes += n
        assert seg_bytes <= seg_burst + rate * (now - seg_start) + 1
        w = p.wait(rate, now)
        assert w >= 0
        assert (w == 0) == (p.allowance(rate, now) >= p.quantum(rate))


def test_a_pacer_after_an_unpaced_run_starts_empty_and_fills_at_the_rate() -> None:
    p = Pacer(0.0)
    assert p.allowance(0, 0.0) == UNPACED
    p.took(10 << 20)
    assert p.allowance(1_000_000, 1.0) == 0            # no old burst goes through
    assert abs(p.allowance(1_000_000, 1.01) - 10_000) <= 1
    assert abs(p.wait(1_000_000, 1.01) - (burst_of(1_000_000) // 4 - 10_000) / 1e6) < 1e-6
    assert p.allowance(1_000_000, 5.0) == burst_of(1_000_000)   # never more than the burst


# -- the diskless child's loop, on a real socket ------------------------------------------------

def _reader(sock: socket.socket, got: list[tuple[float, int]], stop: threading.Event) -> None:
    total = 0
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            continue
        if not data:
            break
        total += len(data)
        got.append((time.monotonic(), total))


RATE = 512 * 1024
PACED = 8


def test_the_child_paces_each_socket_and_follows_a_rate_changed_while_it_writes() -> None:
    a, b = socket.socketpair()
    a.setblocking(False)
    rate = [RATE]
    chunk = os.urandom(64 * 1024)
    size = 24 * len(chunk)     # 1.5 MB: 3 s at the first rate
    got: list[tuple[float, int]] = []
    stop = threading.Event()
    t = threading.Thread(target=_reader, args=(b, got, stop), daemon=True)
    t.start()
    r, w = os.pipe()
    start = time.monotonic()

    def payload():  # noqa: ANN202
        for i in range(24):
            if i == PACED:      # a third in (at least 1 s at the first rate): unpaced
                rate[0] = 0
            yield chunk

    try:    # (it closes w, the result pipe, as the child does)
        code = stream_to_sockets([(7, a.fileno(), b"+PRE\r\n")], payload, b"MARK", 60_000, w,
                                 lambda: rate[0])
        end = time.monotonic()
    finally:
        a.close()
    t.join(10)
    stop.set()
    b.close()
    line = os.read(r, 100)
    os.close(r)
    assert code == 0 and line == b"7 1 %d -\n" % (6 + size + 4)
    assert got[-1][1] == 6 + size + 4
    # while paced: never ahead of the bucket (what was read was written)
    for when, total in got:
        if total >= PACED * len(chunk):
            break
        assert total <= burst_of(RATE) + RATE * (when - start) + 6
    # the first third took at least its paced time; the rest, unpaced, did not wait for it
    paced_done = next(when for when, total in got if total >= PACED * len(chunk))
    assert paced_done - start >= (PACED * len(chunk) - burst_of(RATE)) / (RATE) * 0.95
    assert end - paced_done < (size - PACED * len(chunk)) / (RATE) / 2


# -- turns: repl-full-sync-max-concurrent ---------------------------------------------------------

def _psync(m: Master, *capa: str):  # noqa: ANN202
    c = m.replica(*capa)
    m.send(c, "PSYNC", "?", "-1")
    return c


def _check_loaded(m: Master, tmp_path, c) -> None:  # noqa: ANN001
    got = parse_full_sync(m.wire(c))
    rc = ReplicaCore(tmp_path, got.rdb)
    rc.apply(got.stream)
    assert rc.digest() == m.digest()


def test_diskless_syncs_past_the_cap_wait_for_a_turn_each_in_order(tmp_path) -> None:
    m = Master(tmp_path, ("repl-full-sync-max-concurrent", ["1"]))
    fill(m)
    a = _psync(m, "eof", "psync2")
    (pid_a,) = m.io.children
    b = _psync(m, "eof", "psync2")
    c = _psync(m, "eof", "psync2")
    m.tick(1000)      # (b and c wait for the next snapshot: a socket child is at work)
    assert [m.link(x).state for x in (a, b, c)] == [S.WAIT_BGSAVE_END, S.WAIT_BGSAVE_START,
                                                    S.WAIT_BGSAVE_START]
    assert m.wire(b) == m.wire(c) == b"\n"     # kept alive while they wait
    m.io.run_child(pid_a)
    m.child_exits(pid_a)       # a's transfer is over: one turn, b's alone; c waits
    (pid_b,) = [p for p in m.io.children if p != pid_a]
    assert [x for x, _ in m.io.children[pid_b][0]] == [b]
    assert m.link(c).state is S.WAIT_BGSAVE_START
    assert [ln for ln in m.log() if "waits for a full sync turn" in ln] == [
        f"Replica 127.0.0.1:{m.link(c).listening_port} waits for a full sync turn "
        f"(repl-full-sync-max-concurrent 1)"]
    m.send(a, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    _check_loaded(m, tmp_path, a)
    m.run("SET", "after-a", "1")
    m.tick(100)
    assert m.link(c).state is S.WAIT_BGSAVE_START   # b's transfer goes on
    m.io.run_child(pid_b)
    m.child_exits(pid_b)
    pid_c = max(m.io.children)
    assert [x for x, _ in m.io.children[pid_c][0]] == [c]
    m.send(b, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    m.io.run_child(pid_c)
    m.child_exits(pid_c)
    m.send(c, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    for x in (b, c):
        _check_loaded(m, tmp_path, x)
    assert [e.get("queued_ms") for e in m.events("fullsync_fork")] == [None, None, 100]


def test_disk_syncs_join_the_bgsave_up_to_the_cap_and_the_rest_get_the_next(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync", ["no"]), ("repl-full-sync-max-concurrent", ["2"]))
    fill(m)
    a = _psync(m, "eof", "psync2")
    pid = m.core.rdb_child_pid
    b = _psync(m, "eof", "psync2")      # joins the running BGSAVE: a second turn
    c = _psync(m, "eof", "psync2")      # none left
    assert [m.link(x).state for x in (a, b, c)] == [S.WAIT_BGSAVE_END, S.WAIT_BGSAVE_END,
                                                    S.WAIT_BGSAVE_START]
    m.child_exits(pid, 0)
    assert m.link(c).state is S.WAIT_BGSAVE_START    # a and b are sending their file
    m.io.complete_bulk(m.core, a)
    m.flush()
    m.run("SET", "after-a", "1")
    m.tick(100)
    assert m.link(c).state is S.WAIT_BGSAVE_END and m.core.rdb_child_pid != pid
    m.child_exits(m.core.rdb_child_pid, 0)
    for x in (b, c):
        m.io.complete_bulk(m.core, x)
        m.flush()
        _check_loaded(m, tmp_path, x)
    assert m.core.persistence.saves == 2


def test_the_bandwidth_reaches_the_io_at_fork_and_at_config_set(tmp_path) -> None:
    m = Master(tmp_path, ("repl-sync-max-bandwidth", ["2mb"]))
    fill(m)
    a = _psync(m, "eof", "psync2")
    assert m.io.sync_bandwidth == 2 << 20
    assert m.events("fullsync_fork")[-1]["max_bandwidth"] == 2 << 20
    assert m.run("CONFIG", "SET", "repl-sync-max-bandwidth", "512kb") == b"+OK\r\n"
    assert m.io.sync_bandwidth == 512 << 10       # the child under way follows it
    assert m.run("CONFIG", "GET", "repl-sync-max-bandwidth") == \
        b"*2\r\n$23\r\nrepl-sync-max-bandwidth\r\n$6\r\n524288\r\n"
    (pid,) = m.io.children
    m.io.run_child(pid)
    m.child_exits(pid)
    assert m.events("fullsync_rdb_sent")[-1]["max_bandwidth"] == 512 << 10
    m.send(a, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    _check_loaded(m, tmp_path, a)
