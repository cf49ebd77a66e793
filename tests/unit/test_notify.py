"""Keyspace notifications, sans-io: a ServerCore in-process, a client PSUBSCRIBEd to
``__key*__:*`` and the events each command publishes, in order.

The expected lists are read off Redis 7.0.15's notifyKeyspaceEvent calls (Redis 8.6's for the
hash-field TTL commands); tests/interop/test_diff_notifications.py compares with the real
servers. Here: the shape of each family, the flags (K / E / classes / ``A``), ``new``,
``keymiss``, lazy and active expiry (keys and hash fields), RENAME / MOVE / COPY, the served
blocking pops, and that nothing is published with notifications off.
"""

from __future__ import annotations

import pytest

from pyrepl.core.server import ServerCore
from tests.support.cores import make_core, run
from tests.support.resp import _parse
from tests.support.resp import encode_command as cmd

NOW = 1_700_000_000_000


def _events(sub) -> list[tuple[bytes, bytes]]:
    """(channel, message) of every pmessage the subscriber received since the last call."""
    data = sub.data_to_send()
    out = []
    pos = 0
    while pos < len(data):
        v, pos = _parse(data, pos)
        assert isinstance(v, list), v
        if v[0] == b"pmessage":
            out.append((v[2], v[3]))
    return out


class Env:
    def __init__(self, flags: str = "KEAnm") -> None:
        self.core: ServerCore = make_core(("notify-keyspace-events", [flags]), now=NOW)
        self.c = self.core.connection_made()
        self.sub = self.core.connection_made()
        run(self.sub, "PSUBSCRIBE", "__key*__:*")

    def ev(self, *argv: str | bytes, db: int = 0) -> list[tuple[str, str]]:
        """Run a command on the client; the events as (event, key) pairs taken from the
        keyevent channel, checked against the keyspace channel's twin that precedes it."""
        run(self.c, *argv)
        return self.events()

    def events(self) -> list[tuple[str, str]]:
        raw = _events(self.sub)
        out = []
        for i in range(0, len(raw), 2):
            (ks_chan, ks_msg), (ke_chan, ke_msg) = raw[i], raw[i + 1]
            assert ks_chan.startswith(b"__keyspace@") and ke_chan.startswith(b"__keyevent@")
            dbid = ks_chan[11:ks_chan.index(b"__:")]
            key = ks_chan[ks_chan.index(b"__:") + 3:]
            assert ke_chan == b"__keyevent@" + dbid + b"__:" + ks_msg
            assert ke_msg == key
            tag = "" if dbid == b"0" else f"@{dbid.decode()}"
            out.append((ks_msg.decode() + tag, key.decode()))
        return out


@pytest.fixture
def env() -> Env:
    return Env()


def test_off_by_default_publishes_nothing() -> None:
    core = make_core(now=NOW)
    c, sub = core.connection_made(), core.connection_made()
    run(sub, "PSUBSCRIBE", "*")
    sub.data_to_send()
    for argv in (("SET", "a", "1"), ("GET", "nope"), ("LPUSH", "l", "x"), ("DEL", "a"),
                 ("INCR", "n"), ("HSET", "h", "f", "v"), ("SADD", "s", "m")):
        run(c, *argv)
    assert sub.data_to_send() == b""


