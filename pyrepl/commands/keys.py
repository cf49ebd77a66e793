"""Generic key commands (Redis 7.0.15 db.c / expire.c / object.c semantics).

Theory of operation: these commands work on any value type through the ``Database`` API.
Lookups follow Redis: commands that use ``lookupKeyRead`` (EXISTS, TYPE, TTL, TOUCH, COPY's
source, OBJECT) count keyspace hits/misses, writes use the plain lookup, and both expire keys
lazily (on a master that deletes the key and propagates ``DEL``). Those that Redis flags
LOOKUP_NOTOUCH (EXISTS, TYPE, the TTL family, SCAN's TYPE filter, OBJECT) leave the key's
LRU/LFU age as it was (``Database.lookup_read_notouch``); TOUCH and the rest stamp it. Expiry times are absolute
unix milliseconds in ``Database.expires``; ``core.now_ms`` is the clock.

Propagation rewrites, as Redis 7.0: EXPIRE / PEXPIRE / EXPIREAT -> ``PEXPIREAT key ms``
(keeping NX/XX/GT/LT); any expire time already in the past deletes the key and propagates
``DEL key`` (a replica instead stores the past time and waits for the master's DEL). Other
commands propagate as sent, and only when they changed something (``core.dirty``).

KEYS and SCAN MATCH use ``pyrepl.keyspace.glob`` (Redis's stringmatchlen); SCAN's cursor is
described in ``pyrepl.keyspace.scan`` (snapshot paging: every key present during the whole
iteration is returned exactly once). OBJECT ENCODING reports Redis 7.0's encoding names from
the value's current shape and the default thresholds, since pyrepl stores plain Python
containers: a string is int/embstr/raw by content (so APPEND/SETRANGE results that Redis
would call "raw" may show as embstr), a list is always quicklist in 7.0, hashes and sorted
sets are listpack up to 128 entries of at most 64 bytes, sets are intset up to 512 integers.

Keyspace events (generic class) as db.c / expire.c: ``del`` per key deleted, ``expire`` (or
``del`` for a time already past), ``persist``, RENAME's ``rename_from`` then ``rename_to``
(after ``new`` for the destination), MOVE's ``move_from`` (source db) then ``move_to`` (target
db), COPY's ``copy_to`` in the target db. Read lookups publish ``keymiss`` (``Database``), except
OBJECT's (LOOKUP_NONOTIFY).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from pyrepl import native
from pyrepl.commands.table import command, container, variants, whole_run
from pyrepl.commands.util import LLONG_MAX, help_command, is_long_long, option_token, parse_int
from pyrepl.errors import DB_INDEX_OUT_OF_RANGE, NO_SUCH_KEY, SYNTAX
from pyrepl.keyspace.ageing import idle_ms, lfu_decr_and_return
from pyrepl.keyspace.db import TYPE_NAMES, type_name
from pyrepl.keyspace.glob import compile_pattern
from pyrepl.keyspace.hashttl import HashEx, is_listpack
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.keyspace.scan import parse_cursor, parse_scan_options, scan_page
from pyrepl.keyspace.stream import Stream
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ListpackZSet, ZSet
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_KEY_MISS, keyspace_event, notify
from pyrepl.resp.types import OK, ReplyError, Status

_SAME_OBJECT = "ERR source and destination objects are the same"
_LLMAX_DIV_1000 = LLONG_MAX // 1000
_LLMIN_DIV_1000 = -(LLONG_MAX // 1000)  # C's LLONG_MIN / 1000 truncates toward zero
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_INT_RANGE = f"ERR value is out of range, value must between {_INT_MIN} and {_INT_MAX}"

TYPE_NAMES[Stream] = b"stream"      # TYPE, SCAN TYPE (db.py's table covers the other types)
_TYPE_STATUS = {name: Status(name.decode()) for name in
                (b"string", b"list", b"hash", b"set", b"zset", b"stream", b"none")}


# -- DEL / UNLINK / EXISTS / TYPE / TOUCH -------------------------------------------------------

def _delete_keys(c: Any, argv: list[bytes], lazy: bool) -> int:
    """DEL and UNLINK (delGenericCommand); ``lazy``: values freed in the background when
    that is worth it (pyrepl/core/lazyfree.py)."""
    delete = c.db.unlink if lazy else c.db.delete
    notifying = c.core.notify_mask & NOTIFY_GENERIC
    n = 0
    for key in argv[1:]:
        if delete(key):
            n += 1
            if notifying:
                notify(c, NOTIFY_GENERIC, b"del", key)
    c.core.dirty += n
    return n


@command("del", -2, "write", keys=(1, -1, 1), group="generic", summary="Delete a key",
         since="1.0.0", acl="keyspace")
def del_(c: Any, argv: list[bytes]) -> object:
    return _delete_keys(c, argv, c.core.config.lazyfree_lazy_user_del)


@command("unlink", -2, "write fast", keys=(1, -1, 1), group="generic",
         summary="Delete a key asynchronously in another thread. Otherwise it is just as DEL, "
                 "but non blocking.", since="4.0.0", acl="keyspace")
def unlink(c: Any, argv: list[bytes]) -> object:
    return _delete_keys(c, argv, True)


@command("exists", -2, "readonly fast", keys=(1, -1, 1), group="generic",
         summary="Determine if a key exists", since="1.0.0", acl="keyspace")
def exists(c: Any, argv: list[bytes]) -> object:
    return _count_existing(c.db.lookup_read_notouch, argv)


def count_keys_reference(d: Any, reqs: list[list[bytes]]) -> list[int] | None:
    """``[int(r[1] in d) for r in reqs]`` when every request is a list of exactly two (a
    one-key EXISTS), else None (``_plainrun.count_keys``)."""
    if any(len(r) != 2 for r in reqs):
        return None
    return [int(r[1] in d) for r in reqs]


_plainrun = native.load("pyrepl._plainrun")
count_keys = count_keys_reference if _plainrun is None else _plainrun.count_keys


@whole_run("exists")
def _exists_run(c: Any, reqs: list[list[bytes]]) -> list[int] | None:
    """A pipelined run of EXISTS key (Command.whole): what each would answer, when none of
    its keys has a TTL and no keymiss event is to be published; else None before anything
    changed, and the run goes one by one."""
    db = c.db
    exp = db.expires
    if exp and not exp.keys().isdisjoint(map(itemgetter(1), reqs)):
        return None
    found = count_keys(db.data, reqs)
    if found is None:
        return None     # EXISTS of several keys among them
    hits = found.count(1)
    core = c.core
    if hits < len(found) and core.notify_mask & NOTIFY_KEY_MISS:
        return None
    core.stats.keyspace_hits += hits
    core.stats.keyspace_misses += len(found) - hits
    return found


def _count_existing(lookup: Callable[[bytes], Any], argv: list[bytes]) -> int:
    n = 0
    for key in argv[1:]:
        if lookup(key) is not None:
            n += 1
    return n


@command("type", 2, "readonly fast", keys=(1, 1, 1), group="generic",
         summary="Determine the type stored at key", since="1.0.0", acl="keyspace")
def type_(c: Any, argv: list[bytes]) -> object:
    v = c.db.lookup_read_notouch(argv[1])
    name = b"none" if v is None else type_name(v)
    return _TYPE_STATUS.get(name) or Status(name.decode())


@command("touch", -2, "readonly fast", keys=(1, -1, 1), group="generic",
         summary="Alters the last access time of a key(s). Returns the number of existing keys "
                 "specified.", since="3.2.1", acl="keyspace")
def touch(c: Any, argv: list[bytes]) -> object:
    return _count_existing(c.db.lookup_read, argv)    # (EXISTS without LOOKUP_NOTOUCH)


# -- expiry -------------------------------------------------------------------------------------

_E_NX, _E_XX, _E_GT, _E_LT = 1, 2, 4, 8
_EXPIRE_OPTIONS = {b"nx": _E_NX, b"xx": _E_XX, b"gt": _E_GT, b"lt": _E_LT}


def _expire_flags(argv: list[bytes]) -> int:
    """parseExtendedExpireArgumentsOrReply."""
    flags = 0
    for a in argv[3:]:
        flag = _EXPIRE_OPTIONS.get(option_token(a))
        if flag is None:
            text = a.split(b"\0", 1)[0].decode("utf-8", "replace")
            raise ReplyError(f"ERR Unsupported option {text}")
        flags |= flag
    if flags & _E_NX and flags & (_E_XX | _E_GT | _E_LT):
        raise ReplyError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if flags & _E_GT and flags & _E_LT:
        raise ReplyError("ERR GT and LT options at the same time are not compatible")
    return flags


def _expire_generic(c: Any, argv: list[bytes], name: str, relative: bool,
                    seconds: bool) -> int:
    key = argv[1]
    flags = _expire_flags(argv) if len(argv) > 3 else 0
    when = parse_int(argv[2])
    core = c.core
    if seconds:
        if when > _LLMAX_DIV_1000 or when < _LLMIN_DIV_1000:
            raise ReplyError(f"ERR invalid expire time in '{name}' command")
        when *= 1000
    if relative:
        base = core.now_ms
        if when > LLONG_MAX - base:
            raise ReplyError(f"ERR invalid expire time in '{name}' command")
        when += base
    db = c.db
    if db.lookup(key) is None:
        return 0
    if flags:
        current = db.expires.get(key, -1)
        if flags & _E_NX and current != -1:
            return 0
        if flags & _E_XX and current == -1:
            return 0
        if flags & _E_GT and (when <= current or current == -1):
            return 0
        if flags & _E_LT and current != -1 and when >= current:
            return 0
    if when <= core.now_ms and core.expiry_deletes:
        lazy = core.config.lazyfree_lazy_expire
        db.unlink(key) if lazy else db.delete(key)
        core.dirty += 1
        c.propagate_argv = [b"UNLINK" if lazy else b"DEL", key]
        if core.notify_mask & NOTIFY_GENERIC:
            notify(c, NOTIFY_GENERIC, b"del", key)
        return 1
    db.set_expire(key, when)
    core.dirty += 1
    if relative or seconds:
        c.propagate_argv = [b"PEXPIREAT", key, b"%d" % when, *argv[3:]]
    if core.notify_mask & NOTIFY_GENERIC:
        notify(c, NOTIFY_GENERIC, b"expire", key)
    return 1


@command("expire", -3, "write fast", keys=(1, 1, 1), group="generic",
         summary="Set a key's time to live in seconds", since="1.0.0", acl="keyspace")
def expire(c: Any, argv: list[bytes]) -> object:
    return _expire_generic(c, argv, "expire", True, True)


@command("pexpire", -3, "write fast", keys=(1, 1, 1), group="generic",
         summary="Set a key's time to live in milliseconds", since="2.6.0", acl="keyspace")
def pexpire(c: Any, argv: list[bytes]) -> object:
    return _expire_generic(c, argv, "pexpire", True, False)


@command("expireat", -3, "write fast", keys=(1, 1, 1), group="generic",
         summary="Set the expiration for a key as a UNIX timestamp", since="1.2.0",
         acl="keyspace")
def expireat(c: Any, argv: list[bytes]) -> object:
    return _expire_generic(c, argv, "expireat", False, True)


@command("pexpireat", -3, "write fast", keys=(1, 1, 1), group="generic",
         summary="Set the expiration for a key as a UNIX timestamp specified in milliseconds",
         since="2.6.0", acl="keyspace")
def pexpireat(c: Any, argv: list[bytes]) -> object:
    return _expire_generic(c, argv, "pexpireat", False, False)


def _ttl(c: Any, key: bytes, ms: bool, absolute: bool) -> int:
    db = c.db
    if db.lookup_read_notouch(key) is None:
        return -2
    when = db.expires.get(key)
    if when is None:
        return -1
    ttl = when if absolute else when - c.core.now_ms
    if ttl < 0:
        ttl = 0
    return ttl if ms else (ttl + 500) // 1000


# TTL / PTTL / EXPIRETIME / PEXPIRETIME: (name, summary, since, ms, absolute) for _ttl.
for _name, _summary, _since, _ms, _absolute in (
    ("ttl", "Get the time to live for a key in seconds", "1.0.0", False, False),
    ("pttl", "Get the time to live for a key in milliseconds", "2.6.0", True, False),
    ("expiretime", "Get the expiration Unix timestamp for a key", "7.0.0", False, True),
    ("pexpiretime", "Get the expiration Unix timestamp for a key in milliseconds", "7.0.0",
     True, True),
):
    def _ttl_command(c: Any, argv: list[bytes], ms: bool = _ms,
                     absolute: bool = _absolute) -> object:
        return _ttl(c, argv[1], ms, absolute)
    command(_name, 2, "readonly fast", keys=(1, 1, 1), group="generic", summary=_summary,
            since=_since, acl="keyspace")(_ttl_command)


@command("persist", 2, "write fast", keys=(1, 1, 1), group="generic",
         summary="Remove the expiration from a key", since="2.2.0", acl="keyspace")
def persist(c: Any, argv: list[bytes]) -> object:
    db = c.db
    key = argv[1]
    if db.lookup(key) is not None and db.persist(key):
        notify(c, NOTIFY_GENERIC, b"persist", key)
        c.core.dirty += 1
        return 1
    return 0


# -- RENAME / MOVE / COPY -----------------------------------------------------------------------

def _rename(c: Any, argv: list[bytes], nx: bool) -> object:
    src, dst = argv[1], argv[2]
    db = c.db
    v = db.lookup(src)
    if v is None:
        raise ReplyError(NO_SUCH_KEY)
    if src == dst:
        return 0 if nx else OK
    when = db.expires.get(src)
    if db.lookup(dst) is not None:
        if nx:
            return 0
        db.delete(dst)
    db.set(dst, v)
    if when is not None:
        db.set_expire(dst, when)
    db.delete(src)
    notify(c, NOTIFY_GENERIC, b"rename_from", src)
    notify(c, NOTIFY_GENERIC, b"rename_to", dst)
    c.core.dirty += 1
    return 1 if nx else OK


@command("rename", 3, "write", keys=(1, 2, 1), group="generic", summary="Rename a key",
         since="1.0.0", acl="keyspace")
def rename(c: Any, argv: list[bytes]) -> object:
    return _rename(c, argv, False)


@command("renamenx", 3, "write fast", keys=(1, 2, 1), group="generic",
         summary="Rename a key, only if the new key does not exist", since="1.0.0",
         acl="keyspace")
def renamenx(c: Any, argv: list[bytes]) -> object:
    return _rename(c, argv, True)


def _target_db(c: Any, arg: bytes) -> Any:
    """getIntFromObjectOrReply + selectDb's range check."""
    dbid = parse_int(arg)
    if dbid < _INT_MIN or dbid > _INT_MAX:
        raise ReplyError(_INT_RANGE)
    dbs = c.core.dbs
    if dbid < 0 or dbid >= len(dbs):
        raise ReplyError(DB_INDEX_OUT_OF_RANGE)
    return dbs[dbid]


