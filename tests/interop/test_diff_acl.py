"""Differential tests of ACL: pyrepl against real redis-server 7.0.15, RESP2 and RESP3.

Every ACL subcommand's replies (GENPASS by shape, LOG with its time and client fields
masked), the -NOPERM texts for a command, a key and a channel, AUTH and HELLO AUTH as a
restricted user, CLIENT KILL USER, the checks of a script's redis.call and of EXEC's queue. The
servers are shared by the module: each test deletes its users and gives ``default`` back its
rules at the end. The users of the configuration and of the ACL file (startup, ACL LOAD /
SAVE, the errors that stop a start) are compared on servers of their own.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.differential import Pair
from tests.support.procs import free_port, pyrepl_argv, redis_server_path, start_pyrepl, start_redis
from tests.support.resp import RawClient, parse_reply

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


def clients(p: Pair) -> Pair:
    """Another connection to each of ``p``'s servers, in the same RESP version."""
    return Pair(p.a.sock.getpeername()[1], p.b.sock.getpeername()[1], p.proto)


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
    q = clients(p)
    try:
        q.check("AUTH", "alice", "wrong")
        q.check("AUTH", "nobody", "pw")
        q.check("AUTH", "alice", "pw")
        q.check("ACL", "WHOAMI")
        for argv in (("get", "foo"), ("get", "bar"), ("set", "ro1", "x"), ("get", "ro1"),
                     ("del", "foo"), ("publish", "chan", "m"), ("publish", "other", "m"),
                     ("acl", "list"), ("config", "get", "maxmemory"), ("ping",),
                     ("multi",), ("get", "bar"), ("del", "x"), ("exec",)):
            q.check(*argv)
        q.check("SUBSCRIBE", "chan", "nope")
        q.check("RESET")
        q.check("ACL", "WHOAMI")
        q.check("HELLO", str(p.proto), "AUTH", "alice", "bad")
        ra, rb = q.both("HELLO", str(p.proto), "AUTH", "alice", "pw")
        assert re.sub(rb"id\r\n:\d+", b"", ra) == re.sub(rb"id\r\n:\d+", b"", rb)  # (ids differ)
        q.check("ACL", "WHOAMI")
        q.check("GET", "bar")
        q.check("CLIENT", "SETNAME", "x")
    finally:
        q.close()
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
    q = clients(p)
    try:
        q.check("AUTH", "bob", "anything")
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
        q.close()


def test_subscribers_losing_their_channels_are_disconnected(p: Pair) -> None:
    p.check("ACL", "SETUSER", "carol", "on", "nopass", "+@all", "&news.*")
    q = clients(p)
    try:
        q.check("AUTH", "carol", "x")
        q.check("PSUBSCRIBE", "news.*")
        p.check("ACL", "SETUSER", "carol", "&extra")
        q.check("PING")
        p.check("ACL", "SETUSER", "carol", "resetchannels", "&news.a")
        for side in (q.a, q.b):
            side.sock.settimeout(5)
            assert side.sock.recv(100) == b""
    finally:
        q.close()


LIB = ("#!lua name=acltest\n"
       "redis.register_function('f', function() return redis.call('set','k1','v') end)")


def stats_of(p: Pair) -> list[dict]:
    """INFO errorstats, and the calls / rejected_calls / failed_calls of commandstats."""
    out = []
    for side in (p.a, p.b):
        with RawClient(side.sock.getpeername()[1]) as c:
            text = parse_reply(c.call("INFO", "errorstats"))
            stats = parse_reply(c.call("INFO", "commandstats"))
        fields = {}
        for line in stats.decode().splitlines():
            if line.startswith("cmdstat_"):
                name, _, rest = line.partition(":")
                kv = dict(x.split("=") for x in rest.split(","))
                fields[name] = (kv["calls"], kv["rejected_calls"], kv["failed_calls"])
        out.append({"errors": sorted(text.decode().splitlines()), "commands": fields})
    return out


