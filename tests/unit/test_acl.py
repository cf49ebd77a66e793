"""Sans-io tests of ACL (pyrepl.core.acl and the ACL container): rules, descriptions, the
dispatcher's permission check, authentication, the ACL log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pyrepl.config import Config, ConfigError
from pyrepl.config_rewrite import SIGNATURE, rewrite_text
from pyrepl.core.acl import (
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    AclError,
    User,
    hash_password,
    lookup,
    merge_selector_args,
)
from pyrepl.core.acl_file import AclStartupError, check_config_users, load_at_startup
from pyrepl.core.client import Client
from pyrepl.core.server import ServerCore
from tests.support.cores import make_core, run

NOPERM_CMD = b"-NOPERM this user has no permissions to run the '%s' command\r\n"
NOPERM_KEY = b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
NOPERM_CHANNEL = (b"-NOPERM this user has no permissions to access one of the channels used as "
                  b"arguments\r\n")


def user(*rules: str) -> User:
    u = User("u")
    for r in rules:
        u.apply(r.encode())
    return u


def check(u: User, *argv: str) -> tuple[int, int]:
    args = [a.encode() for a in argv]
    cmd = lookup(argv[0]) if len(argv) < 2 or not lookup(argv[0]).subcommands else \
        lookup(f"{argv[0]}|{argv[1]}")
    assert cmd is not None
    return u.check(cmd, args)


@pytest.fixture
def core() -> ServerCore:
    return make_core()


def log_of(core: ServerCore) -> list[tuple]:
    return [(e.reason, e.context, e.object, e.username) for e in core.acl.log]


def admin_and_user(core: ServerCore, *rules: str) -> tuple[Client, Client]:
    """A connection that made the user "u" (on, nopass, ``rules``), and one logged in as it."""
    admin = core.connection_made()
    run(admin, "ACL", "SETUSER", "u", "on", "nopass", *rules)
    c = core.connection_made()
    run(c, "AUTH", "u", "x")
    return admin, c


def test_new_user_and_default_descriptions() -> None:
    assert User("x").describe() == "off resetchannels -@all"
    u = user("on", "nopass", "~*", "&*", "+@all")
    assert u.describe() == "on nopass ~* &* +@all"
    u.apply(b"reset")
    assert u.describe() == "off sanitize-payload resetchannels -@all"


def test_command_rules_are_described_back_as_redis_does() -> None:
    assert user("+@all", "-@dangerous").root.describe_commands() == "+@all -@dangerous"
    assert user("+get", "+set").root.describe_commands() == "-@all +set +get"
    assert user("+@all", "-get").root.describe_commands() == "+@all -get"
    # -get then +get: every command again, but not the "future commands" bit of +@all
    assert user("-@all", "+@all", "-get", "+get").root.describe_commands() == "+@all"
    assert user("+config|get").root.describe_commands() == "-@all +config|get"
    assert user("+select|0", "+select|1").root.describe_commands() == \
        "-@all +select|0 +select|1"
    assert user("+select|0", "+select").root.describe_commands() == "-@all +select"


def test_key_and_channel_patterns() -> None:
    u = user("~a*", "%R~r*", "%W~w*", "%RW~rw", "~a*", "&c*", "&c*")
    assert u.root.describe_keys() == "~a* %R~r* %W~w* ~rw"
    assert u.root.describe_channels() == "&c*"
    u.apply(b"%R~w*")                       # the same pattern: its permissions merge
    assert u.root.describe_keys() == "~a* %R~r* ~w* ~rw"
    u.apply(b"allkeys")
    assert u.root.describe_keys() == "~*"
    with pytest.raises(AclError, match="'allkeys'"):
        u.apply(b"~more")
    u.apply(b"resetkeys")
    assert u.root.describe_keys() == ""


@pytest.mark.parametrize("rule,text", [
    ("+nosuch", "Unknown command or category name in ACL"),
    ("-@nosuch", "Unknown command or category name in ACL"),
    ("bogus", "Syntax error"),
    ("%~x", "Syntax error"),
    ("%RR~x", "Syntax error"),
    ("<notset", "The password you are trying to remove from the user does not exist"),
    ("#ABC", "The password hash must be exactly 64 characters"),
    ("+config|get|x", "Allowing first-arg of a subcommand is not supported"),
    ("+get|", "Syntax error"),
    ("+config|nosuch", "Unknown command or category name in ACL"),
])
def test_bad_rules(rule: str, text: str) -> None:
    with pytest.raises(AclError, match=text.replace("|", r"\|")):
        user(rule)


def test_passwords_hashes_and_nopass() -> None:
    u = user(">a", ">b", ">a")
    assert u.passwords == [hash_password(b"a"), hash_password(b"b")]
    u.apply(b"<a")
    u.apply(b"!" + hash_password(b"b").encode())
    assert u.passwords == []
    u.apply(b"#" + hash_password(b"c").encode())
    u.apply(b"nopass")
    assert u.passwords == [] and "nopass" in u.flags
    u.apply(b">d")
    assert "nopass" not in u.flags


def test_selector_argument_merging() -> None:
    assert merge_selector_args([b"on", b"(~x", b"+get)", b"(+set)"]) == \
        [b"on", b"(~x +get)", b"(+set)"]
    assert merge_selector_args([b"on", b"(~x", b"+get"]) == 1


def test_checks_commands_keys_channels() -> None:
    u = user("~foo*", "%R~ro*", "%W~wo*", "&news.*", "+get", "+set", "+copy", "+publish",
             "+psubscribe", "+subscribe", "+config|get", "+select|0")
    assert check(u, "get", "foo1") == (0, 0)
    assert check(u, "get", "bar") == (DENIED_KEY, 1)
    assert check(u, "get", "ro1") == (0, 0)
    assert check(u, "set", "ro1", "v") == (DENIED_KEY, 1)
    assert check(u, "set", "wo1", "v") == (0, 0)
    assert check(u, "get", "wo1") == (DENIED_KEY, 1)
    assert check(u, "copy", "ro1", "wo1") == (0, 0)      # source read, destination written
    assert check(u, "copy", "wo1", "ro1") == (DENIED_KEY, 1)
    assert check(u, "del", "foo") == (DENIED_CMD, 0)
    assert check(u, "publish", "news.x", "m") == (0, 0)
    assert check(u, "publish", "sport", "m") == (DENIED_CHANNEL, 1)
    assert check(u, "subscribe", "news.a", "news.b", "other") == (DENIED_CHANNEL, 3)
    assert check(u, "psubscribe", "news.*") == (0, 0)       # a pattern matches literally
    assert check(u, "psubscribe", "news.a*") == (DENIED_CHANNEL, 1)
    assert check(u, "config", "get", "x") == (0, 0)
    assert check(u, "config", "set", "x", "y") == (DENIED_CMD, 0)
    assert check(u, "select", "0") == (0, 0)
    assert check(u, "select", "1") == (DENIED_CMD, 0)
    assert check(u, "auth", "x") == (0, 0)                 # no-auth commands always run


def test_selectors_any_allows_and_the_most_relevant_denial() -> None:
    u = user("~a", "+get", "(~b +set)")
    assert check(u, "get", "a") == (0, 0)
    assert check(u, "set", "b", "1") == (0, 0)
    assert check(u, "get", "b") == (DENIED_KEY, 1)
    assert check(u, "set", "a", "1") == (DENIED_KEY, 1)
    assert check(u, "del", "a") == (DENIED_CMD, 0)
    assert u.describe() == "off ~a resetchannels -@all +get (~b resetchannels -@all +set)"


def test_dispatcher_refuses_with_redis_texts_and_logs(core: ServerCore) -> None:
    admin = core.connection_made()
    assert run(admin, "ACL", "SETUSER", "alice", "on", ">pw", "~k*", "&ch", "+get", "+publish",
               "+multi", "+exec") == b"+OK\r\n"
    c = core.connection_made()
    assert not c.restricted
    assert run(c, "AUTH", "alice", "pw") == b"+OK\r\n"
    assert c.restricted and c.user == "alice"
    assert run(c, "GET", "k1") == b"$-1\r\n"
    assert run(c, "GET", "x") == NOPERM_KEY
    assert run(c, "SET", "k1", "v") == NOPERM_CMD % b"set"
    assert run(c, "CONFIG", "GET", "x") == NOPERM_CMD % b"config|get"
    assert run(c, "PUBLISH", "no", "m") == NOPERM_CHANNEL
    assert run(c, "PUBLISH", "ch", "m") == b":0\r\n"
    assert run(c, "MULTI") == b"+OK\r\n"
    assert run(c, "GET", "x") == NOPERM_KEY
    assert run(c, "EXEC").startswith(b"-EXECABORT")
    assert log_of(core) == [
        (DENIED_KEY, "multi", b"x", "alice"),
        (DENIED_CHANNEL, "toplevel", b"no", "alice"),
        (DENIED_CMD, "toplevel", b"config|get", "alice"),
        (DENIED_CMD, "toplevel", b"set", "alice"),
        (DENIED_KEY, "toplevel", b"x", "alice")]
    assert "cmd=config|get user=alice" in core.acl.log[2].cinfo
    assert core.stats.total_error_replies >= 5
    assert run(c, "RESET") == b"+RESET\r\n"             # back to the default user
    assert not c.restricted and c.user == "default"
    assert run(c, "SET", "k1", "v") == b"+OK\r\n"


def test_acl_log_groups_equal_entries_and_is_capped(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "ACL", "SETUSER", "u", "on", "nopass")
    run(c, "AUTH", "u", "x")
    run(c, "GET", "a")
    core.now_ms += 1000
    run(c, "GET", "a")
    e = core.acl.log[0]
    assert (e.count, e.ctime) == (2, core.now_ms)
    core.now_ms += 61_000                                  # too old to group with
    run(c, "GET", "a")
    assert [x.count for x in core.acl.log] == [1, 2]
    reply = run(c, "AUTH", "default", "")   # the default user: nopass, anything goes
    assert reply == b"+OK\r\n"
    assert run(c, "ACL", "LOG", "1").startswith(b"*1\r\n*14\r\n$5\r\ncount\r\n:1\r\n")
    assert run(c, "ACL", "LOG", "RESET") == b"+OK\r\n"
    assert run(c, "ACL", "LOG") == b"*0\r\n"
    assert run(c, "CONFIG", "SET", "acllog-max-len", "2") == b"+OK\r\n"
    for name in ("a", "b", "c"):
        run(c, "AUTH", name, "x")
    assert [e.username for e in core.acl.log] == ["c", "b"]


def test_auth_failures_are_logged_with_the_command_name(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "ACL", "SETUSER", "bob", "on", ">pw", "+acl|whoami")
    assert run(c, "HELLO", "3", "AUTH", "bob", "no") == \
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    assert run(c, "auth", "bob", "no").startswith(b"-WRONGPASS")
    assert [(e.object, e.username) for e in core.acl.log] == [(b"auth", "bob"),
                                                              (b"HELLO", "bob")]
    run(c, "ACL", "SETUSER", "bob", "off")
    assert run(c, "AUTH", "bob", "pw").startswith(b"-WRONGPASS")   # disabled
    run(c, "ACL", "SETUSER", "bob", "on")
    assert run(c, "HELLO", "2", "AUTH", "bob", "pw").startswith(b"*14\r\n")
    assert run(c, "ACL", "WHOAMI") == b"$3\r\nbob\r\n"


def test_restricting_the_default_user_reaches_its_connected_clients(core: ServerCore) -> None:
    c = core.connection_made()
    d = core.connection_made()
    assert run(c, "ACL", "SETUSER", "default", "-set") == b"+OK\r\n"
    assert c.restricted and d.restricted
    assert run(d, "SET", "a", "1") == NOPERM_CMD % b"set"
    assert core.connection_made().restricted
    assert run(c, "ACL", "SETUSER", "default", "+set") == b"+OK\r\n"
    assert not d.restricted and run(d, "SET", "a", "1") == b"+OK\r\n"


def test_default_user_password_requirepass_and_new_connections(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "AUTH", "x").startswith(b"-ERR AUTH <password> called without any password")
    run(c, "ACL", "SETUSER", "default", ">s3")
    n = core.connection_made()
    assert run(n, "PING") == b"-NOAUTH Authentication required.\r\n"
    assert run(n, "AUTH", "s3") == b"+OK\r\n"
    assert run(c, "CONFIG", "SET", "requirepass", "other") == b"+OK\r\n"
    assert run(c, "ACL", "GETUSER", "default").count(hash_password(b"other").encode()) == 1
    m = core.connection_made()
    assert run(m, "AUTH", "s3").startswith(b"-WRONGPASS")
    assert run(m, "AUTH", "other") == b"+OK\r\n"
    assert run(m, "RESET") == b"+RESET\r\n"
    assert run(m, "PING") == b"-NOAUTH Authentication required.\r\n"


def test_deluser_disconnects_its_clients_and_client_kill_user(core: ServerCore) -> None:
    admin = core.connection_made()
    run(admin, "ACL", "SETUSER", "u", "on", "nopass", "+@all", "~*")
    run(admin, "ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*", "&*")
    a, b = core.connection_made(), core.connection_made()
    run(a, "AUTH", "u", "x")
    run(b, "AUTH", "v", "x")
    assert run(admin, "CLIENT", "KILL", "USER", "nosuch") == b"-ERR No such user 'nosuch'\r\n"
    assert run(admin, "CLIENT", "KILL", "USER", "v") == b":1\r\n"
    assert run(a, "ACL", "DELUSER", "u", "nosuch") == b":1\r\n"
    assert a.close_after_reply
    assert run(admin, "ACL", "DELUSER", "default") == \
        b"-ERR The 'default' user cannot be removed\r\n"
    assert run(admin, "ACL", "USERS") == b"*2\r\n$7\r\ndefault\r\n$1\r\nv\r\n"


def test_container_replies(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "ACL", "GETUSER", "nobody") == b"$-1\r\n"
    assert run(c, "ACL", "SETUSER", "a b") == \
        b"-ERR Usernames can't contain spaces or null characters\r\n"
    assert run(c, "ACL", "SETUSER", "u", "(~x", "+get") == \
        b"-ERR Unmatched parenthesis in acl selector starting at '(~x'.\r\n"
    assert run(c, "ACL", "SETUSER", "u", "on", "+nosuch") == \
        b"-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in " \
        b"ACL\r\n"
    assert run(c, "ACL", "USERS") == b"*1\r\n$7\r\ndefault\r\n"   # nothing applied
    assert len(run(c, "ACL", "GENPASS")) == len(b"$64\r\n\r\n") + 64
    assert run(c, "ACL", "GENPASS", "5").startswith(b"$2\r\n")
    assert run(c, "ACL", "GENPASS", "0").startswith(b"-ERR ACL GENPASS argument")
    assert run(c, "ACL", "CAT", "nosuch") == b"-ERR Unknown category 'nosuch'\r\n"
    assert b"$9\r\nsubscribe\r\n" in run(c, "ACL", "CAT", "PubSub")
    run(c, "ACL", "SETUSER", "u", "~k", "+get")
    assert run(c, "ACL", "DRYRUN", "u", "get", "k") == b"+OK\r\n"
    assert run(c, "ACL", "DRYRUN", "u", "get", "z") == \
        b"$50\r\nThis user has no permissions to access the 'z' key\r\n"
    assert run(c, "ACL", "DRYRUN", "u", "set", "k", "v") == \
        b"$53\r\nThis user has no permissions to run the 'set' command\r\n"
    assert run(c, "ACL", "DRYRUN", "u", "get") == \
        b"-ERR wrong number of arguments for 'get' command\r\n"
    assert run(c, "ACL", "DRYRUN", "x", "get", "k") == b"-ERR User 'x' not found\r\n"
    assert run(c, "ACL", "DRYRUN", "u", "nosuch", "k") == b"-ERR Command 'nosuch' not found\r\n"
    lines = (b"user default on nopass ~* &* +@all", b"user u off ~k resetchannels -@all +get")
    assert run(c, "ACL", "LIST") == b"*2\r\n" + b"".join(
        b"$%d\r\n%s\r\n" % (len(x), x) for x in lines)
    assert run(c, "ACL", "HELP").startswith(
        b"*29\r\n+ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n")


def test_our_masters_link_is_never_checked(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "ACL", "SETUSER", "default", "-@all")
    assert c.restricted
    assert run(c, "SET", "a", "1") == NOPERM_CMD % b"set"
    c.kind = "master"
    assert run(c, "SET", "a", "1") == b"+OK\r\n"


def test_losing_channels_disconnects_the_users_subscribers(core: ServerCore) -> None:
    admin = core.connection_made()
    run(admin, "ACL", "SETUSER", "u", "on", "nopass", "&news.*", "&x", "+@all")
    subs = [core.connection_made() for _ in range(3)]
    for c, argv in zip(subs, (("SUBSCRIBE", "news.a"), ("PSUBSCRIBE", "news.*"),
                              ("SUBSCRIBE", "x")), strict=True):
        assert run(c, "AUTH", "u", "p") == b"+OK\r\n"
        assert run(c, *argv).startswith(b"*3\r\n")
    run(admin, "ACL", "SETUSER", "u", "&more")            # nothing lost: nobody goes
    assert not any(c.close_after_reply for c in subs)
    run(admin, "ACL", "SETUSER", "u", "resetchannels", "&news.*", "&more")
    assert [c.close_after_reply for c in subs] == [False, False, True]
    run(admin, "ACL", "SETUSER", "u", "resetchannels", "&news.a")
    assert [c.close_after_reply for c in subs] == [False, True, True]


# -- scripts, EXEC, the configuration's users, the ACL file (issue 14) ------------------------

def test_script_calls_are_checked_against_the_callers_user(core: ServerCore) -> None:
    admin, c = admin_and_user(core, "~k*", "&ch", "+eval", "+get", "+fcall", "+incr", "+publish")
    sha = "0502f398c8d71a359e359b6bef3e5b6fbc799b8f"     # return redis.call('set','k1','v')
    assert run(c, "EVAL", "return redis.call('set','k1','v')", "0") == (
        b"-ERR The user executing the script can't run this command or subcommand script: "
        b"%s, on @user_script:1.\r\n" % sha.encode())
    assert run(c, "EVAL", "return redis.pcall('set','k1','v')", "0") == \
        b"-ERR The user executing the script can't run this command or subcommand\r\n"
    assert run(c, "EVAL", "return redis.call('incr','x')", "0").startswith(
        b"-ERR The user executing the script can't access at least one of the keys mentioned "
        b"in the command arguments script: ")
    assert run(c, "EVAL", "return redis.call('publish','x','m')", "0").startswith(
        b"-ERR The user executing the script can't publish to the channel mentioned in the "
        b"command script: ")
    assert run(c, "EVAL", "return redis.call('incr','k1')", "0") == b":1\r\n"
    assert [run(c, "EVAL", f"return redis.acl_check_cmd({args})", "0") for args in (
        "'get','x'", "'get','k'", "'get'", "'set','k','v'")] == [
        b"$-1\r\n", b":1\r\n", b":1\r\n", b"$-1\r\n"]
    assert log_of(core) == [(DENIED_CHANNEL, "lua", b"x", "u"), (DENIED_KEY, "lua", b"x", "u"),
                            (DENIED_CMD, "lua", b"set", "u")]
    assert core.acl.log[2].count == 2
    assert "cmd=eval user=u" in core.acl.log[0].cinfo       # the caller, not the script client
    assert core.errorstats["ERR"] == 4
    stats = {cmd.name: (st.rejected, st.failed) for cmd, st in core.cmdstats.items()}
    assert stats["set"] == (2, 0) and stats["incr"] == (1, 0) and stats["eval"] == (0, 4)
    # a function runs as its caller's user too; the default user's scripts are never checked
    lib = ("#!lua name=l\n"
           "redis.register_function('f', function() return redis.call('set','a','1') end)")
    assert run(admin, "FUNCTION", "LOAD", lib) == b"$1\r\nl\r\n"
    assert run(c, "FCALL", "f", "0").startswith(
        b"-ERR The user executing the script can't run this command or subcommand script: f, ")
    assert run(admin, "FCALL", "f", "0") == b"+OK\r\n"
    assert run(admin, "EVAL", "return redis.acl_check_cmd('set','x','y')", "0") == b":1\r\n"


def test_exec_checks_the_queued_commands_again(core: ServerCore) -> None:
    admin, c = admin_and_user(core, "~k*", "&ch", "+multi", "+exec", "+incr", "+get", "+publish")
    for argv in (("MULTI",), ("INCR", "k1"), ("GET", "k2"), ("PUBLISH", "ch", "m"),
                 ("GET", "k1")):
        assert run(c, *argv) == (b"+OK\r\n" if argv[0] == "MULTI" else b"+QUEUED\r\n")
    run(admin, "ACL", "SETUSER", "u", "-incr", "resetkeys", "~k1", "resetchannels")
    why = b"-NOPERM ACLs rules changed between the moment the transaction was accumulated and " \
          b"the EXEC call. This command is no longer allowed for the following reason: "
    assert run(c, "EXEC") == b"*4\r\n" + why + \
        b"no permission to execute the command or subcommand\r\n" + why + \
        b"no permission to touch the specified keys\r\n" + why + \
        b"no permission to access one of the channels used as arguments\r\n$-1\r\n"
    assert log_of(core) == [(DENIED_CHANNEL, "multi", b"ch", "u"),
                            (DENIED_KEY, "multi", b"k2", "u"),
                            (DENIED_CMD, "multi", b"incr", "u")]
    # the client info is the one Redis shows inside EXEC: flags=x, the queue, cmd=exec
    assert "flags=x" in core.acl.log[0].cinfo and " multi=4 " in core.acl.log[0].cinfo
    assert "cmd=exec user=u" in core.acl.log[0].cinfo
    assert core.errorstats["NOPERM"] == 3
    stats = {cmd.name: (st.calls, st.rejected, st.failed) for cmd, st in core.cmdstats.items()}
    assert "incr" not in stats and stats["exec"] == (1, 0, 0)   # (a refusal counts no call)
    assert stats["get"] == (1, 0, 0)            # GET k1 ran
    # a refusal after the last command that ran is EXEC's own failure, as in Redis
    run(c, "MULTI")
    run(c, "GET", "k1")
    run(admin, "ACL", "SETUSER", "u", "-get")
    assert run(c, "EXEC") == b"*1\r\n" + why + \
        b"no permission to execute the command or subcommand\r\n"
    assert core.command_stat(lookup("exec")).failed == 1
    # an unrestricted user's transaction skips the check
    run(admin, "ACL", "SETUSER", "u", "+@all", "allkeys", "allchannels")
    assert not c.restricted
    run(c, "MULTI")
    run(c, "INCR", "z")
    assert run(c, "EXEC") == b"*1\r\n:1\r\n"


def conf(tmp_path: Path, text: str) -> Config:
    """The file loaded and its users' rules checked, as the CLI does."""
    path = tmp_path / "redis.conf"
    path.write_text(text)
    cfg = Config.load(str(path), [("save", [""])])
    check_config_users(cfg)
    return cfg


