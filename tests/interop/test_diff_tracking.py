"""Differential tests of client-side caching (CLIENT TRACKING): pyrepl against a real
redis-server 7.0.15, ported from Redis's tests/unit/tracking.tcl.

Each test opens the same named connections on both servers and runs the same steps; after a
step every open connection is sent a PING and everything it received up to the pong (replies,
invalidation pushes, ``__redis__:invalidate`` messages, ``tracking-redir-broken``) is compared
byte for byte. Client ids differ between the servers: a ``{id:name}`` argument is each side's id
of connection ``name``, and ids in GETREDIR / TRACKINGINFO / CLIENT INFO / redir-broken frames
are compared as the connection's name. Each module gets its own pair of servers so that the
global tracking table starts empty (INFO's tracking_* fields are compared too).
"""

from __future__ import annotations

import re

import pytest

from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

PONGS = (b"+PONG\r\n", b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")


class Side:
    def __init__(self, port: int) -> None:
        self.port = port
        self.conns: dict[str, RawClient] = {}
        self.ids: dict[str, int] = {}

    def norm(self, data: bytes) -> bytes:
        names = {str(i).encode(): n.encode() for n, i in self.ids.items()}

        def sub(m: re.Match[bytes]) -> bytes:
            return m.group(1) + b"<" + names.get(m.group(2), m.group(2)) + b">" + m.group(3)

        return re.sub(rb"(tracking-redir-broken\r\n:|redirect\r\n:|\$2\r\nid\r\n:|redir=|"
                      rb"\bid=)(\d+)(\b)", sub, data)


class World:
    """The same named connections on pyrepl (``sides[0]``) and Redis (``sides[1]``)."""

    def __init__(self, ports: tuple[int, int]) -> None:
        self.sides = [Side(p) for p in ports]
        self.in_multi: set[str] = set()     # (not PINGed: the PING would be queued)
        for s in self.sides:
            with RawClient(s.port) as c:
                c.call("FLUSHALL")
                c.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")

    def open(self, *names: str, resp3: tuple[str, ...] = ()) -> World:
        """Connections ``names`` on both servers, in that order; those in ``resp3`` send
        HELLO 3 first."""
        for name in names:
            for s in self.sides:
                c = RawClient(s.port, timeout=5)
                if name in resp3:
                    c.call("HELLO", "3")
                s.conns[name] = c
                s.ids[name] = parse_reply(c.call("CLIENT", "ID"))  # type: ignore[assignment]
        return self

    def close(self) -> None:
        for s in self.sides:
            for c in s.conns.values():
                c.close()

    def _argv(self, s: Side, argv: tuple[str | bytes | int, ...]) -> list[str | bytes | int]:
        out: list[str | bytes | int] = []
        for a in argv:
            if isinstance(a, str) and a.startswith("{id:"):
                a = str(s.ids[a[4:-1]])
            out.append(a)
        return out

    def run(self, name: str, *argv: str | bytes | int, sync: bool = True) -> bytes:
        """``argv`` on connection ``name`` of both servers; the replies must be equal."""
        got = []
        for s in self.sides:
            r = s.norm(s.conns[name].call(*self._argv(s, argv)))
            if [str(a).upper() for a in argv] == ["CLIENT", "GETREDIR"]:
                r = s.norm(r.replace(b":", b"redirect\r\n:"))
            got.append(r)
        assert got[0] == got[1], f"{name} {argv!r}:\n  pyrepl: {got[0]!r}\n  redis:  {got[1]!r}"
        verb = str(argv[0]).upper()
        if verb == "MULTI":
            self.in_multi.add(name)
        elif verb in ("EXEC", "DISCARD"):
            self.in_multi.discard(name)
        if sync:
            self.sync()
        return got[0]

    def send(self, name: str, *argv: str | bytes | int) -> None:
        """Send without reading (a blocking command, QUIT)."""
        for s in self.sides:
            s.conns[name].send(*self._argv(s, argv))

    def frames(self, s: Side, name: str) -> list[bytes]:
        c = s.conns[name]
        c.send("PING")
        out = []
        while True:
            f = c.read_reply()
            if f in PONGS:
                return out
            out.append(s.norm(f))

    def sync(self, *names: str) -> dict[str, list[bytes]]:
        """PING every connection (or ``names``) and compare what each received meanwhile."""
        seen = {}
        for name in names or [n for n in self.sides[0].conns if n not in self.in_multi]:
            fa, fb = (self.frames(s, name) for s in self.sides)
            assert fa == fb, f"frames of {name}:\n  pyrepl: {fa!r}\n  redis:  {fb!r}"
            seen[name] = fa
        return seen

    def with_subscriber(self, *names: str, resp3: tuple[str, ...] = ()) -> World:
        """``s`` subscribed to ``__redis__:invalidate`` (a redirect target), then the
        connections ``names`` as :meth:`open` opens them."""
        self.open("s", *names, resp3=resp3)
        self.run("s", "SUBSCRIBE", "__redis__:invalidate")
        return self

    def quit(self, name: str) -> None:
        for s in self.sides:
            c = s.conns.pop(name)
            assert c.call("QUIT") == b"+OK\r\n"
            c.close()
        for s in self.sides:   # gone on the server
            with RawClient(s.port) as probe:
                mark = b"id=%d " % s.ids[name]
                wait_for(lambda p=probe, m=mark: m not in p.call("CLIENT", "LIST"),
                         what="client gone")

    def info(self, *fields: str) -> None:
        """The named INFO fields are equal on both servers."""
        vals = []
        for s in self.sides:
            with RawClient(s.port) as c:
                text = parse_reply(c.call("INFO", "everything"))
            assert isinstance(text, bytes)
            d = dict(line.split(b":", 1) for line in text.split(b"\r\n") if b":" in line)
            vals.append({f: d[f.encode()] for f in fields})
        assert vals[0] == vals[1], f"INFO: pyrepl {vals[0]} redis {vals[1]}"

    def client_info(self, name: str) -> None:
        """CLIENT INFO's flags and redir of ``name`` are equal (redir as a name)."""
        got = []
        for s in self.sides:
            line = s.norm(parse_reply(s.conns[name].call("CLIENT", "INFO")))  # type: ignore
            fields = dict(f.split(b"=", 1) for f in line.split())
            got.append((fields[b"flags"], fields[b"redir"]))
        assert got[0] == got[1], f"CLIENT INFO {name}: pyrepl {got[0]} redis {got[1]}"


@pytest.fixture
def world(servers):
    w = World(servers)
    try:
        yield w
    finally:
        w.close()


TRACKING_INFO = ("tracking_clients", "tracking_total_keys", "tracking_total_items",
                 "tracking_total_prefixes")


def test_default_mode_resp3(world: World) -> None:
    w = world.open("r", "w", resp3=("r",))
    w.run("r", "CLIENT", "TRACKING", "ON")
    w.client_info("r")
    w.run("w", "SET", "k", "1")
    w.run("r", "GET", "k")
    w.info(*TRACKING_INFO)
    w.run("w", "SET", "k", "2", sync=False)       # r: invalidate k
    assert w.sync()["r"] == [b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"]
    w.run("w", "SET", "k", "3")                   # nothing: forgotten
    w.run("r", "GET", "k")
    w.run("r", "SET", "k", "4")                   # its own write: after the reply
    w.run("r", "MGET", "a", "b", "c")
    w.run("w", "MSET", "a", "1", "b", "2", "x", "3")
    w.run("r", "HSET", "h", "f", "1")
    w.run("r", "HGET", "h", "f")
    w.run("r", "HDEL", "h", "f")                  # hdel: after the reply
    w.run("r", "LRANGE", "l", "0", "-1")
    w.run("w", "RPUSH", "l", "a")
    w.run("r", "SMEMBERS", "s")
    w.run("r", "ZSCORE", "z", "m")
    w.run("r", "EXISTS", "s", "z")
    w.run("w", "SADD", "s", "m")
    w.run("w", "ZADD", "z", "1", "m")
    w.run("w", "DEL", "s", "z")                    # no longer tracked
    w.run("r", "GET", "k")
    w.run("w", "APPEND", "k", "x")
    w.run("r", "STRLEN", "k")
    w.run("w", "EXPIRE", "k", "100")
    w.run("r", "TTL", "k")
    w.run("w", "PERSIST", "k")
    w.run("r", "GET", "k")
    w.run("w", "RENAME", "k", "k2")
    w.info(*TRACKING_INFO)
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("r", "CLIENT", "GETREDIR")
    w.run("r", "GET", "k2")
    w.run("r", "CLIENT", "TRACKING", "OFF")
    w.run("w", "SET", "k2", "x")                  # not tracking any more: nothing
    w.run("r", "CLIENT", "GETREDIR")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.client_info("r")
    w.info(*TRACKING_INFO)


def test_resp2_redirect_and_resp3_redirect(world: World) -> None:
    w = world.with_subscriber("u", "r", "r2", "t", "w", resp3=("u",))
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}")
    w.client_info("r")
    w.run("r", "CLIENT", "GETREDIR")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("w", "MSET", "a", "1", "b", "1")
    w.run("r", "GET", "a")
    w.run("w", "INCR", "b")                       # not fetched: nothing
    w.run("w", "INCR", "a", sync=False)           # s: message
    assert w.sync()["s"] == [b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
                             b"*1\r\n$1\r\na\r\n"]
    w.run("r", "GET", "a")
    w.run("r", "INCR", "a")                       # its own write, redirected
    # two clients redirecting to the same connection; one RESP3 to a RESP2 subscriber
    w.run("r2", "HELLO", "3")
    w.run("r2", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}")
    w.run("r", "GET", "k1")
    w.run("r2", "GET", "k1")
    w.run("w", "SET", "k1", "x")
    w.run("r", "MGET", "k1", "k2")
    w.run("r2", "MGET", "k2", "k1")
    w.run("w", "MSET", "k2", "1", "k1", "1")
    # RESP2 without a redirect: nothing can be sent
    w.run("t", "CLIENT", "TRACKING", "ON")
    w.run("t", "GET", "k3")
    w.run("w", "SET", "k3", "x")
    # RESP2 redirecting to a RESP2 client that is not subscribed: nothing
    w.run("t", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:w}")
    w.run("t", "GET", "k3")
    w.run("w", "SET", "k3", "y")
    # a redirect to a RESP3 client (not subscribed): pushes
    w.run("t", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:u}")
    w.run("t", "GET", "k4")
    w.run("w", "SET", "k4", "y")
    w.info(*TRACKING_INFO)
    # a RESP2 tracker's keys, then it switches to RESP3: still redirected
    w.run("r", "GET", "k5")
    w.run("r", "HELLO", "3")
    w.run("w", "SET", "k5", "1")
    # errors
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "999999")
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}", "REDIRECT", "{id:s}")
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "x")
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT")
    w.run("r", "CLIENT", "TRACKING", "ON", "NOPE")
    w.run("r", "CLIENT", "TRACKING", "MAYBE")
    w.run("r", "CLIENT", "TRACKING")
    w.run("r", "CLIENT", "TRACKING", "ON", "PREFIX", "a")
    w.run("r", "CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT")
    w.run("r", "CLIENT", "TRACKINGINFO")