@pytest.mark.parametrize("proto", [2, 3])
def test_scripts_and_exec_check_the_callers_permissions(p: Pair) -> None:
    p.check("ACL", "SETUSER", "alice", "on", ">pw", "~k*", "&ch", "+eval", "+fcall", "+get",
            "+incr", "+publish", "+multi", "+exec")
    p.check("FUNCTION", "LOAD", "REPLACE", LIB)
    q = clients(p)
    try:
        q.check("AUTH", "alice", "pw")
        p.check("CONFIG", "RESETSTAT")
        for script in ("return redis.call('set','k1','v')", "return redis.pcall('set','k1','v')",
                       "return redis.call('incr','x')", "return redis.call('publish','x','m')",
                       "return redis.call('incr','k1')",
                       "return redis.acl_check_cmd('get','x')",
                       "return redis.acl_check_cmd('get','k')",
                       "return redis.acl_check_cmd('set','k','v')",
                       "return redis.acl_check_cmd('nosuch')"):
            q.check("EVAL", script, "0")
        q.check("FCALL", "f", "0")
        for argv in (("MULTI",), ("INCR", "k1"), ("GET", "k2"), ("PUBLISH", "ch", "m"),
                     ("GET", "k1")):
            q.check(*argv)
        p.check("ACL", "SETUSER", "alice", "-incr", "resetkeys", "~k1", "resetchannels")
        q.check("EXEC")
        q.check("MULTI")
        q.check("GET", "k1")
        p.check("ACL", "SETUSER", "alice", "-get")
        q.check("EXEC")
        stats = stats_of(p)
        assert stats[0] == stats[1]
    finally:
        q.close()
        p.check("FUNCTION", "FLUSH")
    logs = logs_of(p, "ACL", "LOG")
    assert logs[0] == logs[1]
    assert {e[b"context"] for e in logs[0]} == {b"lua", b"multi"}
    assert {e[b"reason"] for e in logs[0]} == {b"command", b"key", b"channel"}


def _servers(tmp_path: Path, *args: str, files: dict[str, str] | None = None) -> tuple:
    """A redis-server and a pyrepl started with ``args``, each in a directory of its own
    holding ``files`` first; the Pair on them."""
    procs = []
    for kind in ("pyrepl", "redis"):
        d = tmp_path / kind
        d.mkdir()
        for name, text in (files or {}).items():
            (d / name).write_text(text)
        start = start_pyrepl if kind == "pyrepl" else start_redis
        procs.append(start(*args, tmpdir=str(d)))
    return procs, Pair(procs[0].port, procs[1].port)


def _failed_start(tmp_path: Path, kind: str, *args: str) -> str:
    """Start one server that must refuse to: its exit code 1 and its output."""
    d = tmp_path / f"{kind}-{free_port()}"
    d.mkdir()
    port = free_port()
    if kind == "redis":
        argv = [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--dir",
                str(d), "--save", "", *args]
    else:
        argv = pyrepl_argv("master", port, str(d), *args)
    out = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, (kind, out.stdout[-2000:], out.stderr[-2000:])
    return out.stdout + out.stderr


@pytest.mark.parametrize(("args", "line"), [
    (("--user", "alice", "on", "bogus"), "Error in user declaration 'alice': Syntax error"),
    (("--user", "alice", "on", "--user", "alice", "off"),
     "Error in user declaration 'alice': Duplicate user found. A user can only be defined once "
     "in config files"),
    (("--user", "alice", "on", "+nosuch"),
     "Error loading ACL rule '+nosuch' for the user named 'alice': Unknown command or category "
     "name in ACL"),
    (("--user", "alice", "on", "--aclfile", "users.acl"),
     "Configuring Redis with users defined in redis.conf and at the same setting an ACL file "
     "path is invalid."),
    (("--aclfile", "missing.acl"),
     "Aborting Redis startup because of ACL errors: Error loading ACLs, opening file "
     "'missing.acl': No such file or directory"),
])
def test_acl_errors_that_stop_a_start_as_redis(tmp_path: Path, args: tuple, line: str) -> None:
    for kind in ("redis", "pyrepl"):
        assert line in _failed_start(tmp_path, kind, *args), kind


