"""Keyspace notifications: pyrepl against real redis-server 7.0.15 (Redis 8 for hash-field TTLs).

Each side has a data client and a subscriber PSUBSCRIBEd to ``__key*__:*`` (RESP2 or RESP3).
Every step runs one command on both data clients (replies compared, except where Redis leaves
them random), then a PING on both subscribers: everything the subscriber received before the
PING's reply is what that step published, compared byte for byte and in order. Steps come from
the random-command generators of the per-type differential tests (run under several
``notify-keyspace-events`` flag sets), from a table of targeted cases (RENAME/MOVE/COPY, SORT
STORE, RESTORE, GEO*STORE, PFMERGE, BITOP, streams' groups, MULTI/EXEC), lazy and active expiry,
the blocking pops served by a push, and the hash-field TTL events against Redis 8.
Evictions are not compared: pyrepl has no maxmemory eviction yet (no ``evicted`` event).
"""

from __future__ import annotations

import random
import shutil
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.interop.test_diff_bitmaps import COMMAND as BITMAP_COMMAND
from tests.interop.test_diff_hashes import rand_command as hash_command
from tests.interop.test_diff_hyperloglog import COMMAND as HLL_COMMAND
from tests.interop.test_diff_keys import COMMAND as KEY_COMMAND
from tests.interop.test_diff_keys import TIMED
from tests.interop.test_diff_lists import rand_command as list_command
from tests.interop.test_diff_sets import COMMAND as SET_COMMAND
from tests.interop.test_diff_sort import COMMAND as SORT_COMMAND
from tests.interop.test_diff_sort import SETUP as SORT_SETUP
from tests.interop.test_diff_streams import COMMAND as STREAM_COMMAND
from tests.interop.test_diff_strings import COMMAND as STRING_COMMAND
from tests.interop.test_diff_zsets import COMMAND as ZSET_COMMAND
from tests.support.differential import PROTOS, SEEDS, normalize, sequence_settings
from tests.support.procs import start_redis
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

# mostly everything on (one subscriber sees every event), sometimes a narrower set
FLAGS = st.one_of(st.just("KEAnm"), st.sampled_from(["KEA", "Elg", "Kx", "En", "Em",
                                                     "K$lshzt", "EAn", "KEm$"]))
# replies Redis leaves random (or timing dependent): events compared, replies not
RANDOM_REPLY = {"SPOP", "SRANDMEMBER", "ZRANDMEMBER", "HRANDFIELD", "RANDOMKEY", "SCAN",
                "SSCAN", "HSCAN", *TIMED}
PONG = {2: b"*2\r\n$4\r\npong\r\n$0\r\n\r\n", 3: b"+PONG\r\n"}


