"""The ACL container: SETUSER GETUSER DELUSER LIST USERS WHOAMI CAT GENPASS DRYRUN LOG HELP
LOAD SAVE (Redis 7.0's aclCommand).

Theory of operation: the users, rules and checks are pyrepl.core.acl's (sans-io); the handlers
here parse arguments and shape the replies as Redis does. The registry is made on the first
ACL command (``acl_of``) or at startup for configured users, so a server that never uses ACL
never checks a permission. LOAD and SAVE use pyrepl.core.acl_file (imported when they run: it
imports this package).
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command, container
from pyrepl.commands.util import help_reply, parse_int

# pyrepl.core.acl as a module: it imports the commands package, which imports this module while
# pyrepl.core.acl may still be half-initialized (a test that imports pyrepl.core.acl first).
from pyrepl.core import acl as _acl
from pyrepl.errors import wrong_args
from pyrepl.resp.types import OK, Map, ReplyError, SetReply

GENPASS_MAX_BITS = 4096

container("acl", summary="A container for Access List Control commands ", since="6.0.0")

_FLAGS = "admin noscript loading stale sentinel"


def _selector_fields(s: _acl.Selector) -> list[tuple[bytes, object]]:
    """aclAddReplySelectorDescription."""
    return [(b"commands", s.describe_commands().encode("latin-1")),
            (b"keys", s.describe_keys().encode("latin-1")),
            (b"channels", s.describe_channels().encode("latin-1"))]


@command("acl|setuser", -3, _FLAGS, group="server", since="6.0.0",
         summary="Modify or create the rules for a specific ACL user")
def acl_setuser(c: Any, argv: list[bytes]) -> object:
    name = argv[2]
    if _acl.has_spaces(name):
        raise ReplyError("ERR Usernames can't contain spaces or null characters")
    error = _acl.acl_of(c.core).setuser(name.decode("latin-1"), argv[3:])
    if error is not None:
        raise ReplyError("ERR " + error)
    return OK


@command("acl|deluser", -3, _FLAGS, group="server", since="6.0.0",
         summary="Remove the specified ACL users and the associated rules")
def acl_deluser(c: Any, argv: list[bytes]) -> object:
    if b"default" in argv[2:]:
        raise ReplyError("ERR The 'default' user cannot be removed")
    return _acl.acl_of(c.core).deluser([n.decode("latin-1") for n in argv[2:]], c)


@command("acl|getuser", 3, _FLAGS, group="server", since="6.0.0",
         summary="Get the rules for a specific ACL user")
def acl_getuser(c: Any, argv: list[bytes]) -> object:
    acl = _acl.acl_of(c.core)
    acl.sync_default()
    u = acl.users.get(argv[2].decode("latin-1"))
    if u is None:
        return None
    fields: list[tuple[bytes, object]] = [
        (b"flags", SetReply([f.encode() for f in _acl.USER_FLAGS if f in u.flags])),
        (b"passwords", [p.encode() for p in u.passwords]),
    ]
    fields.extend(_selector_fields(u.root))
    fields.append((b"selectors", [Map(_selector_fields(s)) for s in u.selectors[1:]]))
    return Map(fields)


@command("acl|list", 2, _FLAGS, group="server", since="6.0.0",
         summary="List the current ACL rules in ACL config file format")
def acl_list(c: Any, argv: list[bytes]) -> object:
    from pyrepl.core.acl_file import user_lines

    return [line.encode("latin-1") for line in user_lines(_acl.acl_of(c.core))]


@command("acl|users", 2, _FLAGS, group="server", since="6.0.0",
         summary="List the username of all the configured ACL rules")
def acl_users(c: Any, argv: list[bytes]) -> object:
    return [u.name.encode("latin-1") for u in _acl.acl_of(c.core).sorted_users()]


@command("acl|whoami", 2, "noscript loading stale sentinel", group="server", since="6.0.0",
         summary="Return the name of the user associated to the current connection")
def acl_whoami(c: Any, argv: list[bytes]) -> object:
    return c.user.encode("latin-1")


@command("acl|cat", -2, "noscript loading stale sentinel", group="server", since="6.0.0",
         summary="List the ACL categories or the commands inside a category")
def acl_cat(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 2:
        return [x.encode() for x in _acl.ACL_CATEGORIES]
    if len(argv) > 3:
        raise _syntax(argv)
    cat = argv[2].decode("latin-1").lower()
    if cat not in _acl.ACL_CATEGORIES:
        raise ReplyError(f"ERR Unknown category '{argv[2][:128].decode('latin-1')}'")
    return [cmd.name.encode() for cmd in _acl.all_commands() if cat in cmd.acl_categories]


@command("acl|genpass", -2, "noscript loading stale sentinel", group="server", since="6.0.0",
         summary="Generate a pseudorandom secure password to use for ACL users")
def acl_genpass(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3:
        raise _syntax(argv)
    bits = 256 if len(argv) == 2 else parse_int(argv[2])
    if bits <= 0 or bits > GENPASS_MAX_BITS:
        raise ReplyError("ERR ACL GENPASS argument must be the number of bits for the output "
                         f"password, a positive number up to {GENPASS_MAX_BITS}")
    return _acl.genpass(bits).encode()


@command("acl|log", -2, _FLAGS, group="server", since="6.0.0",
         summary="List latest events denied because of ACLs in place")
def acl_log(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3:
        raise _syntax(argv)
    acl = _acl.acl_of(c.core)
    count = 10
    if len(argv) == 3:
        if argv[2].lower() == b"reset":
            acl.log.clear()
            return OK
        count = max(0, parse_int(argv[2]))
    now = c.core.now_ms
    return [Map([
        (b"count", e.count),
        (b"reason", _acl.REASONS[e.reason].encode()),
        (b"context", e.context.encode()),
        (b"object", e.object),
        (b"username", e.username.encode("latin-1")),
        (b"age-seconds", (now - e.ctime) / 1000),
        (b"client-info", e.cinfo.encode("latin-1")),
    ]) for e in acl.log[:count]]


@command("acl|dryrun", -4, _FLAGS, group="server", since="7.0.0",
         summary="Returns whether the user can execute the given command without executing "
                 "the command.")
def acl_dryrun(c: Any, argv: list[bytes]) -> object:
    acl = _acl.acl_of(c.core)
    u = acl.users.get(argv[2].decode("latin-1"))
    if u is None:
        raise ReplyError(f"ERR User '{argv[2].decode('latin-1')}' not found")
    args = argv[3:]
    cmd = c.core.lookup_command(args)
    if cmd is None:
        raise ReplyError(f"ERR Command '{argv[3].decode('latin-1')}' not found")
    n = len(args)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        raise wrong_args(cmd.name)
    reason, pos = u.check(cmd, args)
    if not reason:
        return OK
    if reason == _acl.DENIED_CMD:
        return f"This user has no permissions to run the '{cmd.name}' command".encode()
    what = "key" if reason == _acl.DENIED_KEY else "channel"
    return b"This user has no permissions to access the '" + args[pos] + \
        f"' {what}".encode()


def _syntax(argv: list[bytes]) -> ReplyError:
    return ReplyError("ERR unknown subcommand or wrong number of arguments for "
                      f"'{argv[1][:128].decode('utf-8', 'replace')}'. Try ACL HELP.")


_NO_ACLFILE = ("ERR This Redis instance is not configured to use an ACL file. You may want to "
               "specify users via the ACL SETUSER command and then issue a CONFIG REWRITE "
               "(assuming you have a Redis configuration file set) in order to store users in "
               "the Redis configuration.")


def _acl_with_file(c: Any) -> _acl.Acl:
    """ACL LOAD / SAVE: the registry, or Redis's refusal when no ``aclfile`` is configured."""
    if not c.core.config.aclfile:
        raise ReplyError(_NO_ACLFILE)
    return _acl.acl_of(c.core)


@command("acl|load", 2, _FLAGS, group="server", since="6.0.0",
         summary="Reload the ACLs from the configured ACL file")
def acl_load(c: Any, argv: list[bytes]) -> object:
    from pyrepl.core.acl_file import load_file

    errors = load_file(_acl_with_file(c), me=c)
    if errors is not None:
        raise ReplyError("ERR " + errors)
    return OK


@command("acl|save", 2, _FLAGS, group="server", since="6.0.0",
         summary="Save the current ACL rules in the configured ACL file")
def acl_save(c: Any, argv: list[bytes]) -> object:
    from pyrepl.core.acl_file import save_file

    if not save_file(_acl_with_file(c)):
        raise ReplyError("ERR There was an error trying to save the ACLs. Please check the "
                         "server logs for more information")
    return OK


_HELP = (
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
)


@command("acl|help", 2, "loading stale sentinel", group="server", since="6.0.0",
         summary="Show helpful text about the different subcommands")
def acl_help(c: Any, argv: list[bytes]) -> object:
    return help_reply("ACL", _HELP)