def test_bcast_prefixes(world: World) -> None:
    w = world.with_subscriber("r", "b3", "w", resp3=("b3",))
    w.run("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "{id:s}")
    w.client_info("r")
    w.run("w", "MSET", "a", "1", "b", "2", "c", "3")
    w.run("r", "CLIENT", "TRACKING", "OFF")
    w.run("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "{id:s}", "PREFIX", "a:",
          "PREFIX", "b:")
    w.run("r", "MULTI")
    for k in ("a:2", "a:1", "b:1", "b:2", "c:1"):
        w.run("r", "INCR", k)
    w.run("r", "EXEC")                            # two messages, keys sorted
    w.run("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "{id:s}", "PREFIX", "c:")
    w.run("w", "INCR", "c:1234")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.info(*TRACKING_INFO)
    # RESP3, its own writes after the reply; a key under two clients' prefixes
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:", "PREFIX", "zz")
    w.run("b3", "SET", "a:9", "x")
    w.run("w", "DEL", "a:9", "a:1", "zz1", "nope")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST")   # adds the empty prefix
    w.run("b3", "CLIENT", "TRACKINGINFO")
    w.run("w", "SET", "q", "1")
    w.info(*TRACKING_INFO)
    # errors
    w.run("b3", "CLIENT", "TRACKING", "ON")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "OPTIN")
    w.run("b3", "CLIENT", "TRACKING", "OFF")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR")
    w.run("b3", "CLIENT", "TRACKINGINFO")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FO")
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "BARB")
    w.run("b3", "CLIENT", "TRACKING", "OFF")
    # Redis's quirk: an overlap found past the first prefix answers the error, then OK
    w.run("b3", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x", "PREFIX", "y",
          "PREFIX", "yz", sync=False)
    w.sync()
    w.run("b3", "CLIENT", "TRACKINGINFO")
    w.run("w", "SET", "yzz", "1")
    w.info(*TRACKING_INFO, "total_error_replies")
    w.run("b3", "CLIENT", "TRACKING", "OFF")
    w.info(*TRACKING_INFO)