class Sides:
    """A data client and a subscriber on each server; ``step`` compares one command."""

    def __init__(self, ports: tuple[int, int], flags: str, sub_proto: int = 2,
                 active_expire: bool = True) -> None:
        self.data = [RawClient(p) for p in ports]
        self.subs = [RawClient(p) for p in ports]
        self.sub_proto = sub_proto
        self.history: list[tuple[str, ...]] = []
        for d in self.data:
            d.call("FLUSHALL")
            d.call("DEBUG", "SET-ACTIVE-EXPIRE", "1" if active_expire else "0")
            assert d.call("CONFIG", "SET", "notify-keyspace-events", flags) == b"+OK\r\n"
        for s in self.subs:
            if sub_proto == 3:
                s.call("HELLO", "3")
            s.call("PSUBSCRIBE", "__key*__:*")
        self.flags = flags

    def close(self) -> None:
        for c in (*self.data, *self.subs):
            c.close()

    def messages(self, i: int) -> list[bytes]:
        s = self.subs[i]
        s.send("PING")
        out = []
        while True:
            r = s.read_reply()
            if r == PONG[self.sub_proto]:
                return out
            out.append(r)

    def events(self, what: object = "", unordered: bool = False) -> list[bytes]:
        """The messages both subscribers got since the last call (asserted equal; as
        multisets when ``unordered``)."""
        ma, mb = self.messages(0), self.messages(1)
        if unordered:
            ma.sort()
            mb.sort()
        assert ma == mb, (f"flags {self.flags!r}, RESP{self.sub_proto} subscriber, after "
                          f"{what!r}:\n  pyrepl: {ma!r}\n  redis:  {mb!r}\n"
                          f"  sequence: {self.history!r}")
        return ma

    def call(self, *argv: str | bytes, reply: bool = True) -> bytes:
        self.history.append(tuple(a if isinstance(a, str) else repr(a) for a in argv))
        ra, rb = self.data[0].call(*argv), self.data[1].call(*argv)
        if reply:
            na, nb = normalize(argv, ra), normalize(argv, rb)
            assert na == nb, f"{argv!r}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}\n" \
                             f"  sequence: {self.history!r}"
        return ra

    def step(self, *argv: str | bytes, reply: bool = True) -> list[bytes]:
        name = argv[0].upper() if isinstance(argv[0], str) else argv[0].decode().upper()
        self.call(*argv, reply=reply and name not in RANDOM_REPLY)
        # SORT of a set or sorted set looks up its BY patterns in the order of the value's
        # hash table (Redis converts a sorted set to a skiplist and walks its dict), which no
        # other server reproduces: the same keymiss events, in any order
        unordered = name in ("SORT", "SORT_RO") and argv[1] in ("s", "ns", "z")
        return self.events(argv, unordered)


def _run(servers, flags: str, proto: int, commands) -> int:
    """Run ``commands`` step by step; the active expiry is off (a key given a time already
    past, e.g. SET ... PXAT 2, would otherwise be expired by each server's cron at a step of
    its own), so every expiry is a lazy one, at the same step on both."""
    sides = Sides(servers, flags, proto, active_expire=False)
    n = 0
    try:
        for argv in commands:
            # (a generator may nest its options in a tuple: SSCAN's)
            flat = [x for a in argv for x in (a if isinstance(a, tuple) else (a,))]
            n += len(sides.step(*flat))
        sides.call("SELECT", "0")
    finally:
        sides.close()
    return n


# -- random sequences per type -----------------------------------------------------------------

def _keys_command(argv: tuple[str, ...]) -> tuple[str, ...]:
    return {"__SCAN__": ("SCAN", "0", "COUNT", "100"),
            "__RANDOMKEY__": ("RANDOMKEY",)}.get(argv[0], argv)


def _not_spop(argv: tuple[str, ...]) -> bool:
    """SPOP removes random members: the two servers' sets would differ afterwards."""
    return argv[0] != "SPOP"