def test_strings(env: Env) -> None:
    assert env.ev("SET", "k", "v") == [("new", "k"), ("set", "k")]
    assert env.ev("SET", "k", "w") == [("set", "k")]
    assert env.ev("SET", "k", "x", "EX", "100") == [("set", "k"), ("expire", "k")]
    assert env.ev("SET", "k", "x", "NX") == []
    assert env.ev("SET", "g", "x", "GET") == [("keymiss", "g"), ("new", "g"), ("set", "g")]
    assert env.ev("MSET", "a", "1", "k", "2") == [("new", "a"), ("set", "a"), ("set", "k")]
    assert env.ev("INCR", "n") == [("new", "n"), ("incrby", "n")]
    assert env.ev("INCR", "n") == [("incrby", "n")]
    assert env.ev("DECRBY", "n", "5") == [("incrby", "n")]
    assert env.ev("INCRBYFLOAT", "n", "1.5") == [("incrbyfloat", "n")]
    assert env.ev("APPEND", "ap", "x") == [("new", "ap"), ("append", "ap")]
    assert env.ev("SETRANGE", "ap", "3", "yy") == [("setrange", "ap")]
    assert env.ev("SETRANGE", "ap", "3", "") == []
    assert env.ev("GETSET", "gs", "1") == [("keymiss", "gs"), ("new", "gs"), ("set", "gs")]
    assert env.ev("GETDEL", "gs") == [("del", "gs")]
    assert env.ev("GETEX", "k", "PX", "5000") == [("expire", "k")]
    assert env.ev("GETEX", "k", "PERSIST") == [("persist", "k")]
    assert env.ev("GETEX", "k", "PERSIST") == []
    assert env.ev("GETEX", "k", "PXAT", "1") == [("del", "k")]
    assert env.ev("GET", "k") == [("keymiss", "k")]
    assert env.ev("MGET", "a", "zz", "yy") == [("keymiss", "zz"), ("keymiss", "yy")]
    assert env.ev("STRLEN", "zz") == [("keymiss", "zz")]


def test_lists_and_moves(env: Env) -> None:
    assert env.ev("RPUSH", "l", "a", "b", "c") == [("new", "l"), ("rpush", "l")]
    assert env.ev("LPUSHX", "l", "z") == [("lpush", "l")]
    assert env.ev("LPUSHX", "nol", "z") == []
    assert env.ev("LINSERT", "l", "BEFORE", "b", "x") == [("linsert", "l")]
    assert env.ev("LINSERT", "l", "BEFORE", "nope", "x") == []
    assert env.ev("LSET", "l", "0", "q") == [("lset", "l")]
    assert env.ev("LREM", "l", "0", "x") == [("lrem", "l")]
    assert env.ev("LTRIM", "l", "0", "-1") == [("ltrim", "l")]
    assert env.ev("LMOVE", "l", "m", "LEFT", "RIGHT") == [
        ("new", "m"), ("rpush", "m"), ("lpop", "l")]
    assert env.ev("RPOP", "l", "5") == [("rpop", "l"), ("del", "l")]
    assert env.ev("LRANGE", "l", "0", "-1") == [("keymiss", "l")]
    assert env.ev("LMPOP", "2", "l", "m", "RIGHT") == [("rpop", "m"), ("del", "m")]
    assert env.ev("LPOP", "m") == []


def test_served_blocking_pop_follows_the_push(env: Env) -> None:
    waiter = env.core.connection_made()
    waiter.receive_data(cmd("BLPOP", "q", "0"))
    assert env.events() == []
    assert env.ev("RPUSH", "q", "v") == [("new", "q"), ("rpush", "q"), ("lpop", "q"),
                                         ("del", "q")]
    assert b"v" in waiter.data_to_send()
    waiter.receive_data(cmd("BLMOVE", "q", "d", "RIGHT", "LEFT", "0"))
    assert env.ev("LPUSH", "q", "w") == [("new", "q"), ("lpush", "q"), ("new", "d"),
                                         ("lpush", "d"), ("rpop", "q"), ("del", "q")]


def test_sets(env: Env) -> None:
    assert env.ev("SADD", "s", "a", "b", "c") == [("new", "s"), ("sadd", "s")]
    assert env.ev("SADD", "s", "a") == []
    assert env.ev("SREM", "s", "a", "zz") == [("srem", "s")]
    assert env.ev("SMOVE", "s", "t", "b") == [("srem", "s"), ("new", "t"), ("sadd", "t")]
    assert env.ev("SMOVE", "s", "t", "c") == [("srem", "s"), ("del", "s"), ("sadd", "t")]
    assert env.ev("SINTERSTORE", "d", "t", "nope") == [("keymiss", "nope")]
    assert env.ev("SUNIONSTORE", "d", "t") == [("new", "d"), ("sunionstore", "d")]
    assert env.ev("SDIFFSTORE", "d", "t", "t") == [("del", "d")]
    assert env.ev("SPOP", "t", "1") == [("spop", "t")]
    assert env.ev("SPOP", "t", "10") == [("spop", "t"), ("del", "t")]