def test_switching_to_bcast_drops_earlier_keys(world: World) -> None:
    w = world.open("r", "w", resp3=("r",))
    w.run("r", "CLIENT", "TRACKING", "ON")
    w.run("w", "SET", "key1", "1")
    w.run("r", "GET", "key1")
    w.run("r", "CLIENT", "TRACKING", "OFF")
    w.run("r", "CLIENT", "TRACKING", "ON", "BCAST")
    w.run("w", "INCR", "key1")                    # once, from BCAST only


def test_optin_optout_caching(world: World) -> None:
    w = world.with_subscriber("r", "w")
    w.run("r", "CLIENT", "CACHING", "YES")        # not tracking
    w.run("r", "CLIENT", "TRACKING", "ON", "OPTIN", "REDIRECT", "{id:s}")
    w.run("r", "CLIENT", "CACHING", "NO")
    w.run("r", "CLIENT", "CACHING", "MAYBE")
    w.run("r", "GET", "k1")                        # not remembered
    w.run("w", "SET", "k1", "1")
    w.run("r", "CLIENT", "CACHING", "YES")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("r", "CLIENT", "GETNAME")               # a CLIENT command keeps it
    w.run("r", "GET", "k1")                        # remembered
    w.run("r", "CLIENT", "TRACKINGINFO")           # spent
    w.run("r", "GET", "k2")                        # not remembered
    w.run("w", "MSET", "k1", "2", "k2", "2")
    w.run("r", "CLIENT", "CACHING", "YES")
    w.run("r", "MULTI")
    w.run("r", "GET", "k1")
    w.run("r", "GET", "k2")
    w.run("r", "EXEC")                             # both remembered
    w.run("r", "GET", "k3")
    w.run("w", "MSET", "k1", "3", "k2", "3", "k3", "3")
    w.run("r", "CLIENT", "TRACKING", "ON", "OPTOUT")
    w.run("r", "CLIENT", "TRACKING", "OFF")
    w.run("r", "CLIENT", "TRACKING", "ON", "OPTOUT", "REDIRECT", "{id:s}")
    w.run("r", "CLIENT", "CACHING", "YES")
    w.run("r", "GET", "k1")                        # remembered
    w.run("r", "CLIENT", "CACHING", "NO")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("r", "GET", "k2")                        # not remembered
    w.run("w", "MSET", "k1", "4", "k2", "4")
    w.info(*TRACKING_INFO)


