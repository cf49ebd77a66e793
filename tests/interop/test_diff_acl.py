"""Differential tests of ACL: pyrepl against real redis-server 7.0.15, RESP2 and RESP3.

Every ACL subcommand's replies (GENPASS by shape, LOG with its time and client fields
masked), the -NOPERM texts for a command, a key and a channel, AUTH and HELLO AUTH as a
restricted user, CLIENT KILL USER. The servers are shared by the module: each test deletes its
users and gives ``default`` back its rules at the end.
"""

from __future__ import annotations

import re

import pytest
from differential import Pair
from support import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

USERS = ("alice", "bob", "carol")


@pytest.fixture
def p(pair: Pair):
    try:
        yield pair
    finally:
        for side in (pair.a, pair.b):
            side.call("ACL", "SETUSER", "default", "on", "nopass", "~*", "&*", "+@all")
            side.call("ACL", "DELUSER", *USERS)
            side.call("ACL", "LOG", "RESET")


def clients(p: Pair) -> tuple[RawClient, RawClient]:
    a, b = RawClient(p.a.sock.getpeername()[1]), RawClient(p.b.sock.getpeername()[1])
    if p.proto == 3:
        a.call("HELLO", "3")
        b.call("HELLO", "3")
    return a, b


def both(a: RawClient, b: RawClient, *argv: str) -> bytes:
    ra, rb = a.call(*argv), b.call(*argv)
    assert ra == rb, f"{argv!r}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}"
    return ra


def _norm_rules(text: bytes) -> tuple:
    """A description with its single-command rules as a set: Redis emits them in its command
    dict's order, which a random hash seed decides."""
    words = text.split()
    return tuple(w for w in words if not w.startswith((b"+", b"-")) or b"@" in w), \
        sorted(w for w in words if w.startswith((b"+", b"-")) and b"@" not in w)


def _norm(v: object) -> object:
    if isinstance(v, bytes):
        return _norm_rules(v) if b"@all" in v else v
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def check_rules(p: Pair, *argv: str) -> None:
    """p.check for GETUSER / LIST: the same replies up to the order of single commands."""
    ra, rb = p.both(*argv)
    assert _norm(parse_reply(ra)) == _norm(parse_reply(rb)), \
        f"{argv!r}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}"
    assert ra.count(b"\r\n") == rb.count(b"\r\n") and ra[:1] == rb[:1]


SETUPS = [
    ("alice", "on", ">p1", "~foo*", "&chan*", "+get", "+set"),
    ("alice", "on", "nopass", "allkeys", "allchannels", "allcommands"),
    ("alice", ">a", ">b", "<a", "%R~r*", "%W~w*", "%RW~rw*", "+@read", "-@all"),
    ("alice", "on", "#" + "a" * 64, "!" + "a" * 64, "nocommands", "resetkeys", "~k"),
    ("alice", "+@all", "-@dangerous", "~*", "&*", "on", "resetpass"),
    ("alice", "+@read", "+@write"),
    ("alice", "+select|0", "+config|get", "-@all"),
    ("alice", "reset"),
    ("alice", "on", "(~x +get)", "(%R~y", "+set)"),
    ("alice", "on", "(~x +get)", "clearselectors"),
]