@pytest.mark.parametrize(("line", "reason"), [
    # as Redis, the failing rule is named by its index into the whole line: "user" "alice" ...
    ("user alice on bogus", "Error in user declaration 'alice': Syntax error"),
    ("user alice on ~* ~x", "Error in user declaration 'on': Adding a pattern after the * "
                            "pattern (or the 'allkeys' flag) is not valid and does not have any "
                            "effect. Try 'resetkeys' to start with an empty list of patterns"),
    ("user alice on (~x +get", "Error in user declaration 'alice': Unknown command or "
                               "category name in ACL"),
    ("user alice on\nuser alice off", "Error in user declaration 'alice': Duplicate user found. "
                                      "A user can only be defined once in config files"),
])
def test_user_lines_are_checked_when_the_file_is_read(tmp_path: Path, line: str,
                                                      reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        conf(tmp_path, "port 7000\n" + line + "\n")
    assert info.value.reason == reason
    assert info.value.lineno == 1 + line.count("\n") + 1
    assert str(info.value) == f"{tmp_path / 'redis.conf'}:{info.value.lineno}: {reason}"
    if "\n" not in line:     # a server built without the CLI's check refuses it at startup
        cfg = Config.load(None, [("user", line.split()[1:])])
        with pytest.raises(AclStartupError, match="^command line: --user .*: " + re.escape(reason)):
            load_at_startup(ServerCore(cfg, now_ms=1))


def test_configured_users_are_created_at_startup(tmp_path: Path) -> None:
    cfg = conf(tmp_path, 'requirepass old\nuser alice on >pw ~k* +get +@hash\n'
                         'user default on nopass ~* +@all -flushall\nuser "bob" +nosuchcmd\n')
    assert cfg.users[0].argv == ("alice", "on", ">pw", "~k*", "+get", "+@hash")
    assert (cfg.users[2].lineno, cfg.users[2].line) == (4, 'user "bob" +nosuchcmd')
    core = ServerCore(cfg, now_ms=1)
    with pytest.raises(AclStartupError, match="Critical error while loading ACLs. Exiting."):
        load_at_startup(core)                   # unknown commands fail only now
    assert ("warning", "Error loading ACL rule '+nosuchcmd' for the user named 'bob': Unknown "
                       "command or category name in ACL") in core.log.lines
    cfg = conf(tmp_path, 'requirepass old\nuser alice on >pw ~k* +get +@hash\n'
                         'user default on nopass ~* +@all -flushall\nuser bob\n')
    core = ServerCore(cfg, now_ms=1)
    load_at_startup(core)
    assert ("notice", "The user 'bob' is disabled (there is no 'on' modifier in the user "
                      "description). Make sure this is not a configuration error.") in \
        core.log.lines
    c = core.connection_made()
    assert c.restricted and c.authenticated             # the default user was reset: nopass
    assert run(c, "FLUSHALL") == NOPERM_CMD % b"flushall"
    assert run(c, "ACL", "LIST") == b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in (
        b"user alice on #%s ~k* resetchannels -@all +@hash +get" % hash_password(b"pw").encode(),
        b"user bob off resetchannels -@all",
        b"user default on nopass sanitize-payload ~* resetchannels +@all -flushall"))
    assert run(c, "AUTH", "alice", "pw") == b"+OK\r\n"
    assert run(c, "HSET", "k1", "f", "v") == b":1\r\n"
    # users in the file and an aclfile: refused, as Redis
    (tmp_path / "users.acl").write_text("user carol on\n")
    cfg = conf(tmp_path, "user alice on\naclfile users.acl\n")
    with pytest.raises(AclStartupError, match="^Configuring Redis with users defined in "
                                              "redis.conf and at the same setting an ACL file"):
        load_at_startup(ServerCore(cfg, now_ms=1))