def test_users_of_the_configuration_as_redis(tmp_path: Path) -> None:
    procs, p = _servers(tmp_path, "--user", "alice", "on", ">pw", "~k*", "&ch", "+get",
                        "+@hash", "(+set ~w*)", "--user", "default", "on", "nopass", "~*",
                        "&*", "+@all", "-flushall", "--user", "bob")
    try:
        check_rules(p, "ACL", "LIST")
        check_rules(p, "ACL", "GETUSER", "default")
        p.check("FLUSHALL")
        p.check("AUTH", "alice", "pw")
        for argv in (("GET", "k1"), ("SET", "w1", "x"), ("SET", "k1", "x"),
                     ("HSET", "k2", "f", "v"), ("ACL", "WHOAMI")):
            p.check(*argv)
    finally:
        p.close()
        for proc in procs:
            proc.stop()


def _same_acl_files(tmp_path: Path) -> None:
    ours, theirs = ((tmp_path / kind / "users.acl").read_bytes() for kind in ("pyrepl", "redis"))
    assert [_norm_rules(x) for x in ours.split(b"\n")] == \
        [_norm_rules(x) for x in theirs.split(b"\n")]


def test_aclfile_load_and_save_as_redis(tmp_path: Path) -> None:
    good = "user alice on >pw ~k* &ch +get +@hash\nuser default on nopass ~* &* +@all -flushall\n"
    procs, p = _servers(tmp_path, "--aclfile", "users.acl", files={"users.acl": good})
    q = clients(p)
    try:
        check_rules(p, "ACL", "LIST")
        q.check("AUTH", "alice", "pw")
        q.check("FLUSHALL")
        # a file with errors: the same sentences, and nothing changes
        bad = ("user alice on\n# comment\nuser  bob on +nosuch bogus ~* ~x\nuser alice off\n"
               "foo\nuser a\tb\nuser carol (~x\nuser dave on %X~k\n")
        for kind in ("pyrepl", "redis"):
            (tmp_path / kind / "users.acl").write_text(bad)
        p.check("ACL", "LOAD")
        q.check("GET", "k1")
        # a good one replaces the users: the old users' clients are disconnected
        for kind in ("pyrepl", "redis"):
            (tmp_path / kind / "users.acl").write_text("user alice on >new +@all ~*\n"
                                                       "user bob on nopass +@read ~r*\n")
        p.check("ACL", "LOAD")
        for side in (q.a, q.b):
            side.sock.settimeout(5)
            assert side.sock.recv(100) == b""
        check_rules(p, "ACL", "LIST")
        p.check("FLUSHALL")                 # no default line in the file: every permission
        p.check("ACL", "SETUSER", "carol", "on", "#" + "a" * 64, "%R~r*", "(+set ~w)")
        p.check("ACL", "SAVE")
        _same_acl_files(tmp_path)
        p.check("ACL", "LOAD")
        check_rules(p, "ACL", "LIST")
        # ACL SAVE that cannot rename over the file: Redis's error, the old file kept
        for kind in ("pyrepl", "redis"):
            (tmp_path / kind / "users.acl").unlink()
            (tmp_path / kind / "users.acl").mkdir()
        p.check("ACL", "SAVE")
        for proc in procs:
            assert "Renaming ACL file for ACL SAVE: Is a directory" in proc.log()
            assert not [f for f in Path(proc.dir).iterdir() if ".tmp-" in f.name]
    finally:
        q.close()
        p.close()
        for proc in procs:
            proc.stop()


@pytest.mark.parametrize("proto", [2, 3])
def test_sort_by_and_get_need_full_key_access(p: Pair) -> None:
    """acl-v2.tcl "Test sort with ACL permissions": SORT's BY pattern and GET read any key, so
    without read access to every key (``*``) they are refused with Redis's texts."""
    p.check("SET", "v1", "1")
    p.check("DEL", "mylist")
    p.check("LPUSH", "mylist", "1")
    q = clients(p)
    try:
        for rules in (("(+sort ~mylist)",), ("(+sort ~mylist ~v*)",), ("(+sort ~mylist %W~*)",),
                      ("(+sort ~mylist %R~*)",), ("+sort", "~mylist")):
            p.check("ACL", "SETUSER", "alice", "reset", "on", "nopass", *rules)
            q.check("AUTH", "alice", "x")
            for argv in (("SORT", "mylist", "BY", "v*"), ("SORT", "mylist", "GET", "v*"),
                         ("SORT", "mylist", "BY", "const"), ("SORT", "mylist")):
                q.check(*argv)
    finally:
        q.a.close()
        q.b.close()