FAMILIES = {
    "strings": STRING_COMMAND,
    "sets": SET_COMMAND.filter(_not_spop),
    "zsets": ZSET_COMMAND,
    "keys": KEY_COMMAND.map(_keys_command),
    "streams": STREAM_COMMAND,
    "hyperloglog": HLL_COMMAND,
    "bitmaps": BITMAP_COMMAND,
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_sequences(servers, family) -> None:
    @sequence_settings(150)
    @given(flags=FLAGS, proto=PROTOS, cmds=st.lists(FAMILIES[family], min_size=10, max_size=30))
    def run(flags, proto, cmds):
        _run(servers, flags, proto, cmds)

    run()


@pytest.mark.parametrize("name, gen", [("lists", list_command), ("hashes", hash_command)])
def test_random_sequences_seeded(servers, name, gen) -> None:
    @sequence_settings(60)
    @given(flags=FLAGS, proto=PROTOS, seed=SEEDS)
    def run(flags, proto, seed):
        rnd = random.Random(seed)
        _run(servers, flags, proto, [gen(rnd) for _ in range(rnd.randint(8, 30))])

    run()


@sequence_settings(40)
@given(flags=FLAGS, proto=PROTOS, cmds=st.lists(SORT_COMMAND, min_size=1, max_size=8))
def test_random_sorts(servers, flags, proto, cmds) -> None:
    _run(servers, flags, proto, [*SORT_SETUP, *cmds])


def test_the_generators_publish(servers) -> None:
    """The sequences above are not vacuous: with everything on, a plain sequence publishes."""
    rnd = random.Random(7)
    n = _run(servers, "KEAnm", 2, [list_command(rnd) for _ in range(40)])
    assert n > 20


# -- targeted cases ------------------------------------------------------------------------------

CASES: list[tuple[str, ...]] = [
    # generic: rename (onto an existing key too), move, copy, expire family, del
    ("SET", "a", "1"), ("RENAME", "a", "b"), ("SET", "c", "2"), ("RENAME", "c", "b"),
    ("RENAMENX", "b", "b"), ("RENAME", "nope", "x"), ("SET", "d", "x"), ("RENAMENX", "b", "d"),
    ("MOVE", "b", "2"), ("MOVE", "d", "2"), ("SET", "d", "1"), ("MOVE", "d", "2"),
    ("COPY", "d", "e"), ("COPY", "d", "e"), ("COPY", "d", "e", "REPLACE"),
    ("COPY", "d", "e", "DB", "3"), ("COPY", "nope", "e"), ("EXPIRE", "e", "100"),
    ("PEXPIRE", "e", "100000", "NX"), ("PERSIST", "e"), ("PERSIST", "e"),
    ("EXPIREAT", "e", "1"), ("SET", "e", "1", "EX", "100"), ("GETEX", "e", "PERSIST"),
    ("GETEX", "e", "EX", "100"), ("GETEX", "e", "PXAT", "1"), ("DEL", "d", "d", "x", "e"),
    ("UNLINK", "nope"), ("EXISTS", "x", "y"), ("TYPE", "x"), ("TOUCH", "x"), ("TTL", "x"),
    ("OBJECT", "ENCODING", "x"), ("DUMP", "x"), ("GETDEL", "x"),
    # strings
    ("SET", "s", "v", "GET"), ("SET", "s", "w", "GET", "PX", "100000"), ("SETNX", "s", "x"),
    ("SETEX", "t", "100", "v"), ("PSETEX", "t", "100000", "v"), ("MSETNX", "t", "1", "u", "2"),
    ("MSETNX", "u", "1", "w", "2"), ("MSET", "u", "1", "w", "2"), ("INCR", "n"),
    ("INCRBY", "n", "10000000000"), ("DECR", "n"), ("INCRBYFLOAT", "n", "0.5"),
    ("INCRBYFLOAT", "m", "1"), ("APPEND", "ap", "x"), ("APPEND", "ap", "y"),
    ("SETRANGE", "sr", "5", ""), ("SETRANGE", "sr", "5", "x"), ("SETRANGE", "sr", "0", ""),
    ("GETSET", "gs", "1"), ("GETSET", "gs", "2"), ("LCS", "gs", "nope"),
    # bitmaps / hyperloglog
    ("SETBIT", "bits", "9", "1"), ("SETBIT", "bits", "9", "1"), ("SETBIT", "bits", "100", "0"),
    ("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9"),
    ("BITFIELD", "bf", "SET", "u8", "0", "0"), ("BITFIELD", "bf", "SET", "u8", "0", "7"),
    ("BITFIELD_RO", "nope", "GET", "u8", "0"), ("BITOP", "AND", "bo", "bits", "bf"),
    ("BITOP", "OR", "bo", "nope1", "nope2"), ("GETBIT", "nope", "3"), ("BITCOUNT", "nope"),
    ("PFADD", "h1", "a", "b"), ("PFADD", "h1", "a"), ("PFADD", "h0"), ("PFADD", "h0"),
    ("PFMERGE", "h2", "h1", "nope"), ("PFMERGE", "h2"), ("PFCOUNT", "h1", "nope"),
    # lists
    ("RPUSH", "l", "3", "1", "2"), ("LPUSHX", "nope", "x"), ("RPUSHX", "l", "4"),
    ("LINSERT", "l", "AFTER", "4", "5"), ("LINSERT", "l", "AFTER", "nope", "5"),
    ("LSET", "l", "-1", "6"), ("LREM", "l", "0", "nope"), ("LREM", "l", "1", "6"),
    ("LTRIM", "l", "0", "-1"), ("LPOP", "l", "0"), ("RPOPLPUSH", "l", "l2"),
    ("LMOVE", "l2", "l2", "LEFT", "RIGHT"), ("LMOVE", "l2", "l", "LEFT", "LEFT"),
    ("LMPOP", "2", "nope", "l", "LEFT", "COUNT", "2"), ("LTRIM", "l", "5", "1"),
    ("RPUSH", "bl", "x"), ("BLPOP", "nope", "bl", "0"), ("LRANGE", "l", "0", "-1"), ("LINDEX", "l", "0"),
    # sort store
    ("RPUSH", "sl", "3", "1", "2"), ("SET", "w_1", "9"), ("SORT", "sl", "BY", "w_*", "STORE", "so"),
    ("SORT", "sl", "BY", "nosort", "GET", "#", "GET", "w_*"), ("SORT", "nope", "STORE", "so"),
    ("SORT", "nope", "STORE", "so"), ("SORT_RO", "sl", "BY", "w_*"),
    # sets
    ("SADD", "s1", "a", "b", "c"), ("SADD", "s1", "a"), ("SADD", "s2", "c", "d"),
    ("SINTERSTORE", "si", "s1", "s2"), ("SINTERSTORE", "si", "s1", "nope"),
    ("SUNIONSTORE", "si", "s1", "s2"), ("SDIFFSTORE", "si", "s1", "s1"), ("SMOVE", "s2", "s1", "d"),
    ("SMOVE", "s2", "s1", "c"), ("SMOVE", "s1", "s1", "a"), ("SREM", "s1", "a", "zz"),
    ("SPOP", "s1", "0"), ("SPOP", "s1", "10"), ("SISMEMBER", "nope", "x"), ("SINTER", "n1", "n2"),
    ("SINTERCARD", "2", "n1", "n2"),
    # sorted sets and geo
    ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("ZADD", "z", "GT", "0", "a"),
    ("ZADD", "z", "INCR", "1", "a"), ("ZADD", "z", "CH", "5", "a"), ("ZINCRBY", "z", "1", "b"),
    ("ZADD", "zx", "XX", "1", "a"), ("ZREMRANGEBYRANK", "z", "0", "0"),
    ("ZREMRANGEBYLEX", "z", "-", "+"), ("ZADD", "z", "0", "a", "0", "b", "0", "c"),
    ("ZREMRANGEBYLEX", "z", "[a", "[a"), ("ZREMRANGEBYSCORE", "z", "5", "6"),
    ("ZRANGESTORE", "zd", "z", "0", "-1"), ("ZRANGESTORE", "zd", "z", "5", "6"),
    ("ZUNIONSTORE", "zu", "2", "z", "nope"), ("ZINTERSTORE", "zu", "2", "z", "nope"),
    ("ZDIFFSTORE", "zu", "1", "z"), ("ZMPOP", "2", "nope", "z", "MAX"), ("ZPOPMIN", "z", "9"),
    ("ZADD", "bz", "1", "a", "2", "b"), ("BZPOPMAX", "nope", "bz", "0"),
    ("BZMPOP", "0", "1", "bz", "MIN", "COUNT", "5"),
    ("ZSCORE", "nope", "a"),
    ("GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"),
    ("GEOADD", "g", "NX", "13.361389", "38.115556", "Palermo"),
    ("GEOSEARCHSTORE", "gs", "g", "FROMMEMBER", "Palermo", "BYRADIUS", "200", "km"),
    ("GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"),
    ("GEORADIUSBYMEMBER", "g", "Palermo", "1", "km", "STOREDIST", "gr"),
    ("GEORADIUS", "nope", "15", "37", "200", "km", "STORE", "gr"),
    ("GEOSEARCHSTORE", "gs", "nope", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEOPOS", "nope", "x"), ("GEODIST", "g", "Palermo", "Catania"),
    # hashes (7.0 semantics)
    ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "1"), ("HMSET", "h", "c", "3"),
    ("HSETNX", "h", "a", "x"), ("HSETNX", "h", "d", "4"), ("HINCRBY", "h", "n", "1"),
    ("HINCRBYFLOAT", "h", "f", "1.5"), ("HDEL", "h", "zz"), ("HDEL", "h", "a", "b", "c", "d"),
    ("HDEL", "h", "n", "f"), ("HGET", "h", "a"), ("HGETALL", "nope"), ("HINCRBY", "h2", "x", "1"),
    # streams
    ("XADD", "x", "1-1", "f", "v"), ("XADD", "x", "MAXLEN", "1", "2-1", "f", "v"),
    ("XADD", "x", "MAXLEN", "5", "3-1", "f", "v"), ("XADD", "nx", "NOMKSTREAM", "4-1", "f", "v"),
    ("XADD", "x", "1-0", "f", "v"), ("XTRIM", "x", "MAXLEN", "5"), ("XTRIM", "x", "MINID", "3-0"),
    ("XGROUP", "CREATE", "x", "g", "0"), ("XGROUP", "CREATE", "x", "g", "0"),
    ("XGROUP", "CREATE", "y", "g", "$", "MKSTREAM"), ("XGROUP", "CREATE", "z2", "g", "$"),
    ("XADD", "x", "5-1", "f", "v"), ("XADD", "x", "6-1", "f", "v"),
    ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "x", ">"),
    ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "x", ">"),
    ("XREADGROUP", "GROUP", "g", "c3", "NOACK", "STREAMS", "x", ">"),
    ("XREADGROUP", "GROUP", "g", "c4", "STREAMS", "x", "0"),
    ("XREADGROUP", "GROUP", "g", "c5", "STREAMS", "x", "nope", ">", ">"),
    ("XCLAIM", "x", "g", "c2", "0", "5-1", "JUSTID"), ("XCLAIM", "x", "g", "c6", "0", "9-9"),
    ("XAUTOCLAIM", "x", "g", "c7", "0", "0", "COUNT", "1", "JUSTID"),
    ("XAUTOCLAIM", "x", "g", "c7", "0", "0"), ("XACK", "x", "g", "5-1"),
    ("XGROUP", "CREATECONSUMER", "x", "g", "c8"), ("XGROUP", "CREATECONSUMER", "x", "g", "c8"),
    ("XGROUP", "DELCONSUMER", "x", "g", "c8"), ("XGROUP", "DELCONSUMER", "x", "g", "c8"),
    ("XGROUP", "SETID", "x", "g", "$"), ("XDEL", "x", "5-1", "9-9"), ("XDEL", "x", "9-9"),
    ("XSETID", "x", "10-0"), ("XSETID", "x", "1-0"), ("XGROUP", "DESTROY", "x", "g"),
    ("XGROUP", "DESTROY", "x", "g"), ("XREAD", "STREAMS", "nope", "x", "0", "0"),
    ("XRANGE", "nope", "-", "+"), ("XINFO", "STREAM", "nope"), ("XPENDING", "nope", "g"),
    # transactions: events as each queued command runs
    ("MULTI",), ("SET", "t1", "1"), ("INCR", "t1"), ("LPUSH", "t1", "x"), ("DEL", "t1"),
    ("GET", "t1"), ("EXEC",),
]


