"""Key specs: COMMAND INFO's tips and key-specs elements and COMMAND GETKEYSANDFLAGS.

Theory of operation: ``pyrepl.commands.keyspecs`` holds every command's key specs as Redis's
command JSON declares them (generated data). :func:`keys_with_flags` walks them over an argv
exactly as Redis's getKeysUsingKeySpecs does (begin_search by index or keyword, find_keys by
range or keynum, an incomplete or unusable spec making the walk fail); when it fails or a spec
says its flags vary, the command's own key finder gives the positions (Redis's getkeys_proc)
and each key takes the flags of the spec whose range holds it.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.keyspecs import KEYSPECS
from pyrepl.commands.table import Command, command
from pyrepl.resp.types import Map, ReplyError, SetReply, Status


def info_tips(cmd: Command) -> SetReply:
    tips = KEYSPECS.get(cmd.name, ((), ()))[0]
    return SetReply([t.encode() for t in tips])


def info_key_specs(cmd: Command) -> SetReply:
    """addReplyCommandKeySpecs."""
    out = []
    for flags, notes, begin, find in KEYSPECS.get(cmd.name, ((), ()))[1]:
        items: list[tuple[object, object]] = []
        if notes:
            items.append((b"notes", notes.encode()))
        items.append((b"flags", SetReply([Status(f) for f in flags])))
        if begin[0] == "index":
            bs = Map([(b"type", b"index"), (b"spec", Map([(b"index", begin[1])]))])
        elif begin[0] == "keyword":
            bs = Map([(b"type", b"keyword"), (b"spec", Map([(b"keyword", begin[1].encode()),
                                                            (b"startfrom", begin[2])]))])
        else:
            bs = Map([(b"type", b"unknown"), (b"spec", Map([]))])
        items.append((b"begin_search", bs))
        if find[0] == "range":
            fk = Map([(b"type", b"range"), (b"spec", Map([
                (b"lastkey", find[1]), (b"keystep", find[2]), (b"limit", find[3])]))])
        elif find[0] == "keynum":
            fk = Map([(b"type", b"keynum"), (b"spec", Map([
                (b"keynumidx", find[1]), (b"firstkey", find[2]), (b"keystep", find[3])]))])
        else:
            fk = Map([(b"type", b"unknown"), (b"spec", Map([]))])
        items.append((b"find_keys", fk))
        out.append(Map(items))
    return SetReply(out)


def _walk(specs: tuple, argv: list[bytes]) -> list[tuple[int, tuple]] | None:
    """getKeysUsingKeySpecs: (position, flags) of every key, or None when a spec fails."""
    argc = len(argv)
    found: list[tuple[int, tuple]] = []
    for flags, _notes, begin, find in specs:
        if "not_key" in flags:
            continue
        if begin[0] == "index":
            first = begin[1]
        elif begin[0] == "keyword":
            kw, startfrom = begin[1].lower().encode(), begin[2]
            start = startfrom if startfrom > 0 else argc + startfrom
            stop, step_i = (argc - 1, 1) if startfrom > 0 else (1, -1)
            first = 0
            i = start
            while (i <= stop if step_i > 0 else i >= stop):
                if i >= argc or i < 1:
                    break
                if argv[i].lower() == kw:
                    first = i + 1
                    break
                i += step_i
            if not first:
                continue
        else:
            return None
        if find[0] == "range":
            lastkey, step, limit = find[1], find[2], find[3]
            if lastkey >= 0:
                last = first + lastkey
            elif limit <= 1:
                last = argc + lastkey
            else:
                last = first + ((argc - first) // limit + lastkey)
        elif find[0] == "keynum":
            idx = first + find[1]
            if idx >= argc:
                return None
            try:
                numkeys = int(argv[idx])
            except ValueError:
                return None
            if numkeys < 0:
                return None
            step = find[3]
            first = idx + find[2]
            last = first + (numkeys - 1) * step
            if numkeys == 0:
                continue
        else:
            return None
        if last >= argc or last < first or first >= argc:
            return None
        found += [(i, flags) for i in range(first, last + 1, step)]
        if "incomplete" in flags:
            return None
    return found


def _set_keys(argv: list[bytes]) -> list[tuple[int, tuple]]:
    """setGetKeys: with GET the key is read too."""
    if any(a.lower() == b"get" for a in argv[3:]):
        return [(1, ("RW", "access", "update"))]
    return [(1, ("OW", "update"))]


def _bitfield_keys(argv: list[bytes]) -> list[tuple[int, tuple]]:
    """bitfieldGetKeys: read-only when only GET (and OVERFLOW) subcommands come."""
    i, readonly = 2, True
    while i < len(argv):
        rem = len(argv) - i - 1
        op = argv[i].lower()
        if op == b"get" and rem >= 2:
            i += 3
        elif op in (b"set", b"incrby") and rem >= 3:
            readonly = False
            break
        elif op == b"overflow" and rem >= 1:
            i += 2
        else:
            readonly = False
            break
    return [(1, ("RO", "access") if readonly else ("RW", "access", "update"))]


def sort_keys(argv: list[bytes]) -> list[tuple[int, tuple]]:
    """sortGetKeys: the sorted key, and the last STORE's destination (as SORT takes it)."""
    keys: list[tuple[int, tuple]] = [(1, ("RO", "access"))]
    store = None
    skip = {b"limit": 2, b"get": 1, b"by": 1}
    i = 2
    while i < len(argv):
        a = argv[i].lower()
        if a in skip:
            i += skip[a]
        elif a == b"store" and i + 1 < len(argv):
            store = i + 1
        i += 1
    if store is not None:
        keys.append((store, ("OW", "update")))
    return keys


# Redis's getkeys procs that give the keys' flags themselves (their specs' flags vary).
_NATIVE = {"set": _set_keys, "bitfield": _bitfield_keys, "sort": sort_keys,
           "sort_ro": lambda argv: [(1, ("RO", "access"))]}


def keys_with_flags(cmd: Command, argv: list[bytes]) -> list[tuple[int, tuple]]:
    """getKeysFromCommandWithSpecs: the specs first, the command's own key finder after."""
    native = _NATIVE.get(cmd.name)
    if native is not None:
        return native(argv)
    specs = KEYSPECS.get(cmd.name, ((), ()))[1]
    varflags = any("variable_flags" in s[0] for s in specs)
    if specs and not varflags:
        got = _walk(specs, argv)
        if got is not None:
            return got
    spec_flags = specs[0][0] if specs else ()
    return [(i, spec_flags) for i in cmd.key_positions(argv)]


@command("command|getkeysandflags", -4, "loading stale", group="server", since="7.0.0",
         acl="connection", summary="Extract keys and access flags given a full Redis command")
def command_getkeysandflags(c: Any, argv: list[bytes]) -> object:
    """COMMAND GETKEYSANDFLAGS command [arg ...]: the errors of COMMAND GETKEYS."""
    args = argv[2:]
    cmd = c.core.lookup_command(args)
    if cmd is None or cmd.handler is None:
        raise ReplyError("ERR Invalid command specified")
    if not KEYSPECS.get(cmd.name, ((), ()))[1] and cmd.first_key == 0 and cmd.keys_fn is None:
        raise ReplyError("ERR The command has no key arguments")
    if (cmd.arity > 0 and cmd.arity != len(args)) or len(args) < -cmd.arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    keys = keys_with_flags(cmd, args)
    if not keys:
        if "no-mandatory-keys" in cmd.flags:
            return []
        raise ReplyError("ERR Invalid arguments specified for command")
    return [[args[i], SetReply([Status(f) for f in flags])] for i, flags in keys]