def test_zsets(env: Env) -> None:
    assert env.ev("ZADD", "z", "1", "a", "2", "b", "3", "c") == [("new", "z"), ("zadd", "z")]
    assert env.ev("ZADD", "z", "1", "a") == []
    assert env.ev("ZADD", "z", "XX", "5", "nope") == []
    assert env.ev("ZINCRBY", "z", "1", "a") == [("zincr", "z")]
    assert env.ev("ZREM", "z", "zz") == []
    assert env.ev("ZREMRANGEBYSCORE", "z", "0", "2.5") == [("zremrangebyscore", "z")]
    assert env.ev("ZRANGESTORE", "d", "z", "0", "-1") == [("new", "d"), ("zrangestore", "d")]
    assert env.ev("ZUNIONSTORE", "d", "1", "nope") == [("keymiss", "nope"), ("del", "d")]
    assert env.ev("ZPOPMAX", "z", "5") == [("zpopmax", "z"), ("del", "z")]
    assert env.ev("GEOADD", "g", "13.36", "38.11", "p") == [("new", "g"), ("zadd", "g")]
    assert env.ev("GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "13.36", "38.11", "BYRADIUS",
                  "10", "km") == [("new", "gs"), ("geosearchstore", "gs")]
    assert env.ev("GEORADIUS", "g", "0", "0", "1", "km", "STORE", "gs") == [("del", "gs")]


def test_hashes_and_field_ttls(env: Env) -> None:
    assert env.ev("HSET", "h", "a", "1", "b", "2", "c", "3") == [("new", "h"), ("hset", "h")]
    assert env.ev("HSETNX", "h", "a", "9") == []
    assert env.ev("HINCRBY", "h", "n", "2") == [("hincrby", "h")]
    assert env.ev("HDEL", "h", "n", "zz") == [("hdel", "h")]
    assert env.ev("HPEXPIRE", "h", "100", "FIELDS", "2", "a", "zz") == [("hexpire", "h")]
    assert env.ev("HPERSIST", "h", "FIELDS", "1", "a") == [("hpersist", "h")]
    assert env.ev("HPEXPIRE", "h", "100", "FIELDS", "2", "a", "b") == [("hexpire", "h")]
    env.core.now_ms = NOW + 200
    # HMGET: one hexpired for the command; HGET: one per field, then del with the last
    assert env.ev("HMGET", "h", "a", "b", "c") == [("hexpired", "h")]
    assert env.ev("HPEXPIREAT", "h", "1", "FIELDS", "1", "c") == [("hdel", "h"), ("del", "h")]
    assert env.ev("HSET", "h", "a", "1") == [("new", "h"), ("hset", "h")]
    assert env.ev("HPEXPIRE", "h", "100", "FIELDS", "1", "a") == [("hexpire", "h")]
    env.core.now_ms = NOW + 400
    assert env.ev("HGET", "h", "a") == [("hexpired", "h"), ("del", "h")]
    assert env.ev("HGET", "h", "a") == [("keymiss", "h")]


def test_hash_fields_active_expiry(env: Env) -> None:
    env.ev("HSET", "h", "a", "1", "b", "2", "c", "3")
    env.ev("HPEXPIRE", "h", "100", "FIELDS", "2", "a", "b")
    env.core.tick(NOW + 500)
    assert env.events() == [("hexpired", "h")]
    env.ev("HPEXPIRE", "h", "100", "FIELDS", "1", "c")
    env.core.tick(NOW + 1000)
    assert env.events() == [("hexpired", "h"), ("del", "h")]