@pytest.mark.parametrize("flags", ["KEAnm", "Elg", "Kx", "En", "Em", "Et", "Kz"])
@pytest.mark.parametrize("proto", [2, 3])
def test_targeted_cases(servers, flags, proto) -> None:
    n = _run(servers, flags, proto, CASES)
    if flags == "KEAnm":
        assert n > 200


def test_restore(servers) -> None:
    sides = Sides(servers, "KEAnm")
    try:
        for setup in (("RPUSH", "src", "a", "b"), ("SET", "str", "v")):
            sides.step(*setup)
        for key in ("src", "str"):
            blob = sides.data[1].call("DUMP", key)
            payload = blob[blob.index(b"\r\n") + 2:-2]
            assert sides.events() == []
            for argv in (("RESTORE", "r", "0", payload),
                         ("RESTORE", "r", "0", payload, "REPLACE"),
                         ("RESTORE", "r", "100000", payload, "REPLACE"),
                         ("RESTORE", "r", "1", payload, "REPLACE", "ABSTTL"),
                         ("RESTORE", "r", "1", payload, "ABSTTL"),
                         ("RESTORE", "r", "0", b"bad", "REPLACE")):
                sides.step(*argv)
        assert sides.step("RESTORE", "r2", "0", payload)[-1].endswith(b"$2\r\nr2\r\n")
    finally:
        sides.close()


