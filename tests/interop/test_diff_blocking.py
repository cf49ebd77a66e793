"""Differential tests of the blocking commands: pyrepl against real redis-server 7.0.15.

Each scenario runs on both servers at once with several real connections per server
(``Blockers``): a client blocks (BLPOP, BLMOVE, BZPOPMIN, ...), we wait until INFO says so on
both sides, another client pushes, and every reply is compared byte for byte, RESP2 and RESP3.
Timeouts are compared with a tolerance (both servers answer at their cron after the deadline).
Propagation: a blocked client on each side (a second client of the in-process core, a second
connection to Redis), the same push, and what pyrepl hands to replication must equal the
stream Redis sends a replica attached with SYNC (the push first, then the rewritten pop).
"""

from __future__ import annotations

import time

import pytest

from tests.support.differential import PropagationTaps, same_propagation
from tests.support.resp import RawClient, encode_command, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


class Blockers:
    """Named connections, one on each server per name; every reply is read from both and
    compared."""

    def __init__(self, ports: tuple[int, int], proto: int) -> None:
        self.ports = ports
        self.proto = proto
        self.conns: dict[str, tuple[RawClient, RawClient]] = {}
        self.ctl = self._open()

    def _open(self) -> tuple[RawClient, RawClient]:
        pair = (RawClient(self.ports[0]), RawClient(self.ports[1]))
        if self.proto == 3:
            for c in pair:
                c.call("HELLO", "3")
        return pair

    def __getitem__(self, name: str) -> tuple[RawClient, RawClient]:
        if name not in self.conns:
            self.conns[name] = self._open()
        return self.conns[name]

    def close(self) -> None:
        for pair in [self.ctl, *self.conns.values()]:
            for c in pair:
                c.close()

    def send(self, name: str, *argv: str) -> None:
        for c in self[name]:
            c.send(*argv)

    def read(self, name: str) -> bytes:
        a, b = (c.read_reply() for c in self[name])
        assert a == b, f"{name}:\n  pyrepl: {a!r}\n  redis:  {b!r}"
        return a

    def call(self, name: str, *argv: str) -> bytes:
        self.send(name, *argv)
        return self.read(name)

    def ctl_both(self, *argv: str) -> tuple[bytes, bytes]:
        a, b = (c.call(*argv) for c in self.ctl)
        return a, b

    def info_field(self, side: int, field: str) -> str:
        text = parse_reply(self.ctl[side].call("INFO", "clients"))
        if isinstance(text, bytes):
            text = text.decode()
        for line in str(text).splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1]
        raise AssertionError(f"no {field} in INFO")

    def wait_blocked(self, n: int) -> None:
        """Both servers have ``n`` blocked clients (the blocking commands arrived)."""
        for side in (0, 1):
            wait_for(lambda s=side: self.info_field(s, "blocked_clients") == str(n),
                     timeout=5, what=f"{n} blocked clients on side {side}")

    def block_in_order(self, *waiters: tuple[str, ...]) -> None:
        """Each waiter ``(name, *argv)`` sent, and seen blocked on both servers before the next
        is sent (the first makes one blocked client): they queue in the order given."""
        for blocked, (name, *argv) in enumerate(waiters, 1):
            self.send(name, *argv)
            self.wait_blocked(blocked)

    def served(self, *names: str) -> None:
        """Each of ``names`` gets its reply, the same from both servers, in that order."""
        for name in names:
            self.read(name)

    def left_waiting(self, name: str, *push: str) -> None:
        """The served waiters emptied the key ``push`` writes: it is gone (EXISTS compared) and
        ``name`` still waits, until ``push`` creates the key again and serves it."""
        self.silent(name)
        self.call("p", "EXISTS", push[1])
        self.call("p", *push)
        self.read(name)

    def silent(self, name: str, seconds: float = 0.15) -> None:
        """Nothing arrives on either connection of ``name`` for a while (still blocked)."""
        for c in self[name]:
            c.sock.settimeout(seconds)
            try:
                data = c.sock.recv(65536)
            except TimeoutError:
                data = None
            finally:
                c.sock.settimeout(10)
            assert data is None, f"{name} got {data!r} while blocked"