@command("move", 3, "write fast", keys=(1, 1, 1), group="generic",
         summary="Move a key to another database", since="1.0.0", acl="keyspace")
def move(c: Any, argv: list[bytes]) -> object:
    if c.core.cluster is not None:
        raise ReplyError("ERR MOVE is not allowed in cluster mode")
    src = c.db
    dst = _target_db(c, argv[2])
    if dst is src:
        raise ReplyError(_SAME_OBJECT)
    key = argv[1]
    v = src.lookup(key)
    if v is None:
        return 0
    when = src.expires.get(key)
    if dst.lookup(key) is not None:
        return 0
    dst.set(key, v)
    if when is not None:
        dst.set_expire(key, when)
    src.delete(key)
    core = c.core
    if core.notify_mask & NOTIFY_GENERIC:
        keyspace_event(core, NOTIFY_GENERIC, b"move_from", key, src.id)
        keyspace_event(core, NOTIFY_GENERIC, b"move_to", key, dst.id)
    core.dirty += 1
    return 1


def _dup(v: Any) -> Any:
    t = type(v)
    if t is bytes:
        return v
    if t is deque:
        return deque(v)
    if t is ListpackList:
        return v.copy()
    if t is StrDict or t is ListpackHash:
        return v.copy()
    if t is HashEx:     # a hash with field TTLs keeps them (COPY)
        return v.copy()
    if t is StrSet or t is IntSet:
        return v.copy()
    if t is ZSet or t is ListpackZSet or t is Stream:
        return v.copy()
    raise ReplyError("ERR unknown type object")