def test_aclfile_at_startup_acl_load_and_acl_save(tmp_path: Path) -> None:
    acl_path = tmp_path / "users.acl"
    cfg = conf(tmp_path, f"dir {tmp_path}\naclfile users.acl\n")   # (relative to dir)
    with pytest.raises(AclStartupError) as info:
        load_at_startup(ServerCore(cfg, now_ms=1))
    assert str(info.value) == ("Aborting Redis startup because of ACL errors: Error loading "
                               "ACLs, opening file 'users.acl': No such file or directory")
    acl_path.write_text("user alice on >pw ~k* +get\n\nuser bob on nopass +@all ~*\n")
    core = ServerCore(cfg, now_ms=1)
    load_at_startup(core)
    admin = core.connection_made()
    assert not admin.restricted                          # no default line: every permission
    bob, alice = core.connection_made(), core.connection_made()
    run(bob, "AUTH", "bob", "x")
    run(alice, "AUTH", "alice", "pw")
    assert run(alice, "GET", "x") == NOPERM_KEY
    # a file with errors changes nothing and says why, line by line
    bad = ("user alice on\n# comment\nuser  bob on +nosuch bogus ~* ~x\nuser alice off\nfoo\n"
           "user a\tb\nuser carol (~x\n")
    acl_path.write_text(bad)
    assert run(admin, "ACL", "LOAD") == (
        b"-ERR users.acl:2 should start with user keyword followed by the username. "
        b"users.acl:3: Syntax error. users.acl:3: Error in applying operation '+nosuch': "
        b"Unknown command or category name in ACL. WARNING: Duplicate user 'alice' found on "
        b"line 4. users.acl:5 should start with user keyword followed by the username. "
        b"'users.acl:6: username 'a\tb' contains invalid characters. users.acl:7: Unmatched "
        b"parenthesis in selector definition.WARNING: ACL errors detected, no change to the "
        b"previously active ACL rules was performed\r\n")
    assert run(alice, "ACL", "WHOAMI") == NOPERM_CMD % b"acl|whoami"
    # a good one replaces every user: their clients are disconnected, the default's stay
    acl_path.write_text("user default on nopass ~* &* +@all -flushall\n"
                        "user alice on >new +@all ~*\n")
    assert run(bob, "ACL", "LOAD") == b"+OK\r\n"
    assert bob.close_after_reply and alice.close_after_reply      # (bob after its reply)
    assert (alice.user, alice.authenticated) == ("default", False)
    assert not admin.close_after_reply
    assert admin.restricted and run(admin, "FLUSHALL") == NOPERM_CMD % b"flushall"
    assert run(admin, "ACL", "USERS") == b"*2\r\n$5\r\nalice\r\n$7\r\ndefault\r\n"
    # ACL SAVE writes ACL LIST's lines, which load back to the same users
    run(admin, "ACL", "SETUSER", "zed", "on", "#" + "a" * 64, "%R~r*", "(+set ~w)")
    listed = run(admin, "ACL", "LIST")
    assert run(admin, "ACL", "SAVE") == b"+OK\r\n"
    saved = acl_path.read_text()
    assert saved.startswith("user alice on #") and saved.endswith(
        f"user zed on #{'a' * 64} %R~r* resetchannels -@all (~w resetchannels -@all +set)\n")
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    assert run(admin, "ACL", "LOAD") == b"+OK\r\n"
    assert run(admin, "ACL", "LIST") == listed
    cfg2 = conf(tmp_path, f"dir {tmp_path / 'gone'}\naclfile users.acl\n")
    core2 = ServerCore(cfg2, now_ms=1)
    c2 = core2.connection_made()
    assert run(c2, "ACL", "SAVE") == (b"-ERR There was an error trying to save the ACLs. "
                                      b"Please check the server logs for more information\r\n")
    assert any(m.startswith("Opening temp ACL file for ACL SAVE: No such file")
               for _, m in core2.log.lines)