@pytest.fixture
def bl(pyrepl_server, redis_server, proto):
    b = Blockers((pyrepl_server.port, redis_server.port), proto)
    b.ctl_both("FLUSHALL")
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def bl_debug(servers, proto):
    """``bl`` on the module's own pair, whose redis-server takes DEBUG."""
    b = Blockers(servers, proto)
    b.ctl_both("FLUSHALL")
    try:
        yield b
    finally:
        b.close()


PROTO = pytest.mark.parametrize("proto", [2, 3])


# -- immediate answers and errors ---------------------------------------------------------------

IMMEDIATE = [
    ("RPUSH", "l", "a", "b", "c", "d", "e"),
    ("BLPOP", "l", "0"), ("BRPOP", "nokey", "l", "0"), ("BLPOP", "l", "l", "1"),
    ("BLMPOP", "0", "2", "nokey", "l", "LEFT"), ("BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "9"),
    ("RPUSH", "l", "a", "b", "c"),
    ("BLMOVE", "l", "l2", "left", "RIGHT", "0"), ("BRPOPLPUSH", "l", "l2", "0"),
    ("LRANGE", "l2", "0", "-1"),
    ("SET", "s", "x"), ("BLPOP", "s", "0"), ("BLPOP", "nokey", "s", "0"),
    ("BLMOVE", "s", "l", "LEFT", "LEFT", "0"), ("BLMOVE", "l", "s", "LEFT", "LEFT", "0"),
    ("BRPOPLPUSH", "l2", "s", "0"), ("BLMPOP", "0", "1", "s", "LEFT"),
    ("BZPOPMIN", "s", "0"), ("BZMPOP", "0", "1", "s", "MIN"),
    # timeouts: floats, errors, and their order against the other checks
    ("BLPOP", "l", "x"), ("BLPOP", "l", "-1"), ("BLPOP", "l", "-0.0001"), ("BLPOP", "l", "inf"),
    ("BLPOP", "l", "1e300"), ("BLPOP", "l", "nan"), ("BLPOP", "l", " 1"), ("BLPOP", "l", ""),
    ("BLPOP", "s", "x"), ("BLPOP", "l2", "0x10"), ("BLPOP", "l2", "1.5e-2"),
    ("BLMOVE", "l", "x", "UP", "LEFT", "x"), ("BLMOVE", "l", "x", "LEFT", "LEFT", "x"),
    ("BRPOPLPUSH", "l", "x", "-3"), ("BLMPOP", "x", "0", "l", "LEFT"),
    ("BLMPOP", "0", "0", "l", "LEFT"), ("BLMPOP", "0", "1", "l"),
    ("BLMPOP", "0", "1", "l", "UP"), ("BLMPOP", "0", "1", "l", "LEFT", "COUNT", "0"),
    ("BLMPOP", "0", "1", "l", "LEFT", "COUNT", "1", "COUNT", "1"), ("BLMPOP", "0", "5", "l"),
    ("BLPOP", "l"), ("BLMOVE", "l", "x", "LEFT", "LEFT"), ("BZMPOP", "0", "1", "z"),
    # sorted sets
    ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"),
    ("BZPOPMIN", "z", "0"), ("BZPOPMAX", "nokey", "z", "0"),
    ("BZMPOP", "0", "1", "z", "MIN", "COUNT", "5"), ("ZADD", "z", "1.5", "a", "2", "b"),
    ("BZMPOP", "0", "2", "nokey", "z", "max"), ("BZPOPMIN", "z", "x"), ("BZPOPMIN", "z", "-1"),
    ("BZMPOP", "-1", "1", "z", "MIN"), ("BZMPOP", "0", "1", "z", "MIDDLE"),
    ("BZMPOP", "0", "1", "z", "MIN", "COUNT", "-1"), ("BZMPOP", "0", "1", "z", "MIN", "x"),
    ("BZPOPMAX", "z", "0"), ("EXISTS", "z"),
    # CLIENT UNBLOCK's own errors
    ("CLIENT", "UNBLOCK", "x"), ("CLIENT", "UNBLOCK", "999999"),
    ("CLIENT", "UNBLOCK", "999999", "timeout"), ("CLIENT", "UNBLOCK", "999999", "ERROR"),
    ("CLIENT", "UNBLOCK", "x", "BAD"), ("CLIENT", "UNBLOCK", "1", "ERROR", "x"),
    ("CLIENT", "UNBLOCK"),
]


@PROTO
def test_immediate_answers_and_errors(bl):
    for argv in IMMEDIATE:
        bl.call("a", *argv)


@PROTO
def test_multi_never_blocks(bl):
    for argv in [("MULTI",), ("BLPOP", "nokey", "0"), ("BRPOP", "nokey", "nokey2", "0"),
                 ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"), ("BRPOPLPUSH", "nokey", "d", "0"),
                 ("BLMPOP", "0", "1", "nokey", "LEFT"), ("BZPOPMIN", "nokey", "0"),
                 ("BZMPOP", "0", "1", "nokey", "MAX", "COUNT", "2"), ("RPUSH", "q", "1", "2"),
                 ("BLPOP", "q", "0"), ("BLMPOP", "0", "1", "q", "RIGHT", "COUNT", "5"),
                 ("EXEC",)]:
        bl.call("a", *argv)


# -- blocked, then served -------------------------------------------------------------------------

@PROTO
def test_push_serves_blocked_clients_in_fifo_order(bl):
    bl.block_in_order(("c1", "BLPOP", "k", "0"), ("c2", "BRPOP", "other", "k", "0"),
                      ("c3", "BLMPOP", "0", "2", "k", "x", "LEFT", "COUNT", "2"))
    bl.silent("c1")
    info = [bl.info_field(s, "blocked_clients") for s in (0, 1)]
    assert info == ["3", "3"]
    bl.call("p", "RPUSH", "k", "a", "b", "c", "d", "e")
    bl.served("c1", "c2", "c3")
    bl.call("p", "LRANGE", "k", "0", "-1")
    bl.wait_blocked(0)


@PROTO
def test_one_element_serves_only_the_first(bl):
    bl.block_in_order(("c1", "BLPOP", "k", "0"), ("c2", "BLPOP", "k", "0"))
    bl.call("p", "LPUSH", "k", "only")
    bl.read("c1")
    bl.left_waiting("c2", "LPUSH", "k", "second")


@PROTO
def test_blmove_chain(bl):
    """BLMOVE a->b serves a BLMOVE b->c waiting on b, which serves a BLPOP on c."""
    bl.block_in_order(("c1", "BLMOVE", "a", "b", "LEFT", "RIGHT", "0"),
                      ("c2", "BRPOPLPUSH", "b", "c", "0"), ("c3", "BLPOP", "c", "0"))
    bl.call("p", "RPUSH", "a", "x", "y")
    bl.served("c1", "c2", "c3")
    for key in ("a", "b", "c"):
        bl.call("p", "LRANGE", key, "0", "-1")


@PROTO
def test_blmove_to_wrong_type_destination(bl):
    bl.call("p", "SET", "dst", "str")
    bl.block_in_order(("c1", "BLMOVE", "src", "dst", "LEFT", "LEFT", "0"),
                      ("c2", "BLPOP", "src", "0"))
    bl.call("p", "RPUSH", "src", "v")
    bl.read("c1")      # WRONGTYPE, nothing popped
    bl.read("c2")      # gets the element


@PROTO
def test_sorted_sets_served(bl):
    bl.block_in_order(("c1", "BZPOPMIN", "z", "0"), ("c2", "BZPOPMAX", "z2", "z", "0"),
                      ("c3", "BZMPOP", "0", "1", "z", "MAX", "COUNT", "10"))
    bl.send("c4", "BLPOP", "z", "0")        # a list waiter on the same key stays blocked
    bl.wait_blocked(4)
    bl.call("p", "ZADD", "z", "1", "a", "2", "b", "3", "c", "4.5", "d")
    bl.served("c1", "c2", "c3")
    bl.left_waiting("c4", "RPUSH", "z", "l")


@PROTO
def test_multi_exec_serves_after_the_transaction(bl):
    bl.block_in_order(("c1", "BLPOP", "k1", "k2", "0"), ("c2", "BLPOP", "k2", "0"))
    for argv in [("MULTI",), ("RPUSH", "k2", "a", "b"), ("RPUSH", "k1", "c"),
                 ("LPOP", "k1"), ("RPUSH", "k1", "d"), ("EXEC",)]:
        bl.call("p", *argv)
    bl.read("c1")      # k2 became ready first
    bl.read("c2")
    for key in ("k1", "k2"):
        bl.call("p", "LRANGE", key, "0", "-1")


@PROTO
def test_keys_created_by_rename_move_swapdb_sort_restore(bl):
    bl.call("p", "RPUSH", "tmp", "r")
    bl.send("c1", "BLPOP", "renamed", "0")
    bl.wait_blocked(1)
    bl.call("p", "RENAME", "tmp", "renamed")
    bl.read("c1")
    bl.call("p", "SELECT", "1")
    bl.call("p", "RPUSH", "moved", "m")
    bl.send("c1", "BLPOP", "moved", "0")
    bl.wait_blocked(1)
    bl.call("p", "MOVE", "moved", "0")
    bl.read("c1")
    bl.call("p", "ZADD", "swapped", "7", "s")
    bl.send("c1", "BZPOPMIN", "swapped", "0")
    bl.wait_blocked(1)
    bl.call("p", "SWAPDB", "0", "1")
    bl.read("c1")
    bl.call("p", "SWAPDB", "0", "1")
    bl.call("p", "SELECT", "0")
    bl.call("p", "RPUSH", "src", "3", "1", "2")
    bl.send("c1", "BRPOP", "sorted", "0")
    bl.wait_blocked(1)
    bl.call("p", "SORT", "src", "STORE", "sorted")
    bl.read("c1")
    # each server RESTOREs its own DUMP payload (the encodings differ)
    payloads = [parse_reply(c.call("DUMP", "src")) for c in bl["p"]]
    bl.send("c1", "BLPOP", "restored", "0")
    bl.wait_blocked(1)
    got = [c.call("RESTORE", "restored", "0", p) for c, p in zip(bl["p"], payloads, strict=True)]
    assert got[0] == got[1] == b"+OK\r\n"
    bl.read("c1")


def test_a_key_that_expired_during_the_transaction_serves_no_one(bl_debug):
    """Redis's list.tcl "MULTI + LPUSH + EXPIRE + DEBUG SLEEP on blocked client, key already
    expired": the push made the key ready, but it expired while EXEC ran (DEBUG SLEEP in it):
    the waiter stays blocked (the key deleted), until CLIENT UNBLOCK."""
    ids = [parse_reply(c.call("CLIENT", "ID")) for c in bl_debug["c1"]]
    bl_debug.ctl_both("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        bl_debug.send("c1", "BRPOP", "k", "0")
        bl_debug.wait_blocked(1)
        for argv in [("MULTI",), ("RPUSH", "k", "hello"), ("PEXPIRE", "k", "100"),
                     ("DEBUG", "SLEEP", "0.2"), ("EXEC",)]:
            bl_debug.call("p", *argv)
        bl_debug.silent("c1")
        assert [b"flags=b " in c.call("CLIENT", "LIST", "ID", str(i))
                for c, i in zip(bl_debug.ctl, ids, strict=True)] == [True, True]
        bl_debug.call("p", "EXISTS", "k")
        got = [c.call("CLIENT", "UNBLOCK", str(i)) for c, i in zip(bl_debug.ctl, ids, strict=True)]
        assert got[0] == got[1] == b":1\r\n"
        bl_debug.read("c1")
    finally:
        bl_debug.ctl_both("DEBUG", "SET-ACTIVE-EXPIRE", "1")


@PROTO
def test_client_unblock_timeout_and_error(bl):
    ids = [parse_reply(c.call("CLIENT", "ID")) for c in bl["c1"]]
    bl.send("c1", "BLPOP", "k", "0")
    bl.wait_blocked(1)
    flags = [b"flags=b " in c.call("CLIENT", "LIST") for c in bl.ctl]
    assert flags == [True, True]
    got = [c.call("CLIENT", "UNBLOCK", str(i)) for c, i in zip(bl.ctl, ids, strict=True)]
    assert got[0] == got[1] == b":1\r\n"
    bl.read("c1")
    bl.send("c1", "BZMPOP", "0", "1", "z", "MIN")
    bl.wait_blocked(1)
    got = [c.call("CLIENT", "UNBLOCK", str(i), "error") for c, i in zip(bl.ctl, ids, strict=True)]
    assert got[0] == got[1] == b":1\r\n"
    bl.read("c1")
    got = [c.call("CLIENT", "UNBLOCK", str(i)) for c, i in zip(bl.ctl, ids, strict=True)]
    assert got[0] == got[1] == b":0\r\n"
    bl.call("c1", "PING")


@PROTO
def test_slowlog_entry_once_served_or_unblocked(bl):
    """Redis logs a blocking command when it is served or CLIENT UNBLOCKed (its arguments as
    sent: BLPOP, not the LPOP it propagates as), after what ran meanwhile; not at its timeout."""
    def logged() -> list[list[list[bytes]]]:
        out = []
        for c in bl.ctl:
            entries = parse_reply(c.call("SLOWLOG", "GET", "10"))
            out.append([e[3] for e in entries])    # (newest first) each entry's arguments
        return out

    bl.ctl_both("CONFIG", "SET", "slowlog-log-slower-than", "0")
    try:
        bl.send("c1", "BLPOP", "l", "0")
        bl.wait_blocked(1)
        bl.call("p", "MULTI")
        bl.call("p", "LPUSH", "l", "foo")
        bl.call("p", "SLOWLOG", "RESET")
        bl.call("p", "EXEC")
        bl.read("c1")
        a, b = logged()
        assert a[0] == b[0] == [b"blpop", b"l", b"0"] or a[0] == b[0] == [b"BLPOP", b"l", b"0"]
        bl.ctl_both("SLOWLOG", "RESET")
        ids = [parse_reply(c.call("CLIENT", "ID")) for c in bl["c1"]]
        bl.send("c1", "BRPOP", "k", "0")
        bl.wait_blocked(1)
        for c, i in zip(bl.ctl, ids, strict=True):
            c.call("CLIENT", "UNBLOCK", str(i), "ERROR")
        bl.read("c1")
        a, b = logged()
        # (after CLIENT UNBLOCK's own entry, the unblocked BRPOP's, with no arguments: 7.0
        # logs it once unblockClient reset them)
        assert a[1:3] == b[1:3] and a[1] == [] and a[0][:2] == [b"CLIENT", b"UNBLOCK"], (a, b)
        bl.ctl_both("SLOWLOG", "RESET")
        bl.send("c1", "BLPOP", "k", "0.01")
        bl.read("c1")
        a, b = logged()
        assert a == b and not any(e[0].upper() == b"BLPOP" for e in a), (a, b)
    finally:
        bl.ctl_both("CONFIG", "SET", "slowlog-log-slower-than", "10000")


@PROTO
def test_pipelined_commands_wait_for_the_unblock(bl):
    for c in bl["c1"]:
        c.send_raw(encode_command("BLPOP", "k", "0") + encode_command("RPUSH", "k", "again")
                   + encode_command("BLPOP", "k", "0") + encode_command("PING"))
    bl.wait_blocked(1)
    bl.silent("c1")
    bl.call("p", "RPUSH", "k", "first")
    for _ in range(4):
        bl.read("c1")


def test_disconnect_while_blocked(bl):
    bl.block_in_order(("c1", "BLPOP", "k", "0"), ("c2", "BLPOP", "k", "0"))
    for c in bl["c1"]:
        c.close()
    del bl.conns["c1"]
    bl.wait_blocked(1)
    bl.call("p", "RPUSH", "k", "v")
    bl.read("c2")
    bl.call("p", "LLEN", "k")


@PROTO
def test_timeouts(bl):
    t0 = time.monotonic()
    bl.send("c1", "BLPOP", "k", "0.3")
    bl.send("c2", "BZMPOP", "0.2", "1", "z", "MIN")
    bl.send("c3", "BLMOVE", "k", "d", "LEFT", "LEFT", "0.25")
    bl.wait_blocked(3)
    bl.served("c2", "c3", "c1")
    elapsed = time.monotonic() - t0
    assert 0.29 <= elapsed < 2.0, elapsed
    bl.call("c1", "PING")


def test_timeout_zero_blocks_and_small_timeout_ends(bl):
    bl.send("c1", "BLPOP", "k", "0")
    bl.send("c2", "BLPOP", "k", "0.001")
    bl.read("c2")
    bl.wait_blocked(1)
    bl.silent("c1", 0.4)
    bl.call("p", "RPUSH", "k", "v")
    bl.read("c1")


@PROTO
def test_xread_block_served_by_xadd(bl):
    """XREAD BLOCK: an XADD serves the clients blocked on that stream, each with the entries
    after its own ID of that one key ($ = the last ID when it blocked; no COUNT = up to 1000)."""
    bl.call("p", "XADD", "s", "1-1", "f", "old")
    bl.block_in_order(("c1", "XREAD", "BLOCK", "0", "STREAMS", "s", "$"),
                      ("c2", "XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "other", "s", "0-0",
                       "1-1"),
                      ("c3", "XREAD", "BLOCK", "0", "STREAMS", "other", "$"))
    bl.silent("c1")
    bl.call("p", "XADD", "s", "2-1", "f", "new")
    bl.served("c1", "c2")
    bl.wait_blocked(1)          # c3 waits on another key
    bl.call("p", "XADD", "other", "5-5", "a", "b", "c", "d")
    bl.read("c3")
    bl.wait_blocked(0)
    # an XADD that does not go past the client's ID leaves it blocked; a later one serves it
    bl.send("c1", "XREAD", "BLOCK", "0", "STREAMS", "s", "9-9")
    bl.wait_blocked(1)
    bl.call("p", "XADD", "s", "3-0", "f", "v")
    bl.silent("c1")
    bl.call("p", "XADD", "s", "10-0", "f", "v")
    bl.read("c1")


@PROTO
def test_xread_block_timeout_multi_and_immediate(bl):
    bl.call("p", "XADD", "s", "1-1", "f", "v")
    bl.call("c1", "XREAD", "BLOCK", "50", "STREAMS", "s", "0")      # data: at once
    t0 = time.monotonic()
    bl.call("c1", "XREAD", "BLOCK", "200", "STREAMS", "s", "$")     # null at the deadline
    assert time.monotonic() - t0 >= 0.19
    bl.call("c1", "MULTI")
    bl.call("c1", "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    bl.call("c1", "EXEC")                                           # inside MULTI: never blocks
    bl.call("c1", "XREAD", "BLOCK", "-1", "STREAMS", "s", "$")
    bl.call("c1", "XREAD", "BLOCK", "x", "STREAMS", "s", "$")
    bl.send("c2", "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    bl.wait_blocked(1)
    bl.call("p", "DEL", "s")
    bl.call("p", "XADD", "s", "7-7", "new", "stream")               # a new stream serves it
    bl.read("c2")


@PROTO
def test_xreadgroup_block_served_by_xadd(bl):
    """XREADGROUP BLOCK on ">": an XADD serves the blocked consumers in FIFO order, each with
    the entries after the group's last ID at that moment (so the second gets nothing of what
    the first took and stays blocked); a new consumer is created when served; NOACK too."""
    bl.call("p", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    bl.call("p", "XGROUP", "CREATE", "s", "g2", "$")
    bl.block_in_order(("c1", "XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s",
                       ">"),
                      ("c2", "XREADGROUP", "GROUP", "g", "bob", "COUNT", "5", "BLOCK", "0",
                       "STREAMS", "s", ">"),
                      ("c3", "XREADGROUP", "GROUP", "g2", "carol", "NOACK", "BLOCK", "0",
                       "STREAMS", "s", ">"))
    bl.call("p", "XADD", "s", "1-1", "f", "v1")
    bl.served("c1", "c3")
    bl.silent("c2")                 # alice took 1-1: nothing new for the group
    bl.wait_blocked(1)
    bl.call("p", "XADD", "s", "2-1", "f", "v2")
    bl.read("c2")
    bl.call("p", "XPENDING", "s", "g")           # (the summary: no idle times to differ)
    bl.call("p", "XPENDING", "s", "g2")
    bl.call("p", "XINFO", "GROUPS", "s")
    # history IDs never block (an empty history is an answer)
    bl.call("c1", "XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", "9-9")


@PROTO
def test_xreadgroup_block_group_or_key_gone(bl):
    """The group destroyed: -NOGROUP; the key deleted or overwritten: -UNBLOCKED; timeouts,
    MULTI and a missing group at once as Redis."""
    bl.ctl_both("CONFIG", "RESETSTAT")           # (errorstats compared at the end)
    bl.call("p", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    bl.send("c1", "XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">")
    bl.wait_blocked(1)
    bl.call("p", "XGROUP", "DESTROY", "s", "g")
    bl.read("c1")
    bl.call("p", "XGROUP", "CREATE", "s", "g", "$")
    bl.send("c1", "XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">")
    bl.send("c2", "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    bl.wait_blocked(2)
    bl.call("p", "DEL", "s")
    bl.read("c1")
    bl.silent("c2")                 # XREAD waits on for a new stream
    bl.call("p", "XADD", "s", "1-1", "f", "v")
    bl.read("c2")
    bl.call("p", "XGROUP", "CREATE", "s", "g", "$")
    bl.send("c1", "XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">")
    bl.wait_blocked(1)
    bl.call("p", "SET", "s", "not a stream")
    bl.read("c1")
    bl.call("p", "DEL", "s")
    bl.call("p", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    bl.send("c1", "XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">")
    bl.wait_blocked(1)
    bl.call("p", "MULTI")
    bl.call("p", "DEL", "s")
    bl.call("p", "XADD", "s", "5-5", "f", "v")     # recreated without the group: -NOGROUP
    bl.call("p", "EXEC")
    bl.read("c1")
    t0 = time.monotonic()
    bl.call("p", "XGROUP", "CREATE", "s", "g", "$")
    bl.call("c1", "XREADGROUP", "GROUP", "g", "a", "BLOCK", "150", "STREAMS", "s", ">")
    assert time.monotonic() - t0 >= 0.14
    bl.call("c1", "MULTI")
    bl.call("c1", "XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">")
    bl.call("c1", "EXEC")
    bl.call("c1", "XREADGROUP", "GROUP", "nope", "a", "BLOCK", "0", "STREAMS", "s", ">")
    bl.call("p", "INFO", "errorstats")


# -- propagation ----------------------------------------------------------------------------------

def _propagation(taps: PropagationTaps, blocker: RawClient, steps: list[tuple[str, ...]],
                 block: tuple[str, ...]) -> None:
    """``block`` blocks a second client on each side; each step's reply and propagated
    commands must match, and the blocked clients get the same reply."""
    core = taps.core.core
    other = core.connection_made()
    blocker.send(*block)
    other.receive_data(encode_command(*block))
    wait_for(lambda: b"blocked_clients:1" in blocker_info(taps), timeout=5,
             what="Redis client blocked")
    assert other.blocked is not None
    queued = False
    for argv in steps:
        if argv[0] == "MULTI" or queued:   # no sentinel write can follow inside MULTI
            queued = argv[0] != "EXEC"
            if queued:
                want_reply, got_reply = taps.data.call(*argv), taps.core.call(*argv)[0]
                assert got_reply == want_reply, f"{argv}: {got_reply!r} != {want_reply!r}"
                continue
        want_reply, want = taps.redis(*argv)
        got_reply, got = taps.pyrepl(*argv)
        assert got_reply == want_reply, f"{argv}: {got_reply!r} != {want_reply!r}"
        assert same_propagation(got, want), f"{argv}: pyrepl propagated {got}, redis {want}"
    assert other.data_to_send() == blocker.read_reply()


def blocker_info(taps: PropagationTaps) -> bytes:
    return taps.data.call("INFO", "clients")


@pytest.mark.parametrize("block,steps", [
    (("BLPOP", "k", "0"), [("RPUSH", "k", "a", "b")]),
    (("BRPOP", "x", "k", "0"), [("LPUSH", "k", "a", "b")]),
    (("BLMPOP", "0", "1", "k", "RIGHT", "COUNT", "5"), [("RPUSH", "k", "a", "b", "c")]),
    (("BLMOVE", "k", "d", "right", "left", "0"), [("RPUSH", "k", "a", "b")]),
    (("BRPOPLPUSH", "k", "d", "0"), [("RPUSH", "k", "a")]),
    (("BZPOPMIN", "z", "0"), [("ZADD", "z", "1", "a", "2", "b")]),
    (("BZPOPMAX", "z", "0"), [("ZADD", "z", "1", "a")]),
    (("BZMPOP", "0", "1", "z", "MAX", "COUNT", "3"), [("ZADD", "z", "1", "a", "2", "b")]),
    (("BLPOP", "k", "0"), [("MULTI",), ("RPUSH", "k", "a"), ("SET", "s", "1"), ("EXEC",)]),
    (("BLPOP", "k", "0"), [("RPUSH", "src", "v"), ("LMOVE", "src", "k", "LEFT", "LEFT")]),
])
def test_served_pop_propagates_as_redis(tapped_redis, block, steps):
    with PropagationTaps(tapped_redis.port) as taps, RawClient(tapped_redis.port) as blocker:
        _propagation(taps, blocker, steps, block)


@pytest.mark.parametrize("block", [
    ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "st", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "NOACK", "COUNT", "1", "BLOCK", "0", "STREAMS", "st", ">"),
])
def test_served_xreadgroup_propagates_as_redis(tapped_redis, block):
    """A served XREADGROUP propagates what its read did (XCLAIM per entry; with NOACK the
    consumer's creation and XGROUP SETID), after the XADD that served it."""
    with PropagationTaps(tapped_redis.port) as taps, RawClient(tapped_redis.port) as blocker:
        for argv in [("DEL", "st"), ("XGROUP", "CREATE", "st", "g", "$", "MKSTREAM")]:
            assert taps.redis(*argv)[0] == taps.pyrepl(*argv)[0]
        _propagation(taps, blocker, [("XADD", "st", "9-1", "f", "v", "g", "h")], block)


def test_immediate_blocking_pops_propagate_as_redis(tapped_redis):
    from tests.support.differential import check_propagation

    check_propagation(tapped_redis.port, [
        ("RPUSH", "k", "a", "b", "c", "d", "e", "f"), ("BLPOP", "k", "0"), ("BRPOP", "k", "0"),
        ("BLMPOP", "0", "1", "k", "LEFT", "COUNT", "2"), ("BLMOVE", "k", "d", "left", "RIGHT", "0"),
        ("BRPOPLPUSH", "k", "d", "0"), ("ZADD", "z", "1", "a", "2", "b", "3", "c"),
        ("BZPOPMIN", "z", "0"), ("BZPOPMAX", "z", "0"),
        ("BZMPOP", "0", "1", "z", "MIN", "COUNT", "9"),
    ])


def test_blocking_pops_inside_exec_propagate_as_redis(tapped_redis):
    with PropagationTaps(tapped_redis.port) as taps, RawClient(tapped_redis.port) as blocker:
        _propagation(taps, blocker, [
            ("RPUSH", "d", "x", "y"), ("MULTI",), ("BLPOP", "nokey", "0"), ("BLPOP", "d", "0"),
            ("BLMOVE", "d", "k", "LEFT", "left", "0"), ("BZPOPMIN", "nokey", "0"), ("EXEC",),
        ], ("BLPOP", "k", "0"))


def test_turning_replica_unblocks_and_closes(bl):
    """REPLICAOF: every blocked client gets -UNBLOCKED and is disconnected, at once (Redis's
    replicationSetMaster)."""
    from tests.support.procs import free_port

    bl.send("c1", "BLPOP", "k", "0")
    bl.send("c2", "BZPOPMIN", "z", "0")
    bl.wait_blocked(2)
    port = str(free_port())
    try:
        a, b = bl.ctl_both("REPLICAOF", "127.0.0.1", port)
        assert a == b == b"+OK\r\n"
        bl.read("c1")
        bl.read("c2")
        for c in bl["c1"]:
            with pytest.raises(ConnectionError):
                c.read_reply()
    finally:
        a, b = bl.ctl_both("REPLICAOF", "NO", "ONE")
    assert a == b == b"+OK\r\n"