@command("copy", -3, "write denyoom", keys=(1, 2, 1), group="generic", summary="Copy a key",
         since="6.2.0", acl="keyspace")
def copy(c: Any, argv: list[bytes]) -> object:
    src = dst = c.db
    replace = False
    j = 3
    n = len(argv)
    while j < n:
        opt = option_token(argv[j])
        if opt == b"replace":
            replace = True
        elif opt == b"db" and j + 1 < n:
            dst = _target_db(c, argv[j + 1])
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if c.core.cluster is not None and (src.id != 0 or dst.id != 0):
        raise ReplyError("ERR Copying to another database is not allowed in cluster mode")
    key, newkey = argv[1], argv[2]
    if src is dst and key == newkey:
        raise ReplyError(_SAME_OBJECT)
    v = src.lookup_read(key)
    if v is None:
        return 0
    when = src.expires.get(key)
    if dst.lookup(newkey) is not None:
        if not replace:
            return 0
        dst.delete(newkey)
    dst.set(newkey, _dup(v))
    if when is not None:
        dst.set_expire(newkey, when)
    core = c.core
    if core.notify_mask & NOTIFY_GENERIC:
        keyspace_event(core, NOTIFY_GENERIC, b"copy_to", newkey, dst.id)
    core.dirty += 1
    return 1