# -- expiry --------------------------------------------------------------------------------------

def _gone(sides: Sides, n: int) -> bool:
    """Both servers hide the keys (KEYS skips expired keys without deleting them)."""
    return all(c.call("KEYS", "*").startswith(b"*%d\r\n" % n) for c in sides.data)


def test_lazy_expiry_on_access(servers) -> None:
    sides = Sides(servers, "KEAnm")
    try:
        for c in sides.data:
            assert c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"+OK\r\n"
        keys = ["get", "lpush", "exists", "set", "incr", "hset", "ttl", "del", "rename", "zadd"]
        for k in keys:
            sides.step("SET", k, "1", "PX", "50")
        wait_for(lambda: _gone(sides, 0), 5)
        assert sides.events() == []
        got = []
        for argv in (("GET", "get"), ("LPUSH", "lpush", "x"), ("EXISTS", "exists"),
                     ("SET", "set", "2"), ("INCR", "incr"), ("HSET", "hset", "f", "v"),
                     ("TTL", "ttl"), ("DEL", "del"), ("RENAME", "rename", "r"),
                     ("ZADD", "zadd", "1", "m")):
            got += sides.step(*argv)
        assert sum(b"expired" in m for m in got) == 2 * len(keys)
    finally:
        for c in sides.data:
            c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        sides.close()


