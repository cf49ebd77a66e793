"""Sans-io tests of client-side caching (pyrepl.core.tracking, CLIENT TRACKING): a ServerCore driven
in-process, bytes in and out, a fake clock."""

from __future__ import annotations

import pytest

from pyrepl.core.server import ServerCore
from pyrepl.core.tracking import _AlwaysTrue
from tests.support.cores import make_core, run


def inv(*keys: bytes) -> bytes:
    return b">2\r\n$10\r\ninvalidate\r\n*%d\r\n" % len(keys) + b"".join(
        b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)


def msg(*keys: bytes) -> bytes:
    return b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*%d\r\n" % len(keys) + \
        b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)


@pytest.fixture
def core() -> ServerCore:
    return make_core()


def resp3(core: ServerCore):
    c = core.connection_made("127.0.0.1:1", "127.0.0.1:6379")
    run(c, "HELLO", "3")
    return c


def test_default_mode_invalidates_once_and_forgets(core: ServerCore) -> None:
    r, w = resp3(core), core.connection_made()
    assert run(r, "CLIENT", "TRACKING", "ON") == b"+OK\r\n"
    assert run(r, "GET", "k") == b"_\r\n"
    assert run(w, "SET", "k", "1") == b"+OK\r\n"
    assert r.data_to_send() == inv(b"k")
    run(w, "SET", "k", "2")
    assert r.data_to_send() == b""                       # forgotten after one invalidation
    # its own write: the invalidation follows the reply
    run(r, "GET", "k")
    assert run(r, "INCR", "n") == b":1\r\n"
    assert run(r, "APPEND", "k", "x") == b":2\r\n" + inv(b"k")
    # a key read by MGET, changed by a write that only watchers' writers signal
    run(r, "MGET", "a", "b")
    run(w, "RPUSH", "a", "x")
    run(w, "HSET", "b", "f", "v")
    assert r.data_to_send() == inv(b"a") + inv(b"b")


def test_hot_path_flags_follow_the_tracking_clients(core: ServerCore) -> None:
    r = resp3(core)
    assert not core.tracking_on and not core.tracking_writes
    assert type(core.dbs[0].watched) is dict
    run(r, "CLIENT", "TRACKING", "ON")
    assert core.tracking_on and core.tracking_writes
    assert type(core.dbs[0].watched) is _AlwaysTrue
    run(r, "GET", "k")
    run(r, "CLIENT", "TRACKING", "OFF")
    assert not core.tracking_on and core.tracking_writes    # the table still holds k
    w = core.connection_made()
    run(w, "SET", "k", "v")
    assert r.data_to_send() == b""
    assert not core.tracking_writes and type(core.dbs[0].watched) is dict
    assert b"tracking_total_keys:0\r\n" in run(w, "INFO", "stats")


def test_redirect_to_resp2_subscriber_and_broken_redirect(core: ServerCore) -> None:
    s, r, w = core.connection_made(), resp3(core), core.connection_made()
    run(s, "SUBSCRIBE", "__redis__:invalidate")
    assert run(r, "CLIENT", "TRACKING", "ON", "REDIRECT", str(s.id)) == b"+OK\r\n"
    assert run(r, "CLIENT", "GETREDIR") == b":%d\r\n" % s.id
    run(r, "GET", "k")
    run(w, "SET", "k", "1")
    assert s.data_to_send() == msg(b"k") and r.data_to_send() == b""
    assert b"flags=t db=0" in run(r, "CLIENT", "INFO")
    run(r, "GET", "k")
    core.client_closed(s)
    run(w, "SET", "k", "2")
    assert r.data_to_send() == b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % s.id
    assert b"flags=tR " in run(r, "CLIENT", "INFO")
    assert b"broken_redirect" in run(r, "CLIENT", "TRACKINGINFO")
    assert run(r, "CLIENT", "TRACKING", "ON", "REDIRECT", "12345") == \
        b"-ERR The client ID you want redirect to does not exist\r\n"