# -- KEYS / SCAN / RANDOMKEY --------------------------------------------------------------------

@command("keys", 2, "readonly", group="generic",
         summary="Find all keys matching the given pattern", since="1.0.0",
         acl="keyspace dangerous")
def keys(c: Any, argv: list[bytes]) -> object:
    db = c.db
    pattern = argv[1]
    if pattern == b"*":
        found = list(db.data)
    else:
        match = compile_pattern(pattern)
        found = [k for k in db.data if match(k)]
    exp = db.expires
    if exp:
        now = c.core.now_ms
        found = [k for k in found if k not in exp or exp[k] > now]
    return found


@command("scan", -2, "readonly touches-arbitrary-keys", group="generic",
         summary="Incrementally iterate the keys space", since="2.8.0", acl="keyspace")
def scan(c: Any, argv: list[bytes]) -> object:
    cursor = parse_cursor(argv[1])
    opts = parse_scan_options(argv, 2, allow_type=True)
    db = c.db
    data = db.data
    cursor, candidates = scan_page(data, cursor, opts.count)
    match = opts.match
    want = opts.type
    out = []
    for k in candidates:
        if k not in data:
            continue  # deleted since the snapshot was taken
        if match is not None and not match(k):
            continue
        if want is not None:
            v = db.lookup_read_notouch(k)
            if (b"none" if v is None else type_name(v)) != want:
                continue
        if db.expire_if_needed(k):
            continue
        out.append(k)
    return [b"%d" % cursor, out]