@pytest.mark.parametrize("flags", ["KEA", "Ex", "Kg"])
def test_active_expiry(servers, flags) -> None:
    """Keys nobody touches are deleted by the cron (one at a time: within one cycle Redis
    samples its expires dict in random order)."""
    sides = Sides(servers, flags)
    try:
        got = []
        for setup in ((("SET", "a", "1", "PX", "30"),),
                      (("RPUSH", "b", "x"), ("PEXPIRE", "b", "40"))):
            for argv in setup:
                sides.step(*argv)
            wait_for(lambda: all(c.call("DBSIZE") == b":0\r\n" for c in sides.data), 10)
            got += sides.events("the active expiry")
        assert len(got) == {"KEA": 4, "Ex": 2, "Kg": 0}[flags]
    finally:
        sides.close()


# -- the blocking pops, served by a push ------------------------------------------------------------

BLOCKING = [
    (("BLPOP", "q", "0"), ("RPUSH", "q", "a", "b")),
    (("BRPOP", "q1", "q", "0"), ("LPUSH", "q", "a")),
    (("BLMOVE", "q", "dst", "RIGHT", "LEFT", "0"), ("RPUSH", "q", "a")),
    (("BRPOPLPUSH", "q", "q", "0"), ("RPUSH", "q", "a")),
    (("BLMPOP", "0", "2", "n", "q", "LEFT", "COUNT", "5"), ("RPUSH", "q", "a", "b")),
    (("BZPOPMIN", "zq", "0"), ("ZADD", "zq", "1", "a")),
    (("BZMPOP", "0", "1", "zq", "MAX", "COUNT", "3"), ("ZADD", "zq", "1", "a", "2", "b")),
    (("XREAD", "BLOCK", "0", "STREAMS", "xs", "$"), ("XADD", "xs", "1-1", "f", "v")),
    (("XREADGROUP", "GROUP", "g", "newc", "BLOCK", "0", "STREAMS", "xg", ">"),
     ("XADD", "xg", "2-1", "f", "v")),
]