def test_resp2_without_redirect_gets_nothing(core: ServerCore) -> None:
    r, w = core.connection_made(), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON")
    run(r, "GET", "k")
    run(w, "SET", "k", "1")
    assert r.data_to_send() == b""
    assert b"tracking_total_keys:0\r\n" in run(w, "INFO", "stats")


def test_noloop(core: ServerCore) -> None:
    r, w = resp3(core), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON", "NOLOOP")
    run(r, "MGET", "mine", "theirs")
    assert run(r, "SET", "mine", "1") == b"+OK\r\n"          # nothing for its own write
    run(w, "SET", "theirs", "1")
    assert r.data_to_send() == inv(b"theirs")


def test_bcast_batches_sorted_keys_per_prefix(core: ServerCore) -> None:
    b, w = resp3(core), core.connection_made()
    assert run(b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b:", "PREFIX", "a:") == \
        b"+OK\r\n"
    run(w, "MULTI")
    for k in ("b:2", "a:2", "c:1", "a:1", "b:1", "a:2"):
        run(w, "INCR", k)
    run(w, "EXEC")
    assert b.data_to_send() == inv(b"a:1", b"a:2") + inv(b"b:1", b"b:2")
    assert run(b, "SET", "a:x", "1") == b"+OK\r\n" + inv(b"a:x")   # after its own reply
    run(b, "CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP")
    run(b, "MSET", "a:y", "1", "zz", "2")                 # its own: skipped by NOLOOP
    run(w, "SET", "zz", "3")
    assert b.data_to_send() == inv(b"zz")
    assert b"tracking_total_prefixes:3\r\n" in run(w, "INFO", "stats")
    assert b"flags=tB " in run(b, "CLIENT", "INFO")
    run(b, "CLIENT", "TRACKING", "OFF")
    assert b"tracking_total_prefixes:0\r\n" in run(w, "INFO", "stats")


def test_prefix_overlaps_as_redis(core: ServerCore) -> None:
    b = core.connection_made()
    assert run(b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO") == \
        (b"-ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a "
         b"single client must not overlap.\r\n")
    run(b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR")
    assert run(b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "BARB") == \
        (b"-ERR Prefix 'BARB' overlaps with an existing prefix 'BAR'. Prefixes for a single "
         b"client must not overlap.\r\n")
    run(b, "CLIENT", "TRACKING", "OFF")
    # past the first prefix an overlap is reported, then OK (Redis's return value quirk)
    assert run(b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x", "PREFIX", "y",
               "PREFIX", "yz") == \
        (b"-ERR Prefix 'y' overlaps with another provided prefix 'yz'. Prefixes for a single "
         b"client must not overlap.\r\n+OK\r\n")


def test_optin_caching_lasts_one_command_or_transaction(core: ServerCore) -> None:
    r, w = resp3(core), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON", "OPTIN")
    run(r, "GET", "a")                                    # not remembered
    run(r, "CLIENT", "CACHING", "YES")
    run(r, "CLIENT", "GETREDIR")                          # CLIENT commands keep it
    run(r, "GET", "b")                                    # remembered, then spent
    run(r, "GET", "c")
    run(r, "CLIENT", "CACHING", "YES")
    run(r, "MULTI")
    run(r, "GET", "d")
    run(r, "GET", "e")
    run(r, "EXEC")
    run(w, "MSET", "a", "1", "b", "1", "c", "1", "d", "1", "e", "1")
    assert r.data_to_send() == inv(b"b") + inv(b"d") + inv(b"e")
    assert run(r, "CLIENT", "CACHING", "NO") == \
        b"-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"


def test_flushall_sends_one_null_and_empties_the_table(core: ServerCore) -> None:
    r, r2, s, w = resp3(core), core.connection_made(), core.connection_made(), \
        core.connection_made()
    run(s, "SUBSCRIBE", "__redis__:invalidate")
    run(r, "CLIENT", "TRACKING", "ON")
    run(r2, "CLIENT", "TRACKING", "ON", "REDIRECT", str(s.id))
    run(r, "GET", "k")
    run(w, "FLUSHALL")
    assert r.data_to_send() == b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    assert s.data_to_send() == b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    assert run(r, "FLUSHDB") == b"+OK\r\n>2\r\n$10\r\ninvalidate\r\n_\r\n"
    run(r, "MULTI")
    run(r, "FLUSHDB")
    run(r, "FLUSHDB")
    assert run(r, "EXEC") == b"*2\r\n+OK\r\n+OK\r\n" + 2 * b">2\r\n$10\r\ninvalidate\r\n_\r\n"


def test_transaction_reply_comes_before_its_invalidations(core: ServerCore) -> None:
    r = resp3(core)
    run(r, "CLIENT", "TRACKING", "ON")
    run(r, "MSET", "a", "1", "b", "2")
    run(r, "GET", "a")
    run(r, "MULTI")
    run(r, "INCR", "a")
    run(r, "GET", "b")
    assert run(r, "EXEC") == b"*2\r\n:2\r\n$1\r\n2\r\n" + inv(b"a")


def test_lazy_and_active_expiry(core: ServerCore) -> None:
    r, w = resp3(core), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON")
    run(w, "SET", "x", "1", "PX", "10")
    run(w, "SET", "y", "1", "PX", "10")
    run(r, "MGET", "x", "y")
    core.now_ms += 20
    assert run(r, "GET", "x") == b"_\r\n" + inv(b"x")     # lazily expired by its own read
    core.tick(core.now_ms)                                # the active cycle: y
    assert r.data_to_send() == inv(b"y")


def test_expiry_reaches_a_bcast_noloop_client(core: ServerCore) -> None:
    b = resp3(core)
    run(b, "CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP")
    assert run(b, "SET", "k", "v", "PX", "10") == b"+OK\r\n"
    core.now_ms += 20
    core.tick(core.now_ms)
    assert b.data_to_send() == inv(b"k")


def test_script_reads_remember_the_declared_keys(core: ServerCore) -> None:
    r, w = resp3(core), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON")
    run(r, "EVAL", "redis.call('set', 'k3', 'x')", "2", "k1", "k2")
    run(w, "MSET", "k1", "1", "k2", "1")
    assert r.data_to_send() == b""
    run(r, "EVAL", "redis.call('get', 'k3')", "2", "k1", "k2")
    run(w, "MSET", "k2", "1", "k1", "1")
    assert r.data_to_send() == inv(b"k2") + inv(b"k1")


def test_table_limit_evicts_with_an_invalidation(core: ServerCore) -> None:
    r, w = resp3(core), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON")
    run(r, "MGET", "a", "b", "c")
    assert run(w, "CONFIG", "SET", "tracking-table-max-keys", "1") == b"+OK\r\n"
    out = r.data_to_send()
    assert out.count(b"invalidate") == 2
    assert b"tracking_total_keys:1\r\n" in run(w, "INFO", "stats")


def test_reset_and_close_turn_tracking_off(core: ServerCore) -> None:
    r, b = resp3(core), core.connection_made()
    run(r, "CLIENT", "TRACKING", "ON")
    run(b, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p")
    assert b"tracking_clients:2\r\n" in run(r, "INFO", "clients")
    assert run(r, "RESET") == b"+RESET\r\n"
    assert run(r, "CLIENT", "TRACKINGINFO") == \
        b"*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"
    core.client_closed(b)
    info = run(r, "INFO", "everything")
    assert b"tracking_clients:0\r\n" in info and b"tracking_total_prefixes:0\r\n" in info
    assert not core.tracking_on


def test_unblocked_client_gets_its_reply_before_the_invalidation(core: ServerCore) -> None:
    d, w = resp3(core), core.connection_made()
    run(w, "RPUSH", "list2", "a")
    run(d, "CLIENT", "TRACKING", "ON")
    run(d, "LRANGE", "list2", "0", "-1")
    assert run(d, "BLMOVE", "list1", "list2", "LEFT", "LEFT", "0") == b""
    run(w, "RPUSH", "list1", "foo")
    assert d.data_to_send() == b"$3\r\nfoo\r\n" + inv(b"list2")