@command("randomkey", 1, "readonly touches-arbitrary-keys", group="generic",
         summary="Return a random key from the keyspace", since="1.0.0", acl="keyspace")
def randomkey(c: Any, argv: list[bytes]) -> object:
    return c.db.random_key()


# -- OBJECT -------------------------------------------------------------------------------------

container("object", group="generic", summary="A container for object introspection commands",
          since="2.2.3")

_LFU_NOT_SELECTED = (
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
    "that when switching between policies at runtime LRU and LFU data will take some time to "
    "adjust.")
_LFU_SELECTED = (
    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
    "switching between policies at runtime LRU and LFU data will take some time to adjust.")
_SHARED_REFCOUNT = (1 << 31) - 1  # OBJ_SHARED_REFCOUNT: shared integers 0..9999


def encoding_name(c: Any, v: Any) -> bytes:
    """Redis 7.0's OBJECT ENCODING name for a value of this shape."""
    t = type(v)
    if t is bytes:
        if len(v) <= 20 and is_long_long(v):
            return b"int"
        return b"embstr" if len(v) <= 44 else b"raw"
    if t is deque or t is ListpackList:
        return b"quicklist"
    if t is ListpackHash:
        return b"listpack"
    if t is StrDict:
        return b"hashtable"
    if t is HashEx:
        return b"listpackex" if is_listpack(c.core, v) else b"hashtable"
    if t is IntSet:
        return b"intset"
    if t is StrSet:
        return b"hashtable"
    if t is ListpackZSet:
        return b"listpack"
    if t is ZSet:
        return b"skiplist"
    if t is Stream:
        return b"stream"
    return b"unknown"


