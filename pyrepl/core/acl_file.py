"""ACL users kept outside the server: the ``user`` lines of the configuration, the ACL file
(``aclfile``) with ACL LOAD / ACL SAVE, and the ``user`` lines CONFIG REWRITE writes (Redis
7.0's acl.c and config.c).

Theory of operation: a ``user <name> <rules...>`` line of the configuration is kept in
``Config.users`` and its rules checked right after the file is read (:func:`check_config_users`,
ACLAppendUserForLoading: a rule that can never apply is a config error naming the line, an
unknown command fails only at startup). At startup (:func:`load_at_startup`,
ACLLoadUsersAtStartup) the server refuses to mix both ways, creates the configured users (the
``default`` line resets the default user first), or loads the ACL file. :func:`load_file` is
ACLLoadFromFile: every line is checked into a fresh set of users and all errors collected; only
a file without any error replaces the users (``Acl.replace_users``). :func:`save_file` writes
the users as ``ACL LIST`` shows them through a temporary file renamed over the old one. Names
and rules are bytes on the wire and latin-1 text in the registry, as in pyrepl.core.acl.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pyrepl.commands  # noqa: F401  (the command table first: it imports pyrepl.core.acl itself)
from pyrepl.config import Config, ConfigError, UserLine
from pyrepl.config_rewrite import discard_temp
from pyrepl.core.acl import (
    ERR_NOENT,
    AclError,
    User,
    acl_of,
    has_spaces,
    merge_selector_args,
)

MIXED_SOURCES = ("Configuring Redis with users defined in redis.conf and at the same setting an "
                 "ACL file path is invalid. This setup is very likely to lead to configuration "
                 "errors and security holes, please define either an ACL file or declare users "
                 "directly in your redis.conf, but not both.")


class AclStartupError(Exception):
    """The users cannot be loaded at startup: the server logs the text and exits with 1."""


def _raw(arg: str) -> bytes:
    """A configuration argument (read as UTF-8 with surrogate escapes) as the bytes it was."""
    return arg.encode("utf-8", "surrogateescape")


def check_user_line(argv: Sequence[str]) -> str | None:
    """ACLAppendUserForLoading's rule check for ``user <name> <rules...>`` (``argv`` without
    "user"; the config loader refuses a name given twice): the config error's reason, or None.
    As Redis, the rule is named by the index of the failing merged rule into the whole line (so
    ``user alice on bogus`` names 'alice'), and unknown commands wait for the startup."""
    line = ["user", *argv]
    merged = merge_selector_args([_raw(a) for a in argv[1:]])
    if isinstance(merged, int):     # (Redis reports the errno left over: ENOENT's text)
        return f"Error in user declaration '{line[merged]}': {ERR_NOENT}"
    fake = User("__fakeuser:0__")
    for j, op in enumerate(merged):
        try:
            fake.apply(op)
        except AclError as e:
            if str(e) != ERR_NOENT:
                return f"Error in user declaration '{line[j]}': {e}"
    return None


def check_config_users(cfg: Config) -> None:
    """The rules of every ``user`` line of ``cfg``, as the config loader reports its errors
    (raises ConfigError naming the line). Done here rather than by pyrepl.config, which must not
    import the command table: the CLI calls it right after loading, the startup again."""
    for u in cfg.users:
        reason = check_user_line(u.argv)
        if reason is not None:
            raise ConfigError(f"{u.where}: {reason}", reason=reason,
                              path=u.path or "<command line>", lineno=u.lineno, line=u.line)


def load_configured_users(acl: Any, lines: Sequence[UserLine]) -> None:
    """ACLLoadConfiguredUsers: the configuration's users, in order (raises
    AclStartupError after logging the failing rule)."""
    log = acl.core.log
    pubsub_all = acl.pubsub_all()
    for user_line in lines:
        argv = user_line.argv
        raw_name = _raw(argv[0])
        if has_spaces(raw_name):
            log.warning("Spaces not allowed in ACL usernames")
            raise AclStartupError("Critical error while loading ACLs. Exiting.")
        name = raw_name.decode("latin-1")
        u = acl.users.get(name)
        if u is None:
            u = acl.users[name] = User(name, pubsub_all)
        else:                       # (only "default" exists before)
            u.apply(b"reset", pubsub_all)
        merged = merge_selector_args([_raw(a) for a in argv[1:]])
        assert not isinstance(merged, int)      # (check_config_users refused it)
        for op in merged:
            try:
                u.apply(op, pubsub_all)
            except AclError as e:
                log.warning(f"Error loading ACL rule '{op.decode('latin-1')}' for the user "
                            f"named '{name}': {e}")
                raise AclStartupError("Critical error while loading ACLs. Exiting.") from None
        if not u.enabled():
            log.notice(f"The user '{name}' is disabled (there is no 'on' modifier in the user "
                       "description). Make sure this is not a configuration error.")
    acl.refresh(acl.default)


def load_file(acl: Any, me: Any = None) -> str | None:
    """ACLLoadFromFile: the configured ``aclfile`` (found in ``dir``, named in the errors as
    configured) replaces the users when every line is valid; otherwise nothing changes and the
    errors, one sentence each, are returned."""
    cfg = acl.core.config
    path, shown = cfg.in_dir(cfg.aclfile), cfg.aclfile
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"Error loading ACLs, opening file '{shown}': {e.strerror}"
    pubsub_all = acl.pubsub_all()
    users: dict[str, User] = {}
    errors: list[str] = []
    for linenum, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip(b" \t\r\n")
        if not line:
            continue
        argv = line.split(b" ")
        if argv[0] != b"user" or len(argv) < 2:
            errors.append(f"{shown}:{linenum} should start with user keyword followed by the "
                          "username. ")
            continue
        name = argv[1].decode("latin-1")
        if has_spaces(argv[1]):
            errors.append(f"'{shown}:{linenum}: username '{name}' contains invalid "
                          "characters. ")
            continue
        if name in users:
            errors.append(f"WARNING: Duplicate user '{name}' found on line {linenum}. ")
            continue
        u = users[name] = User(name, pubsub_all)
        merged = merge_selector_args(argv[2:])
        if isinstance(merged, int):
            errors.append(f"{shown}:{linenum}: Unmatched parenthesis in selector definition.")
            merged = []
        syntax_error = False
        for op in merged:
            op = op.strip(b"\t\r\n")
            try:
                u.apply(op, pubsub_all)
            except AclError as e:
                if str(e) == ERR_NOENT:
                    errors.append(f"{shown}:{linenum}: Error in applying operation "
                                  f"'{op.decode('latin-1')}': {e}. ")
                elif not syntax_error:
                    errors.append(f"{shown}:{linenum}: {e}. ")
                    syntax_error = True
    if errors:
        return "".join(errors) + ("WARNING: ACL errors detected, no change to the previously "
                                  "active ACL rules was performed")
    acl.replace_users(users, me)
    return None


def user_lines(acl: Any) -> list[str]:
    """The users as ACL LIST, ACL SAVE and CONFIG REWRITE write them (by name, bytewise)."""
    acl.sync_default()
    return [f"user {u.name} {u.describe()}" for u in acl.sorted_users()]


def save_file(acl: Any) -> bool:
    """ACLSaveToFile: the users written to ``<aclfile>.tmp-<pid>-<ms>`` then renamed over the
    configured ``aclfile``; False (and a log line) when that fails."""
    core = acl.core
    path = core.config.in_dir(core.config.aclfile)
    content = "".join(line + "\n" for line in user_lines(acl)).encode("latin-1")
    tmp = f"{path}.tmp-{core.pid}-{core.now_ms}"
    step = "Opening temp ACL file for ACL SAVE"
    fd = -1
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o644)
        step = "Writing ACL file for ACL SAVE"
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        fd = -1
        step = "Renaming ACL file for ACL SAVE"
        os.rename(tmp, path)
        return True
    except OSError as e:
        core.log.warning(f"{step}: {e.strerror}")
        discard_temp(fd, tmp)
        return False


def load_at_startup(core: Any) -> None:
    """ACLLoadUsersAtStartup: the configuration's ``user`` lines, or the ACL file (raises
    AclStartupError: the server must not start). Nothing to do without either."""
    cfg = core.config
    if not cfg.users and not cfg.aclfile:
        return
    try:
        check_config_users(cfg)     # (done by the CLI already: for servers built otherwise)
    except ConfigError as e:
        raise AclStartupError(str(e)) from None
    if cfg.users and cfg.aclfile:
        raise AclStartupError(MIXED_SOURCES)
    acl = acl_of(core)
    load_configured_users(acl, cfg.users)
    if cfg.aclfile:
        errors = load_file(acl)
        if errors is not None:
            raise AclStartupError(f"Aborting Redis startup because of ACL errors: {errors}")