def test_acl_load_and_save_need_an_aclfile(core: ServerCore) -> None:
    c = core.connection_made()
    for sub in ("LOAD", "SAVE"):
        assert run(c, "ACL", sub) == (
            b"-ERR This Redis instance is not configured to use an ACL file. You may want to "
            b"specify users via the ACL SETUSER command and then issue a CONFIG REWRITE "
            b"(assuming you have a Redis configuration file set) in order to store users in the "
            b"Redis configuration.\r\n")


def test_config_rewrite_writes_the_users(tmp_path: Path) -> None:
    path = tmp_path / "redis.conf"
    path.write_text("port 7000\nuser old on\n# users\nuser older on\n")
    core = ServerCore(Config.load(str(path)), now_ms=1)
    load_at_startup(core)
    c = core.connection_made()
    run(c, "ACL", "SETUSER", "new", "on", "~a*", "+get")
    run(c, "ACL", "DELUSER", "older")
    assert run(c, "CONFIG", "REWRITE") == b"+OK\r\n"
    lines = path.read_text().splitlines()
    assert lines[:4] == ["port 7000", "user default on nopass ~* &* +@all", "# users",
                         "user new on ~a* resetchannels -@all +get"]
    assert "user old on resetchannels -@all" in lines[lines.index(SIGNATURE):]
    assert Config.load(str(path)).users[1].argv == ("new", "on", "~a*", "resetchannels",
                                                    "-@all", "+get")
    # with an aclfile the users live there: the user lines go away
    cfg = Config.load(None, [("aclfile", ["x.acl"])])
    text = rewrite_text("# c\nuser a on\n", cfg, ["user default on nopass ~* &* +@all"])
    assert 'aclfile "x.acl"' in text and "user " not in text
    assert "user a on" in rewrite_text("user a on\n", Config())      # (no users given: kept)