def _lfu(c: Any) -> bool:
    return "lfu" in str(getattr(c.core.config, "maxmemory_policy", ""))


def _encoding(c: Any, key: bytes, v: Any) -> object:
    return encoding_name(c, v)


def _refcount(c: Any, key: bytes, v: Any) -> int:
    """OBJECT REFCOUNT: Redis shares the integers 0..9999, unless a maxmemory policy needs
    each key's own LRU/LFU field (MAXMEMORY_FLAG_NO_SHARED_INTEGERS)."""
    cfg = c.core.config
    if type(v) is bytes and len(v) <= 4 and is_long_long(v) and 0 <= int(v) < 10000 and \
            not (cfg.maxmemory and cfg.maxmemory_policy.endswith(("-lru", "-lfu"))):
        return _SHARED_REFCOUNT
    return 1


def _idletime(c: Any, key: bytes, v: Any) -> int:
    """Seconds since the key was last accessed (its 24-bit LRU clock: pyrepl.keyspace.ageing)."""
    if _lfu(c):
        raise ReplyError(_LFU_SELECTED)
    return idle_ms(c.db.data.age(key) or 0, c.core.now_ms) // 1000


def _freq(c: Any, key: bytes, v: Any) -> int:
    """The key's logarithmic access counter, decayed to now (LFUDecrAndReturn)."""
    if not _lfu(c):
        raise ReplyError(_LFU_NOT_SELECTED)
    core = c.core
    return lfu_decr_and_return(c.db.data.age(key) or 0, core.now_ms, core.config.lfu_decay_time)


def _object(c: Any, argv: list[bytes], answer: Callable[[Any, bytes, Any], object]) -> object:
    """OBJECT <subcommand> <key>: ``answer(c, key, value)``, or a null reply when the key is
    missing (objectCommandLookupOrReply: LOOKUP_NOTOUCH, no keyspace hit, no event)."""
    v = c.db.lookup_read_nonotify(argv[2])
    return None if v is None else answer(c, argv[2], v)


variants(_object, (
    ("object|encoding", "2.2.3", "Inspect the internal encoding of a Redis object",
     (_encoding,)),
    ("object|refcount", "2.2.3", "Get the number of references to the value of the key",
     (_refcount,)),
    ("object|idletime", "2.2.3", "Get the time since a Redis object was last accessed",
     (_idletime,)),
    ("object|freq", "4.0.0", "Get the logarithmic access frequency counter of a Redis object",
     (_freq,)),
), 3, "readonly", keys=(2, 2, 1), group="generic", acl="keyspace")


help_command("object", (
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
), group="generic", since="6.2.0", acl="keyspace")