BAD = [
    ("alice", "+nosuchcommand"),
    ("alice", "+@nosuchcat"),
    ("alice", "bogus"),
    ("alice", "~*", "~foo"),
    ("alice", "&*", "&foo"),
    ("alice", "<nothere"),
    ("alice", "#abc"),
    ("alice", "+config|get|x"),
    ("alice", "%X~a"),
    ("alice", "(~x"),
    ("al ice", "on"),
    ("alice", "+select|"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_setuser_getuser_list_users(p: Pair) -> None:
    for rules in SETUPS:
        p.check("ACL", "SETUSER", *rules)
        check_rules(p, "ACL", "GETUSER", "alice")
        check_rules(p, "ACL", "LIST")
        p.check("ACL", "DELUSER", "alice")
    for rules in BAD:
        p.check("ACL", "SETUSER", *rules)
    p.check("ACL", "SETUSER", "bob")
    p.check("ACL", "SETUSER", "alice", "on")
    p.check("ACL", "USERS")
    p.check("ACL", "GETUSER", "default")
    p.check("ACL", "GETUSER", "nobody")
    p.check("ACL", "DELUSER", "bob", "nobody", "alice")
    p.check("ACL", "DELUSER", "default")
    p.check("ACL", "DELUSER", "nobody", "default")
    p.check("ACL", "WHOAMI")


@pytest.mark.parametrize("proto", [2, 3])
def test_cat_genpass_help_dryrun(p: Pair) -> None:
    p.check("ACL", "CAT")
    # (the categories whose commands pyrepl's table has exactly as Redis 7.0.15: no cluster
    # commands, MIGRATE or PFDEBUG here, Redis 8's hash-field TTL commands in addition)
    for cat in ("pubsub", "transaction", "SCRIPTING", "string", "list", "set", "sortedset",
                "geo", "stream", "bitmap", "blocking"):
        ra, rb = p.both("ACL", "CAT", cat)
        assert sorted(parse_reply(ra)) == sorted(parse_reply(rb)), cat
    p.check("ACL", "CAT", "nosuch")
    p.check("ACL", "CAT", "a", "b")
    p.check("ACL", "HELP")
    p.check("ACL", "NOSUCH")
    p.check("ACL", "LOAD")
    p.check("ACL", "SAVE")
    for bits in ((), ("1",), ("5",), ("4096",)):
        ra, rb = p.both("ACL", "GENPASS", *bits)
        assert len(parse_reply(ra)) == len(parse_reply(rb))
    for bits in ("0", "4097", "x", "-1"):
        p.check("ACL", "GENPASS", bits)
    p.check("ACL", "SETUSER", "alice", "on", "~foo*", "&chan", "+get", "+publish", "+config|get")
    for argv in (("get", "foo1"), ("get", "bar"), ("set", "foo", "1"), ("publish", "chan", "m"),
                 ("publish", "x", "m"), ("config", "get", "maxmemory"),
                 ("config", "set", "maxmemory", "1"), ("get",), ("nosuch", "x"),
                 ("config", "nosuch"), ("subscribe", "chan", "x")):
        p.check("ACL", "DRYRUN", "alice", *argv)
    p.check("ACL", "DRYRUN", "nobody", "get", "x")


@pytest.mark.parametrize("proto", [2, 3])
def test_noperm_texts_auth_and_log(p: Pair) -> None:
    p.check("ACL", "SETUSER", "alice", "on", ">pw", "~foo*", "%R~ro*", "&chan", "+get", "+set",
            "+publish", "+subscribe", "+multi", "+exec", "+acl|whoami")
    a, b = clients(p)
    try:
        both(a, b, "AUTH", "alice", "wrong")
        both(a, b, "AUTH", "nobody", "pw")
        both(a, b, "AUTH", "alice", "pw")
        both(a, b, "ACL", "WHOAMI")
        for argv in (("get", "foo"), ("get", "bar"), ("set", "ro1", "x"), ("get", "ro1"),
                     ("del", "foo"), ("publish", "chan", "m"), ("publish", "other", "m"),
                     ("acl", "list"), ("config", "get", "maxmemory"), ("ping",),
                     ("multi",), ("get", "bar"), ("del", "x"), ("exec",)):
            both(a, b, *argv)
        both(a, b, "SUBSCRIBE", "chan", "nope")
        both(a, b, "RESET")
        both(a, b, "ACL", "WHOAMI")
        both(a, b, "HELLO", str(p.proto), "AUTH", "alice", "bad")
        ra, rb = a.call("HELLO", str(p.proto), "AUTH", "alice", "pw"), \
            b.call("HELLO", str(p.proto), "AUTH", "alice", "pw")
        assert re.sub(rb"id\r\n:\d+", b"", ra) == re.sub(rb"id\r\n:\d+", b"", rb)  # (ids differ)
        both(a, b, "ACL", "WHOAMI")
        both(a, b, "GET", "bar")
        both(a, b, "CLIENT", "SETNAME", "x")
    finally:
        a.close()
        b.close()
    logs = logs_of(p, "ACL", "LOG")
    assert logs[0] == logs[1]
    assert {e[b"reason"] for e in logs[0]} == {b"auth", b"command", b"key", b"channel"}
    assert {e[b"context"] for e in logs[0]} == {b"toplevel", b"multi"}
    one = logs_of(p, "ACL", "LOG", "1")
    assert one[0] == one[1] and len(one[0]) == 1
    p.check("ACL", "LOG", "x")
    p.check("ACL", "LOG", "RESET")
    p.check("ACL", "LOG")


def logs_of(p: Pair, *argv: str) -> list:
    """ACL LOG's entries on both sides without age-seconds and with only the client-info
    fields both servers fill the same way."""
    logs = []
    for side in (p.a, p.b):
        entries = parse_reply(side.call(*argv))
        masked = []
        for e in entries:
            d = dict(e.items()) if isinstance(e, dict) else dict(zip(e[::2], e[1::2], strict=True))
            d.pop(b"age-seconds")
            info = d.pop(b"client-info").split()
            d[b"client-info"] = [f for f in info if f.split(b"=")[0] in (b"cmd", b"user",
                                                                          b"multi", b"flags")]
            masked.append(d)
        logs.append(masked)
    return logs


@pytest.mark.parametrize("proto", [2, 3])
def test_default_user_password_and_client_kill_user(p: Pair) -> None:
    p.check("ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~*")
    a, b = clients(p)
    try:
        both(a, b, "AUTH", "bob", "anything")
        p.check("CLIENT", "KILL", "USER", "bob")
        p.check("CLIENT", "KILL", "USER", "nobody")
        p.check("AUTH", "x")
        p.check("ACL", "SETUSER", "default", ">s3")
        p.check("ACL", "LIST")
        p.check("AUTH", "wrong")
        p.check("AUTH", "s3")
        p.check("ACL", "SETUSER", "default", "off")
        p.check("AUTH", "default", "s3")
    finally:
        a.close()
        b.close()


def test_subscribers_losing_their_channels_are_disconnected(p: Pair) -> None:
    p.check("ACL", "SETUSER", "carol", "on", "nopass", "+@all", "&news.*")
    a, b = clients(p)
    try:
        both(a, b, "AUTH", "carol", "x")
        both(a, b, "PSUBSCRIBE", "news.*")
        p.check("ACL", "SETUSER", "carol", "&extra")
        both(a, b, "PING")
        p.check("ACL", "SETUSER", "carol", "resetchannels", "&news.a")
        for side in (a, b):
            side.sock.settimeout(5)
            assert side.sock.recv(100) == b""
    finally:
        a.close()
        b.close()