@pytest.mark.parametrize("blocker, push", BLOCKING, ids=[b[0][0] for b in BLOCKING])
def test_served_blocking_pops(servers, blocker, push) -> None:
    sides = Sides(servers, "KEAnm")
    blockers = [RawClient(p) for p in servers]
    try:
        sides.step("XGROUP", "CREATE", "xg", "g", "$", "MKSTREAM")
        for b in blockers:
            b.send(*blocker)
        wait_for(lambda: all(b"blocked_clients:1" in c.call("INFO", "clients")
                             for c in sides.data), 10)
        sides.call(*push)
        replies = [b.read_reply() for b in blockers]
        assert replies[0] == replies[1]
        got = sides.events(push)
        assert len(got) >= 2
    finally:
        for b in blockers:
            b.close()
        sides.close()


# -- hash-field TTLs: against Redis 8 ----------------------------------------------------------

@pytest.fixture(scope="module")
def servers8(servers):
    directory = tempfile.mkdtemp(prefix="redis8-notify-")
    try:
        with start_redis("--enable-debug-command", "yes", tmpdir=directory, version=8) as srv:
            yield servers[0], srv.port
    finally:
        shutil.rmtree(directory, ignore_errors=True)


FAR = "4000000000000"


def test_hash_field_ttl_events(servers8) -> None:
    sides = Sides(servers8, "KEAnm")
    try:
        for c in sides.data:
            c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        for argv in (("HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"),
                     ("HPEXPIREAT", "h", FAR, "FIELDS", "2", "a", "zz"),
                     ("HPEXPIREAT", "h", FAR, "NX", "FIELDS", "1", "a"),
                     ("HPERSIST", "h", "FIELDS", "2", "a", "b"),
                     ("HPERSIST", "h", "FIELDS", "1", "a"),
                     ("HEXPIREAT", "h", "1", "FIELDS", "1", "d"),
                     ("HPEXPIRE", "h", "50", "FIELDS", "3", "a", "b", "c"),
                     ("HPEXPIRE", "nope", "50", "FIELDS", "1", "a"),
                     ("HSET", "g", "a", "1", "b", "2", "c", "3"),
                     ("HPEXPIRE", "g", "50", "FIELDS", "2", "a", "b"),
                     ("HSET", "k", "a", "1", "b", "2"),
                     ("HPEXPIRE", "k", "50", "FIELDS", "1", "a"),
                     ("HSET", "m", "a", "1", "b", "2"),
                     ("HPEXPIRE", "m", "50", "FIELDS", "2", "a", "b")):
            sides.step(*argv)
        wait_for(lambda: all(c.call("HTTL", "m", "FIELDS", "1", "a") == b"*1\r\n:-2\r\n"
                             for c in sides.data), 5)
        sides.events("HTTL")
        for argv in (("HGET", "h", "a"), ("HMGET", "h", "b", "c", "x"), ("HEXISTS", "h", "b"),
                     ("HSTRLEN", "g", "a"), ("HINCRBY", "g", "b", "1"), ("HSETNX", "k", "a", "9"),
                     ("HRANDFIELD", "m"), ("HGETALL", "h"), ("HLEN", "h")):
            sides.step(*argv)
        for c in sides.data:
            c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        # the active field expiry, one hash at a time (KEYS and HLEN of an existing hash
        # publish nothing): a hash emptied, then one that keeps a field
        got = []
        for argv, want in ((("HSET", "a2", "f", "1"), b"*0\r\n"),
                           (("HSET", "a3", "f", "1", "g", "2"), b"*1\r\n$2\r\na3\r\n")):
            sides.step(*argv)
            sides.step("HPEXPIRE", argv[1], "30", "FIELDS", "1", "f")
            wait_for(lambda w=want: all(c.call("KEYS", "a*") == w for c in sides.data), 10)
            if argv[1] == "a3":
                wait_for(lambda: all(c.call("HLEN", "a3") == b":1\r\n" for c in sides.data), 10)
            got += sides.events("the active field expiry")
        assert sum(b"hexpired" in m for m in got) == 4
    finally:
        for c in sides.data:
            c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        sides.close()