def test_noloop(world: World) -> None:
    w = world.with_subscriber("r", "n3", "w", resp3=("n3",))
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}", "NOLOOP")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("r", "MGET", "otherkey1", "loopkey", "otherkey2")
    w.run("w", "SET", "otherkey1", "1")
    w.run("r", "SET", "loopkey", "1")
    w.run("w", "SET", "otherkey2", "1")
    w.run("r", "CLIENT", "TRACKING", "OFF")
    w.run("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "{id:s}", "NOLOOP")
    w.run("w", "SET", "otherkey1", "1")
    w.run("r", "SET", "loopkey", "1")
    w.run("r", "MSET", "loopkey", "2", "otherkey9", "1")
    w.run("w", "SET", "otherkey2", "1")
    # a NOLOOP client's own script writes are not sent to it; its reads in scripts are
    w.run("n3", "CLIENT", "TRACKING", "ON", "NOLOOP")
    w.run("n3", "SET", "key1", "1")
    w.run("n3", "GET", "key1")
    w.run("n3", "EVAL", "return redis.call('set', KEYS[1], '2')", "1", "key1")
    w.run("n3", "GET", "key1")
    w.run("w", "SET", "key1", "3")


def test_scripts_remember_declared_keys(world: World) -> None:
    w = world.open("r", "w", resp3=("r",))
    w.run("r", "CLIENT", "TRACKING", "ON")
    w.run("w", "MSET", "key2", "1", "key1", "1")
    w.run("r", "EVAL", "redis.call('set', 'key3', 'bar')", "2", "key1", "key2")
    w.run("w", "MSET", "key2", "2", "key1", "2")  # no read in the script: nothing
    w.run("r", "EVAL", "redis.call('get', 'key3')", "2", "key1", "key2")
    w.run("w", "MSET", "key2", "2", "key1", "2")
    w.run("r", "EVAL_RO", "redis.call('ping')", "2", "key1", "key2")
    w.run("w", "MSET", "key2", "2", "key1", "2")
    w.run("r", "EVAL_RO", "redis.call('get', 'key1')", "2", "key1", "key2")
    w.run("w", "MSET", "key2", "3", "key1", "3")
    # a script reading then writing a declared key: the invalidation follows the reply
    w.run("r", "EVAL", "redis.call('get', KEYS[1]); return redis.call('incr', KEYS[1])", "1",
          "cnt")
    w.info(*TRACKING_INFO)


def test_multi_exec_and_flushes(world: World) -> None:
    w = world.with_subscriber("r", "r2", "w", resp3=("r",))
    w.run("r", "CLIENT", "TRACKING", "ON")
    w.run("r", "MSET", "a", "1", "b", "2")
    w.run("r", "GET", "a")
    w.run("r", "MULTI")
    w.run("r", "INCR", "a")
    w.run("r", "GET", "b")
    w.run("r", "EXEC")                             # invalidate after the transaction
    w.run("w", "MULTI")
    w.run("w", "INCR", "b")
    w.run("w", "INCR", "b")
    w.run("w", "EXEC")
    w.run("r2", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}")
    w.run("r2", "GET", "x")
    w.run("r", "GET", "x")
    w.info(*TRACKING_INFO)
    w.run("w", "FLUSHALL")                         # one null each ($-1 for RESP2, _ for RESP3)
    w.info(*TRACKING_INFO)
    w.run("r", "GET", "a")
    w.run("w", "SELECT", "3")
    w.run("w", "FLUSHDB")
    w.run("w", "FLUSHALL", "ASYNC")
    w.run("r", "FLUSHDB")                          # its own: after the reply
    w.run("r", "SET", "a", "1")
    w.run("r", "GET", "a")
    w.run("r", "MULTI")
    w.run("r", "FLUSHDB")
    w.run("r", "FLUSHDB")
    w.run("r", "EXEC")
    w.info(*TRACKING_INFO)


def test_expiry_lazy_and_active(world: World) -> None:
    w = world.with_subscriber("r", "r3", "w", resp3=("r3",))
    w.run("w", "DEBUG", "SET-ACTIVE-EXPIRE", "0")
    # lazy: the reader's own read expires the key, the invalidation follows its reply
    w.run("r3", "CLIENT", "TRACKING", "ON")
    w.run("r3", "MULTI")
    w.run("r3", "MSET", "x", "1", "y", "2")
    w.run("r3", "PEXPIRE", "y", "50")
    w.run("r3", "GET", "y")
    w.run("r3", "EXEC")
    wait_for(lambda: all(_pttl(s.port, "y") == -2 for s in w.sides), what="y expired")
    w.run("r3", "MGET", "x", "y")
    # BCAST NOLOOP: an expiry is nobody's write, the client gets it
    w.run("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "{id:s}", "NOLOOP")
    w.run("r", "MULTI")
    w.run("r", "SET", "mykey", "myval", "PX", "1")
    w.run("r", "SET", "mykeyotherkey", "myval")
    w.run("r", "DEBUG", "SLEEP", "0.05")
    w.run("r", "GET", "mykey")
    w.run("r", "EXEC")
    # the active cycle deletes mykey (expired already), then k: each server when its cron runs,
    # so each invalidation is compared once the key is gone on both (DBSIZE does not touch
    # keys), one key at a time (a cycle that finds both sends them as one message)
    w.run("w", "DEBUG", "SET-ACTIVE-EXPIRE", "1", sync=False)
    wait_dbsize(w, 2, "mykey expired")      # x, mykeyotherkey
    assert len(w.sync()["s"]) == 1
    w.run("r", "SET", "k", "v", "PX", "30", sync=False)
    w.run("r", "SET", "k2", "v", sync=False)
    wait_dbsize(w, 3, "k expired")
    assert len(w.sync()["s"]) == 1


def wait_dbsize(w: World, n: int, what: str) -> None:
    for s in w.sides:
        with RawClient(s.port) as c:
            wait_for(lambda c=c: c.call("DBSIZE") == b":%d\r\n" % n, what=what)


def _pttl(port: int, key: str) -> object:
    with RawClient(port) as c:
        return parse_reply(c.call("PTTL", key))


def test_redirect_client_goes_away(world: World) -> None:
    w = world.with_subscriber("r", "r2", "w", resp3=("r",))
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}")
    w.run("r2", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}")
    w.run("w", "SET", "key1", "1")
    w.run("r", "GET", "key1")
    w.run("r2", "GET", "key1")
    w.quit("s")
    w.run("w", "SET", "key1", "2", sync=False)     # r: tracking-redir-broken; r2: nothing
    seen = w.sync()
    assert seen["r"] == [b">2\r\n$21\r\ntracking-redir-broken\r\n:<s>\r\n"] and not seen["r2"]
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("r2", "CLIENT", "TRACKINGINFO")
    w.client_info("r")
    w.client_info("r2")
    w.run("r", "CLIENT", "GETREDIR")
    w.run("r", "GET", "key1")
    w.run("r", "SET", "key1", "3")                 # its own write: broken after the reply
    w.run("r", "GET", "key1")
    w.run("w", "FLUSHALL")


def test_blocked_blmove_gets_invalidation_after_reply(world: World) -> None:
    w = world.open("d", "w", resp3=("d",))
    w.run("w", "RPUSH", "list2", "a")
    w.run("d", "CLIENT", "TRACKING", "ON")
    w.run("d", "LRANGE", "list2", "0", "-1")
    w.send("d", "BLMOVE", "list1", "list2", "LEFT", "LEFT", "0")
    for s in w.sides:
        with RawClient(s.port) as c:
            wait_for(lambda c=c: b"blocked_clients:1\r\n" in c.call("INFO", "clients"),
                     what="blocked")
    w.run("w", "RPUSH", "list1", "foo")            # d: foo, then invalidate list2


def test_reset_and_client_reply_off(world: World) -> None:
    w = world.open("r", "w", resp3=("r",))
    w.run("r", "CLIENT", "TRACKING", "ON")
    w.run("r", "GET", "foo")
    w.send("r", "CLIENT", "REPLY", "OFF")
    w.run("w", "SET", "foo", "bar", sync=False)     # pushed even with replies off
    got = [s.conns["r"].read_reply() for s in w.sides]
    assert got[0] == got[1] == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nfoo\r\n"
    w.run("r", "CLIENT", "REPLY", "ON")
    w.run("r", "GET", "foo")
    w.run("r", "RESET")
    w.run("r", "CLIENT", "TRACKINGINFO")
    w.run("w", "SET", "foo", "baz")                 # nothing after RESET
    w.info(*TRACKING_INFO)


def test_tracking_table_max_keys(world: World) -> None:
    w = world.with_subscriber("r", "w")
    w.run("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "{id:s}", "NOLOOP")
    w.run("w", "MSET", "key1", "1", "key2", "2")
    w.run("r", "MGET", "key1", "key2")
    w.run("w", "CONFIG", "SET", "tracking-table-max-keys", "1", sync=False)
    # the key evicted is random: one message for key1 or key2 on each server
    for s in w.sides:
        frames = w.frames(s, "s")
        assert len(frames) == 1
        assert frames[0] in [b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$4\r\n"
                             + k + b"\r\n" for k in (b"key1", b"key2")]
    w.info(*TRACKING_INFO)
    w.run("w", "CONFIG", "SET", "tracking-table-max-keys", "0")
    w.run("r", "MGET", "a", "b", "c")
    w.info(*TRACKING_INFO)


def test_swapdb_does_not_invalidate_and_reload_sends_null(world: World) -> None:
    """SWAPDB touches WATCHed keys but invalidates nothing; DEBUG RELOAD empties the dataset
    and sends every tracking client a null invalidation (emptyData), as Redis does."""
    w = world.open("r", "w", resp3=("r",))
    w.run("w", "SET", "a", "1")
    w.run("r", "CLIENT", "TRACKING", "ON")
    w.run("r", "GET", "a")
    w.run("w", "WATCH", "a")
    w.run("w", "SWAPDB", "0", "1")          # r gets nothing
    w.run("w", "MULTI")
    w.run("w", "SET", "z", "1")
    w.run("w", "EXEC")                      # but the WATCH saw a change: null
    w.run("w", "SWAPDB", "0", "1")
    w.run("r", "GET", "a")
    w.run("w", "DEBUG", "RELOAD")           # r gets one null invalidation
    w.run("r", "GET", "a")
    w.run("w", "SET", "a", "2")