def test_streams(env: Env) -> None:
    assert env.ev("XADD", "x", "1-1", "f", "v") == [("new", "x"), ("xadd", "x")]
    assert env.ev("XADD", "x", "MAXLEN", "1", "2-1", "f", "v") == [("xadd", "x"), ("xtrim", "x")]
    assert env.ev("XADD", "nx", "NOMKSTREAM", "*", "f", "v") == []
    assert env.ev("XGROUP", "CREATE", "x", "g", "0") == [("xgroup-create", "x")]
    assert env.ev("XGROUP", "CREATE", "y", "g", "$", "MKSTREAM") == [
        ("new", "y"), ("xgroup-create", "y")]
    assert env.ev("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "x", ">") == [
        ("xgroup-createconsumer", "x")]
    assert env.ev("XCLAIM", "x", "g", "c2", "0", "2-1") == [("xgroup-createconsumer", "x")]
    assert env.ev("XGROUP", "CREATECONSUMER", "x", "g", "c2") == []
    assert env.ev("XGROUP", "DELCONSUMER", "x", "g", "c2") == [("xgroup-delconsumer", "x")]
    assert env.ev("XGROUP", "SETID", "x", "g", "0") == [("xgroup-setid", "x")]
    assert env.ev("XDEL", "x", "2-1", "9-9") == [("xdel", "x")]
    assert env.ev("XSETID", "x", "5-0") == [("xsetid", "x")]
    assert env.ev("XTRIM", "x", "MAXLEN", "0") == []
    assert env.ev("XGROUP", "DESTROY", "x", "g") == [("xgroup-destroy", "x")]
    assert env.ev("XLEN", "none") == [("keymiss", "none")]


def test_generic(env: Env) -> None:
    env.ev("SET", "a", "1")
    assert env.ev("EXPIRE", "a", "100") == [("expire", "a")]
    assert env.ev("PERSIST", "a") == [("persist", "a")]
    assert env.ev("PERSIST", "a") == []
    assert env.ev("EXPIRE", "nope", "100") == []
    assert env.ev("RENAME", "a", "b") == [("new", "b"), ("rename_from", "a"), ("rename_to", "b")]
    env.ev("SET", "c", "1")
    assert env.ev("RENAME", "c", "b") == [("new", "b"), ("rename_from", "c"), ("rename_to", "b")]
    assert env.ev("MOVE", "b", "3") == [("new@3", "b"), ("move_from", "b"), ("move_to@3", "b")]
    run(env.c, "SELECT", "3")
    assert env.ev("COPY", "b", "b", "DB", "0") == [("new", "b"), ("copy_to", "b")]
    assert env.ev("COPY", "none", "x") == [("keymiss@3", "none")]
    run(env.c, "SELECT", "0")
    assert env.ev("DEL", "b", "nope", "b") == [("del", "b")]
    assert env.ev("EXISTS", "b") == [("keymiss", "b")]
    assert env.ev("TYPE", "b") == [("keymiss", "b")]
    assert env.ev("TTL", "b") == [("keymiss", "b")]
    assert env.ev("OBJECT", "ENCODING", "b") == []
    env.ev("SET", "a", "1")
    assert env.ev("EXPIRE", "a", "-1") == [("del", "a")]
    env.ev("RPUSH", "l", "3", "1", "2")
    assert env.ev("SORT", "l", "BY", "w_*", "STORE", "d") == [
        ("keymiss", "w_3"), ("keymiss", "w_1"), ("keymiss", "w_2"), ("new", "d"),
        ("sortstore", "d")]
    env.ev("SET", "p", "x")
    payload = run(env.c, "DUMP", "p")
    blob = payload[payload.index(b"\r\n") + 2:-2]
    assert env.ev("RESTORE", "r", "0", blob) == [("new", "r"), ("restore", "r")]
    assert env.ev("PFADD", "hll", "a") == [("new", "hll"), ("pfadd", "hll")]
    assert env.ev("PFADD", "hll", "a") == []
    assert env.ev("PFMERGE", "hll2", "hll") == [("keymiss", "hll2"), ("new", "hll2"),
                                                ("pfadd", "hll2")]
    assert env.ev("SETBIT", "bits", "7", "1") == [("new", "bits"), ("setbit", "bits")]
    assert env.ev("SETBIT", "bits", "7", "1") == []
    assert env.ev("BITOP", "OR", "bo", "bits") == [("new", "bo"), ("set", "bo")]
    assert env.ev("BITOP", "OR", "bo", "none") == [("keymiss", "none"), ("del", "bo")]


def test_expiry_lazy_and_active(env: Env) -> None:
    env.ev("SET", "a", "1", "PX", "100")
    env.ev("SET", "b", "1", "PX", "100")
    env.core.now_ms = NOW + 200
    assert env.ev("GET", "a") == [("expired", "a"), ("keymiss", "a")]
    assert env.ev("SET", "a", "2") == [("new", "a"), ("set", "a")]
    env.core.tick(NOW + 300)
    assert env.events() == [("expired", "b")]
    env.ev("SET", "c", "1", "PX", "100")
    env.core.now_ms = NOW + 500
    # a write lookup expires the key and then creates it: expired, new, lpush
    assert env.ev("LPUSH", "c", "x") == [("expired", "c"), ("new", "c"), ("lpush", "c")]


@pytest.mark.parametrize("flags, expected", [
    ("Kg", [(b"__keyspace@0__:a", b"del")]),
    ("Eg", [(b"__keyevent@0__:del", b"a")]),
    ("K$", [(b"__keyspace@0__:a", b"set")]),
    ("Em", [(b"__keyevent@0__:keymiss", b"zz")]),
    ("En", [(b"__keyevent@0__:new", b"a")]),
    ("KA", [(b"__keyspace@0__:a", b"set"), (b"__keyspace@0__:a", b"del")]),
])
def test_flags_select_channels_and_classes(flags: str, expected: list) -> None:
    env = Env(flags)
    run(env.c, "SET", "a", "1")
    run(env.c, "GET", "zz")
    run(env.c, "DEL", "a")
    assert _events(env.sub) == expected


def test_config_set_switches_notifications_on_and_off(env: Env) -> None:
    run(env.c, "CONFIG", "SET", "notify-keyspace-events", "")
    assert env.ev("SET", "a", "1") == []
    run(env.c, "CONFIG", "SET", "notify-keyspace-events", "Eg$")
    run(env.c, "SET", "a", "2")
    assert _events(env.sub) == [(b"__keyevent@0__:set", b"a")]


def test_mset_clears_ttls_and_signals_watch_with_and_without_events() -> None:
    """MSET's store without db.set (no TTL, WATCH or event in the db) and with it: a key's TTL
    is cleared, a WATCHing client's EXEC fails, the values are there."""
    core = make_core()
    a, b = core.connection_made("127.0.0.1:1", "x"), core.connection_made("127.0.0.1:2", "x")
    assert run(a, "MSET", "k1", "v1", "k2", "v2") == b"+OK\r\n"          # (the plain store)
    assert run(a, "MGET", "k1", "k2") == b"*2\r\n$2\r\nv1\r\n$2\r\nv2\r\n"
    run(a, "EXPIRE", "k1", "100")
    assert run(a, "MSET", "k1", "w1", "k3", "w3") == b"+OK\r\n"          # (a TTL in the db)
    assert run(a, "TTL", "k1") == b":-1\r\n"
    run(b, "WATCH", "k2")
    run(b, "MULTI")
    run(b, "GET", "k2")
    assert run(a, "MSET", "k2", "x2") == b"+OK\r\n"                     # (a WATCH in the db)
    assert run(b, "EXEC") == b"*-1\r\n"
    assert run(a, "MGET", "k1", "k2", "k3") == b"*3\r\n$2\r\nw1\r\n$2\r\nx2\r\n$2\r\nw3\r\n"
