"""Stream commands (Redis 7.0.15's t_stream.c).

XADD XRANGE XREVRANGE XLEN XDEL XTRIM XREAD XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM XSETID,
XGROUP (CREATE SETID DESTROY CREATECONSUMER DELCONSUMER HELP), XINFO (STREAM GROUPS CONSUMERS
HELP).

Theory of operation: values are :class:`pyrepl.keyspace.stream.Stream`. Each handler follows
its C function step by step, because the order of the checks decides which error a client
sees (options, then IDs, then the key, then the group). IDs are parsed as
streamGenericParseIDOrReply does, C string semantics included (string2ull, then strtoull).

Propagation is Redis's: XADD propagates the ID it generated and an approximate trim as
``MAXLEN = <length>`` / ``MINID = <first id>``; XTRIM the same. XREADGROUP, XCLAIM and
XAUTOCLAIM never propagate themselves: every PEL change becomes an idempotent ``XCLAIM key group
consumer 0 id TIME t RETRYCOUNT n FORCE JUSTID LASTID id`` (plus ``XGROUP SETID`` for NOACK
reads and ``XGROUP CREATECONSUMER`` for a consumer NOACK created). The core propagates a
command when it bumped ``dirty``; to propagate only the derived commands these handlers queue
all but the last with ``also_propagate`` and make the last the command's own propagated form,
and bump ``dirty`` only when something is propagated (Redis also counts a consumer created by a
read of an empty history as a change; pyrepl does not, which only shifts the save counters).

XREAD/XREADGROUP ... BLOCK block on the generic mechanism (pyrepl.core.blocking): XADD signals the
key, and a blocked client gets the new entries of that one key (COUNT, or 1000 as Redis): after
its ID for XREAD; after the group's last ID at that moment for XREADGROUP, which then gets
-NOGROUP if the group was destroyed (XGROUP DESTROY signals the key) and -UNBLOCKED if the key
was deleted or overwritten.

Keyspace events as t_stream.c: ``xadd`` (after ``new``) then ``xtrim`` if its trim removed
entries, ``xtrim``, ``xdel``, ``xsetid``, ``xgroup-create`` / ``-setid`` / ``-destroy`` /
``-createconsumer`` / ``-delconsumer``, and ``xgroup-createconsumer`` for a consumer that
XREADGROUP (served at once or after blocking), XCLAIM or XAUTOCLAIM creates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pyrepl.commands.table import Handler, command, container
from pyrepl.commands.util import help_command, parse_int, subcommand_error
from pyrepl.core.blocking import NOT_SERVED, KeyWait
from pyrepl.errors import SYNTAX, WRONGTYPE, wrong_args
from pyrepl.keyspace.stream import (
    MASK64,
    MAX_ID,
    SCG_INVALID_ENTRIES_READ,
    Consumer,
    Group,
    Nack,
    Pel,
    Stream,
    id_str,
    make_id,
)
from pyrepl.notify import NOTIFY_STREAM, notify
from pyrepl.resp.types import BLOCKED, NULL_ARRAY, OK, Map, ReplyError

INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
LISTPACK_MAX_SIZE = 1 << 30
_STRTOULL = re.compile(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)\Z")
_LL = re.compile(rb"-?[1-9][0-9]*\Z|0\Z")


def _c(b: bytes) -> str:
    """An argument as C's %s prints it (up to a NUL)."""
    nul = b.find(b"\x00")
    return (b if nul < 0 else b[:nul]).decode("utf-8", "replace")


def _string2ull(s: bytes) -> int | None:
    if _LL.match(s) and len(s) <= 20:
        v = int(s)
        if -(1 << 63) <= v < (1 << 63):
            return None if v < 0 else v
    m = _STRTOULL.match(s)
    if m is None:
        return None
    v = int(m[2])
    if v > MASK64:
        return None
    return (-v) & MASK64 if m[1] == b"-" else v


def parse_id(b: bytes, missing_seq: int = 0, strict: bool = False,
             seq_star: bool = False) -> tuple[int, bool]:
    """streamGenericParseIDOrReply: (id, seq_given)."""
    if len(b) > 127:
        raise ReplyError(INVALID_ID)
    nul = b.find(b"\x00")
    s = b if nul < 0 else b[:nul]
    if strict and s in (b"-", b"+"):
        raise ReplyError(INVALID_ID)
    if s == b"-":
        return 0, True
    if s == b"+":
        return MAX_ID, True
    dash = s.find(b"-")
    ms = _string2ull(s if dash < 0 else s[:dash])
    if ms is None:
        raise ReplyError(INVALID_ID)
    if dash < 0:
        return make_id(ms, missing_seq), True
    tail = s[dash + 1:]
    if seq_star and tail == b"*":
        return make_id(ms, 0), False
    seq = _string2ull(tail)
    if seq is None:
        raise ReplyError(INVALID_ID)
    return make_id(ms, seq), True


def parse_interval(b: bytes, missing_seq: int) -> tuple[int, bool]:
    """streamParseIntervalIDOrReply: (id, exclusive)."""
    if len(b) > 1 and b[:1] == b"(":
        return parse_id(b[1:], missing_seq, strict=True)[0], True
    return parse_id(b, missing_seq)[0], False


def _start_end(lo: bytes, hi: bytes) -> tuple[int, int]:
    start, ex = parse_interval(lo, 0)
    if ex:
        if start == MAX_ID:
            raise ReplyError("ERR invalid start ID for the interval")
        start += 1
    end, ex = parse_interval(hi, MASK64)
    if ex:
        if end == 0:
            raise ReplyError("ERR invalid end ID for the interval")
        end -= 1
    return start, end


def _is(b: bytes, tok: bytes) -> bool:
    return len(b) == len(tok) and b.lower() == tok


def _single(b: bytes, ch: bytes) -> bool:
    """``b[0] == ch && b[1] == '\\0'`` on the C string."""
    return b[:1] == ch and (len(b) == 1 or b[1] == 0)


def _stream(c: Any, key: bytes) -> Stream | None:
    v = c.db.lookup(key)
    if v is not None and type(v) is not Stream:
        raise ReplyError(WRONGTYPE)
    return v


def _stream_read(c: Any, key: bytes) -> Stream | None:
    v = c.db.lookup_read(key)
    if v is not None and type(v) is not Stream:
        raise ReplyError(WRONGTYPE)
    return v


def _entry(eid: int, fv: list[bytes]) -> list[Any]:
    return [id_str(eid), fv]


def _modified(c: Any, key: bytes) -> None:
    db = c.db
    if db.watched:
        db.touch(key)


def _emit(c: Any, props: list[list[bytes]]) -> None:
    """Propagate ``props`` instead of the command itself (preventCommandPropagation)."""
    if not props:
        return
    core = c.core
    for argv in props[:-1]:
        core.also_propagate(c.db.id, argv)
    c.propagate_argv = props[-1]
    core.dirty += 1


# -- XADD / XTRIM -----------------------------------------------------------------------------

class _TrimArgs:
    __slots__ = ("maxlen", "minid", "approx", "limit", "arg_idx", "id", "id_given",
                 "seq_given", "no_mkstream", "idpos")

    def __init__(self) -> None:
        self.maxlen: int | None = None
        self.minid: int | None = None
        self.approx = False
        self.limit = 0
        self.arg_idx = 0
        self.id = 0
        self.id_given = False
        self.seq_given = True
        self.no_mkstream = False
        self.idpos = 0


def _parse_add_trim(c: Any, argv: list[bytes], xadd: bool) -> _TrimArgs:
    """streamParseAddOrTrimArgsOrReply."""
    a = _TrimArgs()
    n = len(argv)
    i = 2
    limit_given = False
    while i < n:
        more = n - 1 - i
        opt = argv[i]
        if xadd and _single(opt, b"*"):
            break
        low = opt.lower()
        if low in (b"maxlen", b"minid") and more:
            if a.maxlen is not None or a.minid is not None:
                raise ReplyError("ERR syntax error, MAXLEN and MINID options at the same time "
                                 "are not compatible")
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and _single(nxt, b"~"):
                a.approx = True
                i += 1
            elif more >= 2 and _single(nxt, b"="):
                i += 1
            if low == b"maxlen":
                v = parse_int(argv[i + 1])
                if v < 0:
                    raise ReplyError("ERR The MAXLEN argument must be >= 0.")
                a.maxlen = v
            else:
                a.minid = parse_id(argv[i + 1], 0, strict=True)[0]
            i += 1
            a.arg_idx = i
        elif low == b"limit" and more:
            a.limit = parse_int(argv[i + 1])
            if a.limit < 0:
                raise ReplyError("ERR The LIMIT argument must be >= 0.")
            limit_given = True
            i += 1
        elif xadd and low == b"nomkstream":
            a.no_mkstream = True
        elif xadd:
            a.id, a.seq_given = parse_id(opt, 0, strict=True, seq_star=True)
            a.id_given = True
            break
        else:
            raise ReplyError(SYNTAX)
        i += 1
    a.idpos = i
    trimming = a.maxlen is not None or a.minid is not None
    if a.limit and not trimming:
        raise ReplyError("ERR syntax error, LIMIT cannot be used without specifying a trimming "
                         "strategy")
    if not xadd and not trimming:
        raise ReplyError("ERR syntax error, XTRIM must be called with a trimming strategy")
    if c.must_obey():
        a.limit = 0                      # mustObeyClient: the master or AOF has it rewritten
    elif limit_given:
        if not a.approx:
            raise ReplyError("ERR syntax error, LIMIT cannot be used without the special ~ "
                             "option")
    elif a.approx:
        limit = 100 * c.core.config.stream_node_max_entries
        if limit <= 0:
            limit = 10000
        a.limit = min(limit, 1000000)
    else:
        a.limit = 0
    return a


def _trim(s: Stream, a: _TrimArgs) -> int:
    if a.maxlen is None and a.minid is None:
        return 0
    return s.trim(a.maxlen, a.minid, a.approx, a.limit)


def _rewrite_trim(s: Stream, a: _TrimArgs, out: list[bytes]) -> None:
    """streamRewriteApproxSpecifier + streamRewriteTrimArgument."""
    out[a.arg_idx - 1] = b"="
    out[a.arg_idx] = b"%d" % s.length if a.maxlen is not None else id_str(s.first_any())


@command("xadd", -5, "write denyoom fast", keys=(1, 1, 1), group="stream",
         summary="Appends a new entry to a stream", since="5.0.0", acl="stream")
def xadd(c: Any, argv: list[bytes]) -> object:
    a = _parse_add_trim(c, argv, True)
    field_pos = a.idpos + 1
    nf = len(argv) - field_pos
    if nf < 2 or nf % 2:
        raise wrong_args("xadd")
    if a.id_given and a.seq_given and a.id == 0:
        raise ReplyError("ERR The ID specified in XADD must be greater than 0-0")
    key = argv[1]
    s = _stream(c, key)
    if s is None:
        if a.no_mkstream:
            return None
        s = Stream()
        c.db.add(key, s)
    if s.last_id == MAX_ID:
        raise ReplyError("ERR The stream has exhausted the last possible ID, unable to add "
                         "more items")
    last = s.last_id
    edom = ReplyError("ERR The ID specified in XADD is equal or smaller than the target "
                      "stream top item")
    if a.id_given:
        if a.seq_given:
            nid = a.id
        elif last >> 64 == a.id >> 64:
            if last & MASK64 == MASK64:
                raise edom
            nid = last + 1
        else:
            nid = a.id
    else:
        ms = c.core.now_ms
        nid = make_id(ms, 0) if ms > last >> 64 else (last + 1) & MAX_ID
    if nid <= last:
        raise edom
    fv = argv[field_pos:]
    if sum(len(x) for x in fv) > LISTPACK_MAX_SIZE:
        raise ReplyError("ERR Elements are too large to be stored")
    cfg = c.core.config
    s.append(nid, list(fv), cfg.stream_node_max_bytes, cfg.stream_node_max_entries)
    reply = id_str(nid)
    _modified(c, key)
    core = c.core
    if core.notify_mask & NOTIFY_STREAM:
        notify(c, NOTIFY_STREAM, b"xadd", key)
    core.dirty += 1
    if core.keys_waited:        # signalKeyAsReady: the stream grew in place
        core.blocking.signal(c.db, key)
    out: list[bytes] | None = None
    if a.maxlen is not None or a.minid is not None:
        if _trim(s, a):
            notify(c, NOTIFY_STREAM, b"xtrim", key)
        if a.approx:
            out = list(argv)
            _rewrite_trim(s, a, out)
    if not a.id_given or not a.seq_given:
        if out is None:
            out = list(argv)
        out[a.idpos] = reply
    if out is not None:
        c.propagate_argv = out
    return reply


@command("xtrim", -4, "write", keys=(1, 1, 1), group="stream",
         summary="Trims the stream to (approximately if '~' is passed) a certain size",
         since="6.2.0", acl="stream")
def xtrim(c: Any, argv: list[bytes]) -> object:
    a = _parse_add_trim(c, argv, False)
    s = _stream(c, argv[1])
    if s is None:
        return 0
    deleted = _trim(s, a)
    if deleted:
        notify(c, NOTIFY_STREAM, b"xtrim", argv[1])
        if a.approx:
            out = list(argv)
            _rewrite_trim(s, a, out)
            c.propagate_argv = out
        _modified(c, argv[1])
        c.core.dirty += deleted
    return deleted


# -- XRANGE / XREVRANGE / XLEN / XDEL ------------------------------------------------------------

def _xrange(c: Any, argv: list[bytes], rev: bool) -> object:
    lo, hi = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start, end = _start_end(lo, hi)
    count = -1
    j = 4
    n = len(argv)
    while j < n:
        if _is(argv[j], b"count") and n - j - 1 >= 1:
            count = parse_int(argv[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise ReplyError(SYNTAX)
    s = _stream_read(c, argv[1])
    if s is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return s.range_reply(start, end, rev, count)


@command("xrange", -4, "readonly", keys=(1, 1, 1), group="stream",
         summary="Return a range of elements in a stream, with IDs matching the specified IDs "
                 "interval", since="5.0.0", acl="stream")
def xrange(c: Any, argv: list[bytes]) -> object:
    return _xrange(c, argv, False)


@command("xrevrange", -4, "readonly", keys=(1, 1, 1), group="stream",
         summary="Return a range of elements in a stream, with IDs matching the specified IDs "
                 "interval, in reverse order (from greater to smaller IDs) compared to XRANGE",
         since="5.0.0", acl="stream")
def xrevrange(c: Any, argv: list[bytes]) -> object:
    return _xrange(c, argv, True)


@command("xlen", 2, "readonly fast", keys=(1, 1, 1), group="stream",
         summary="Return the number of entries in a stream", since="5.0.0", acl="stream")
def xlen(c: Any, argv: list[bytes]) -> object:
    s = _stream_read(c, argv[1])
    return 0 if s is None else s.length


@command("xdel", -3, "write fast", keys=(1, 1, 1), group="stream",
         summary="Removes the specified entries from the stream. Returns the number of items "
                 "actually deleted, that may be different from the number of IDs passed in case "
                 "certain IDs do not exist.", since="5.0.0", acl="stream")
def xdel(c: Any, argv: list[bytes]) -> object:
    s = _stream(c, argv[1])
    if s is None:
        return 0
    ids = [parse_id(b, 0, strict=True)[0] for b in argv[2:]]
    deleted = 0
    first_entry = False
    for eid in ids:
        if s.delete(eid):
            if eid == s.first_id:
                first_entry = True
            if eid > s.max_deleted:
                s.max_deleted = eid
            deleted += 1
    if deleted:
        if s.length == 0:
            s.first_id = 0
        elif first_entry:
            s.first_id = s.first_live()
        _modified(c, argv[1])
        notify(c, NOTIFY_STREAM, b"xdel", argv[1])
        c.core.dirty += deleted
    return deleted


# -- XREAD / XREADGROUP ---------------------------------------------------------------------------

def _xread_keys(argv: list[bytes]) -> list[int]:
    """The keys after STREAMS (half of what follows it)."""
    for i in range(1, len(argv)):
        if _is(argv[i], b"streams"):
            n = (len(argv) - i - 1) // 2
            return list(range(i + 1, i + 1 + n))
    return []


def _xclaim_argv(key: bytes, group_name: bytes, g: Group, eid: bytes, nack: Nack) -> list[bytes]:
    """streamPropagateXCLAIM."""
    assert nack.consumer is not None
    return [b"XCLAIM", key, group_name, nack.consumer.name, b"0", eid, b"TIME",
            b"%d" % nack.delivery_time, b"RETRYCOUNT", b"%d" % nack.delivery_count, b"FORCE",
            b"JUSTID", b"LASTID", id_str(g.last_id)]


def _group_read(c: Any, s: Stream, start: int, count: int, key: bytes, gname: bytes, g: Group,
                consumer: Consumer, noack: bool, props: list[list[bytes]]) -> list[Any]:
    """streamReplyWithRange with a group: advance the group, fill the PELs, propagate."""
    now = c.core.now_ms
    out = []
    propagate_last_id = False
    for eid, fv in s.range(start, MAX_ID):
        if eid > g.last_id:
            if g.entries_read != SCG_INVALID_ENTRIES_READ and \
                    not s.range_has_tombstones(eid):
                g.entries_read += 1
            elif s.entries_added:
                g.entries_read = s.estimate_distance(eid)
            g.last_id = eid
            if noack:
                propagate_last_id = True
        out.append([id_str(eid), fv])
        if not noack:
            nack = g.pel.get(eid)
            if nack is None:
                nack = Nack(now, 1, consumer)
                g.pel[eid] = nack
                consumer.pel[eid] = nack
            else:
                old = nack.consumer
                if old is not None:
                    old.pel.pop(eid, None)
                nack.consumer = consumer
                nack.delivery_time = now
                nack.delivery_count = 1
                consumer.pel[eid] = nack
            props.append(_xclaim_argv(key, gname, g, id_str(eid), nack))
        if count and len(out) == count:
            break
    if propagate_last_id:
        props.append([b"XGROUP", b"SETID", key, gname, id_str(g.last_id), b"ENTRIESREAD",
                      b"%d" % g.entries_read])
    return out


def _history(c: Any, s: Stream, start: int, count: int, consumer: Consumer) -> list[Any]:
    """streamReplyWithRangeFromConsumerPEL."""
    now = c.core.now_ms
    pel = consumer.pel
    out, found = s.history_reply(pel.from_id(start, count), NULL_ARRAY)
    for eid in found:
        nack = pel[eid]
        nack.delivery_time = now
        nack.delivery_count += 1
    return out


def _xread(c: Any, argv: list[bytes], xreadgroup: bool) -> object:
    n = len(argv)
    count = 0
    block_ms = -1
    streams_arg = 0
    streams_count = 0
    noack = False
    gname: bytes | None = None
    cname = b""
    i = 1
    while i < n:
        more = n - i - 1
        o = argv[i]
        low = o.lower()
        if low == b"block" and more:
            i += 1
            block_ms = parse_int(argv[i], "ERR timeout is not an integer or out of range")
            if block_ms < 0:
                raise ReplyError("ERR timeout is negative")
        elif low == b"count" and more:
            i += 1
            count = parse_int(argv[i])
            if count < 0:
                count = 0
        elif low == b"streams" and more:
            streams_arg = i + 1
            streams_count = n - streams_arg
            if streams_count % 2:
                raise ReplyError("ERR Unbalanced XREAD list of streams: for each stream key an "
                                 "ID or '$' must be specified.")
            streams_count //= 2
            break
        elif low == b"group" and more >= 2:
            if not xreadgroup:
                raise ReplyError("ERR The GROUP option is only supported by XREADGROUP. You "
                                 "called XREAD instead.")
            gname, cname = argv[i + 1], argv[i + 2]
            i += 2
        elif low == b"noack":
            if not xreadgroup:
                raise ReplyError("ERR The NOACK option is only supported by XREADGROUP. You "
                                 "called XREAD instead.")
            noack = True
        else:
            raise ReplyError(SYNTAX)
        i += 1
    if streams_arg == 0:
        raise ReplyError(SYNTAX)
    if xreadgroup and gname is None:
        raise ReplyError("ERR Missing GROUP option for XREADGROUP")
    ids: list[int] = []
    groups: list[Group] = []
    for i in range(streams_arg + streams_count, n):
        key = argv[i - streams_count]
        s = _stream_read(c, key)
        if gname is not None:
            g = s.groups.get(gname) if s is not None else None
            if g is None:
                raise ReplyError(f"NOGROUP No such key '{_c(key)}' or consumer group "
                                 f"'{_c(gname)}' in XREADGROUP with GROUP option")
            groups.append(g)
        a = argv[i]
        if a == b"$":
            if xreadgroup:
                raise ReplyError("ERR The $ ID is meaningless in the context of XREADGROUP: you "
                                 "want to read the history of this consumer by specifying a "
                                 "proper ID, or use the > ID to get new messages. The $ ID would "
                                 "just return an empty result set.")
            ids.append(s.last_id if s is not None else 0)
            continue
        if a == b">":
            if not xreadgroup:
                raise ReplyError("ERR The > ID can be specified only when calling XREADGROUP "
                                 "using the GROUP <group> <consumer> option.")
            ids.append(MAX_ID)
            continue
        ids.append(parse_id(a, 0, strict=True)[0])
    replies: list[tuple[bytes, list[Any]]] = []
    props: list[list[bytes]] = []
    now = c.core.now_ms
    for k in range(streams_count):
        key = argv[streams_arg + k]
        s = _stream_read(c, key)
        if s is None:
            continue
        gt = ids[k]
        serve = history = False
        if groups:
            if gt != MAX_ID:
                serve = history = True
            elif s.length:
                last = groups[k].last_id
                if s.last_live() > last:
                    serve = True
                    gt = last
        elif s.length and s.last_live() > gt:
            serve = True
        if not serve:
            continue
        start = (gt + 1) & MAX_ID
        if groups:
            g = groups[k]
            assert gname is not None
            cons = g.consumers.get(cname)
            if cons is None:
                cons = g.consumers[cname] = Consumer(cname, now)
                notify(c, NOTIFY_STREAM, b"xgroup-createconsumer", key)
                if noack:
                    props.append([b"XGROUP", b"CREATECONSUMER", key, gname, cname])
            else:
                cons.seen_time = now
            if history:
                entries = _history(c, s, start, count, cons)
            else:
                entries = _group_read(c, s, start, count, key, gname, g, cons, noack, props)
        else:
            entries = s.range_reply(start, MAX_ID, False, count or -1)
        replies.append((key, entries))
    _emit(c, props)
    if not replies:
        # CLIENT_DENY_BLOCKING: inside EXEC or a script, where the call depth is above the
        # command's own (XREADGROUP is a write: its call is one level)
        core = c.core
        if block_ms >= 0 and not c.in_multi and core._call_depth <= xreadgroup:
            keys = argv[streams_arg:streams_arg + streams_count]
            deadline = core.now_ms + block_ms if block_ms else 0
            blocked_count = count or XREAD_BLOCKED_COUNT
            if gname is None:
                after = dict(zip(keys, ids, strict=True))   # (a key named twice: its last ID)
                wait = KeyWait("stream", c.db, keys, Stream, deadline,
                               _serve_xread(after, blocked_count))
            else:
                wait = KeyWait("stream", c.db, keys, Stream, deadline,
                               _serve_xreadgroup(gname, cname, noack, blocked_count),
                               gone=ReplyError("UNBLOCKED the stream key no longer exists"))
            core.blocking.block(c, wait)
            return BLOCKED
        return NULL_ARRAY
    if c.proto == 2:
        return [[k, e] for k, e in replies]
    return Map(replies)


XREAD_BLOCKED_COUNT = 1000   # XREAD_BLOCKED_DEFAULT_COUNT: a blocked XREAD without COUNT


def _serve_xread(after: dict[bytes, int], count: int) -> Any:
    """serveClientsBlockedOnStreamKey for XREAD: the entries after the client's ID of the key
    that got new ones (that key alone), or stay blocked."""
    def serve(c: Any, key: bytes, s: Stream) -> object:
        gt = after[key]
        if s.last_id <= gt:
            return NOT_SERVED
        entries = s.range_reply((gt + 1) & MAX_ID, MAX_ID, False, count or -1)
        return [[key, entries]] if c.proto == 2 else Map([(key, entries)])
    return serve


def _serve_xreadgroup(gname: bytes, cname: bytes, noack: bool, count: int) -> Any:
    """serveClientsBlockedOnStreamKey for XREADGROUP (always blocked on ">"): the entries after
    the group's last ID *now* (other consumers may have taken some), read as the group's; the
    group gone is -NOGROUP; the consumer is made if it is new. What the read changes propagates
    as XREADGROUP's own (XCLAIM per entry, or XGROUP SETID with NOACK)."""
    def serve(c: Any, key: bytes, s: Stream) -> object:
        g = s.groups.get(gname)
        if g is None:
            raise ReplyError("NOGROUP the consumer group this client was blocked on no longer "
                             "exists")
        if s.last_id <= g.last_id:
            return NOT_SERVED
        core = c.core
        props: list[list[bytes]] = []
        cons = g.consumers.get(cname)
        if cons is None:
            cons = g.consumers[cname] = Consumer(cname, core.now_ms)
            notify(c, NOTIFY_STREAM, b"xgroup-createconsumer", key)
            if noack:
                props.append([b"XGROUP", b"CREATECONSUMER", key, gname, cname])
        else:
            cons.seen_time = core.now_ms
        entries = _group_read(c, s, (g.last_id + 1) & MAX_ID, count, key, gname, g, cons,
                              noack, props)
        for argv in props:
            core.also_propagate(c.db.id, argv)
        core.dirty += 1
        return [[key, entries]] if c.proto == 2 else Map([(key, entries)])
    return serve


def _first(it: Any, count: int) -> list[Any]:
    out = []
    for x in it:
        out.append(x)
        if count and len(out) == count:
            break
    return out


def _xread_command(name: str, arity: int, flags: str, summary: str) -> Callable[[Handler], Handler]:
    """XREAD's and XREADGROUP's registration: their keys found alike (_xread_keys)."""
    return command(name, arity, flags, group="stream", summary=summary, since="5.0.0",
                   acl="stream", keys_fn=_xread_keys)


@_xread_command("xread", -4, "readonly blocking",
                "Return never seen elements in multiple streams, with IDs greater than the ones "
                "reported by the caller for each stream. Can block.")
def xread(c: Any, argv: list[bytes]) -> object:
    return _xread(c, argv, False)


@_xread_command("xreadgroup", -7, "write blocking",
                "Return new entries from a stream using a consumer group, or access the history "
                "of the pending entries for a given consumer. Can block.")
def xreadgroup(c: Any, argv: list[bytes]) -> object:
    return _xread(c, argv, True)


# -- XGROUP ---------------------------------------------------------------------------------------

container("xgroup", group="stream", summary="A container for consumer groups commands",
          since="5.0.0")

def _xgroup(c: Any, argv: list[bytes]) -> object:
    """xgroupCommand (every subcommand)."""
    n = len(argv)
    opt = argv[1].lower()
    s: Stream | None = None
    g: Group | None = None
    mkstream = False
    entries_read = SCG_INVALID_ENTRIES_READ
    key = argv[2] if n > 2 else b""
    gname = argv[3] if n > 3 else b""
    if n >= 4:
        i = 5
        create = opt == b"create"
        setid = opt == b"setid"
        while i < n:
            if create and _is(argv[i], b"mkstream"):
                mkstream = True
                i += 1
            elif (create or setid) and _is(argv[i], b"entriesread") and i + 1 < n:
                entries_read = parse_int(argv[i + 1])
                if entries_read < 0 and entries_read != SCG_INVALID_ENTRIES_READ:
                    raise ReplyError("ERR value for ENTRIESREAD must be positive or -1")
                i += 2
            else:
                raise subcommand_error(argv)
        s = _stream(c, key)
    if n >= 4 and not mkstream:
        if s is None:
            raise ReplyError("ERR The XGROUP subcommand requires the key to exist. Note that for "
                             "CREATE you may want to use the MKSTREAM option to create an empty "
                             "stream automatically.")
        g = s.groups.get(gname)
        if g is None and opt in (b"setid", b"createconsumer", b"delconsumer"):
            raise ReplyError(f"NOGROUP No such consumer group '{_c(gname)}' for key name "
                             f"'{_c(key)}'")
    core = c.core
    if opt == b"create" and 5 <= n <= 8:
        if argv[4] == b"$":
            eid = s.last_id if s is not None else 0
        else:
            eid = parse_id(argv[4], 0, strict=True)[0]
        if s is None:
            s = Stream()
            c.db.add(key, s)
            _modified(c, key)
        if gname in s.groups:
            raise ReplyError("BUSYGROUP Consumer Group name already exists")
        s.groups[gname] = Group(eid, entries_read)
        core.dirty += 1
        notify(c, NOTIFY_STREAM, b"xgroup-create", key)
        return OK
    assert s is not None
    if opt == b"setid" and n in (5, 7):
        assert g is not None
        eid = s.last_id if argv[4] == b"$" else parse_id(argv[4], 0)[0]
        g.last_id = eid
        g.entries_read = entries_read
        core.dirty += 1
        notify(c, NOTIFY_STREAM, b"xgroup-setid", key)
        return OK
    if opt == b"destroy" and n == 4:
        if g is None:
            return 0
        del s.groups[gname]
        core.dirty += 1
        notify(c, NOTIFY_STREAM, b"xgroup-destroy", key)
        core.blocking.signal(c.db, key)    # its blocked XREADGROUP clients get -NOGROUP
        return 1
    if opt == b"createconsumer" and n == 5:
        assert g is not None
        if argv[4] in g.consumers:
            return 0
        g.consumers[argv[4]] = Consumer(argv[4], core.now_ms)
        core.dirty += 1
        notify(c, NOTIFY_STREAM, b"xgroup-createconsumer", key)
        return 1
    if opt == b"delconsumer" and n == 5:
        assert g is not None
        cons = g.consumers.get(argv[4])
        if cons is None:
            return 0
        pending = len(cons.pel)
        for eid in cons.pel:
            g.pel.pop(eid, None)
        del g.consumers[argv[4]]
        core.dirty += 1
        notify(c, NOTIFY_STREAM, b"xgroup-delconsumer", key)
        return pending
    raise subcommand_error(argv)


# XGROUP's subcommands all run _xgroup: (name, arity, flags, summary, since).
for _sub, _arity, _flags, _summary, _since in (
    ("create", -5, "write denyoom", "Create a consumer group.", "5.0.0"),
    ("setid", -5, "write", "Set a consumer group to an arbitrary last delivered ID value.",
     "5.0.0"),
    ("destroy", 4, "write", "Destroy a consumer group.", "5.0.0"),
    ("createconsumer", 5, "write denyoom", "Create a consumer in a consumer group.", "6.2.0"),
    ("delconsumer", 5, "write", "Delete a consumer from a consumer group.", "5.0.0"),
):
    command(f"xgroup|{_sub}", _arity, _flags, keys=(2, 2, 1), group="stream", summary=_summary,
            since=_since, acl="stream")(_xgroup)
help_command("xgroup", (
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
), group="stream", since="5.0.0", acl="stream")


# -- XSETID / XACK / XPENDING -------------------------------------------------------------------

@command("xsetid", -3, "write denyoom fast", keys=(1, 1, 1), group="stream",
         summary="An internal command for replicating stream values", since="5.0.0",
         acl="stream")
def xsetid(c: Any, argv: list[bytes]) -> object:
    eid = parse_id(argv[2], 0, strict=True)[0]
    max_xdel = 0
    entries_added = -1
    i = 3
    n = len(argv)
    while i < n:
        more = n - 1 - i
        if _is(argv[i], b"entriesadded") and more:
            entries_added = parse_int(argv[i + 1])
            if entries_added < 0:
                raise ReplyError("ERR entries_added must be positive")
            i += 2
        elif _is(argv[i], b"maxdeletedid") and more:
            max_xdel = parse_id(argv[i + 1], 0, strict=True)[0]
            if eid < max_xdel:
                raise ReplyError("ERR The ID specified in XSETID is smaller than the provided "
                                 "max_deleted_entry_id")
            i += 2
        else:
            raise ReplyError(SYNTAX)
    s = _stream(c, argv[1])
    if s is None:
        raise ReplyError("ERR no such key")
    if s.length > 0:
        if eid < s.last_live():
            raise ReplyError("ERR The ID specified in XSETID is smaller than the target stream "
                             "top item")
        if entries_added != -1 and s.length > entries_added:
            raise ReplyError("ERR The entries_added specified in XSETID is smaller than the "
                             "target stream length")
    s.last_id = eid
    if entries_added != -1:
        s.entries_added = entries_added
    if max_xdel:
        s.max_deleted = max_xdel
    c.core.dirty += 1
    notify(c, NOTIFY_STREAM, b"xsetid", argv[1])
    return OK


@command("xack", -4, "write fast", keys=(1, 1, 1), group="stream",
         summary="Marks a pending message as correctly processed, effectively removing it from "
                 "the pending entries list of the consumer group. Return value of the command is "
                 "the number of messages successfully acknowledged, that is, the IDs we were "
                 "actually able to resolve in the PEL.", since="5.0.0", acl="stream")
def xack(c: Any, argv: list[bytes]) -> object:
    s = _stream_read(c, argv[1])
    g = s.groups.get(argv[2]) if s is not None else None
    if g is None:
        return 0
    ids = [parse_id(b, 0, strict=True)[0] for b in argv[3:]]
    acked = 0
    for eid in ids:
        nack = g.pel.pop(eid, None)
        if nack is not None:
            if nack.consumer is not None:
                nack.consumer.pel.pop(eid, None)
            acked += 1
            c.core.dirty += 1
    return acked


def _stream_group(c: Any, key: bytes, gname: bytes) -> tuple[Stream, Group]:
    """The stream at ``key`` and its consumer group ``gname``: NOGROUP when either is missing
    (XPENDING, XCLAIM, XAUTOCLAIM)."""
    s = _stream_read(c, key)
    g = s.groups.get(gname) if s is not None else None
    if g is None or s is None:
        raise ReplyError(f"NOGROUP No such key '{_c(key)}' or consumer group '{_c(gname)}'")
    return s, g


@command("xpending", -3, "readonly", keys=(1, 1, 1), group="stream",
         summary="Return information and entries from a stream consumer group pending entries "
                 "list, that are messages fetched but never acknowledged.", since="5.0.0",
         acl="stream")
def xpending(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    justinfo = n == 3
    if n != 3 and (n < 6 or n > 9):
        raise ReplyError(SYNTAX)
    minidle = 0
    count = 0
    start = end = 0
    cname: bytes | None = None
    if n >= 6:
        si = 3
        if _is(argv[3], b"idle"):
            minidle = parse_int(argv[4])
            if n < 8:
                raise ReplyError(SYNTAX)
            si += 2
        count = parse_int(argv[si + 2])
        if count < 0:
            count = 0
        start, end = _start_end(argv[si], argv[si + 1])
        if si + 3 < n:
            cname = argv[si + 3]
    g = _stream_group(c, argv[1], argv[2])[1]
    if justinfo:
        if not g.pel:
            return [0, None, None, NULL_ARRAY]
        ids = g.pel.ids
        cons = [[name, b"%d" % len(x.pel)] for name, x in sorted(g.consumers.items()) if x.pel]
        return [len(ids), id_str(ids[0]), id_str(ids[-1]), cons]
    if cname is not None:
        consumer = g.consumers.get(cname)
        if consumer is None:
            return []
        pel = consumer.pel
    else:
        pel = g.pel
    now = c.core.now_ms
    out = []
    for eid in pel.from_id(start):
        if not count:
            break
        if eid > end:
            break
        nack = pel[eid]
        if minidle and now - nack.delivery_time < minidle:
            continue
        count -= 1
        assert nack.consumer is not None
        out.append([id_str(eid), nack.consumer.name, max(0, now - nack.delivery_time),
                    nack.delivery_count])
    return out


# -- XCLAIM / XAUTOCLAIM ---------------------------------------------------------------------------

def _claim_command(name: str, summary: str, since: str) -> Callable[[Handler], Handler]:
    """XCLAIM's and XAUTOCLAIM's registration."""
    return command(name, -6, "write fast", keys=(1, 1, 1), group="stream", summary=summary,
                   since=since, acl="stream")


def _min_idle(arg: bytes, name: str) -> int:
    """XCLAIM's and XAUTOCLAIM's (``name``) min-idle-time, a negative one taken as 0."""
    return max(0, parse_int(arg, f"ERR Invalid min-idle-time argument for {name}"))


@_claim_command("xclaim", "Changes (or acquires) ownership of a message in a consumer group, as "
                "if the message was delivered to the specified consumer.", "5.0.0")
def xclaim(c: Any, argv: list[bytes]) -> object:
    key, gname = argv[1], argv[2]
    s, g = _stream_group(c, key, gname)
    minidle = _min_idle(argv[4], "XCLAIM")
    n = len(argv)
    ids: list[int] = []
    j = 5
    while j < n:
        try:
            ids.append(parse_id(argv[j], 0, strict=True)[0])
        except ReplyError:
            break
        j += 1
    last_id_arg = j - 1
    now = c.core.now_ms
    last_id = 0
    force = justid = False
    retrycount = -1
    deliverytime = -1
    while j < n:
        more = n - 1 - j
        opt = argv[j].lower()
        if opt == b"force":
            force = True
        elif opt == b"justid":
            justid = True
        elif opt == b"idle" and more:
            j += 1
            deliverytime = now - parse_int(argv[j], "ERR Invalid IDLE option argument for XCLAIM")
        elif opt == b"time" and more:
            j += 1
            deliverytime = parse_int(argv[j], "ERR Invalid TIME option argument for XCLAIM")
        elif opt == b"retrycount" and more:
            j += 1
            retrycount = parse_int(argv[j],
                                   "ERR Invalid RETRYCOUNT option argument for XCLAIM")
        elif opt == b"lastid" and more:
            j += 1
            last_id = parse_id(argv[j], 0, strict=True)[0]
        else:
            raise ReplyError(f"ERR Unrecognized XCLAIM option '{_c(argv[j])}'")
        j += 1
    props: list[list[bytes]] = []
    propagate_last_id = False
    if last_id > g.last_id:
        g.last_id = last_id
        propagate_last_id = True
    if deliverytime != -1:
        if deliverytime < 0 or deliverytime > now:
            deliverytime = now
    else:
        deliverytime = now
    consumer: Consumer | None = None
    name = argv[3]
    out: list[Any] = []
    for k in range(5, last_id_arg + 1):
        eid = ids[k - 5]
        nack = g.pel.get(eid)
        fv = s.get(eid)
        if fv is None:
            if nack is not None:
                props.append(_xclaim_argv(key, gname, g, argv[k], nack))
                propagate_last_id = False
                _drop_pending(g, eid, nack)
            continue
        if force and nack is None:
            nack = Nack(now, 1, None)
            g.pel[eid] = nack
        if nack is None:
            continue
        if nack.consumer is not None and minidle and now - nack.delivery_time < minidle:
            continue
        if consumer is None:
            consumer = _seen_consumer(c, key, g, name, now)
        nack.delivery_time = deliverytime
        if retrycount >= 0:
            nack.delivery_count = retrycount
        elif not justid:
            nack.delivery_count += 1
        _move_pending(consumer, eid, nack)
        out.append(id_str(eid) if justid else [id_str(eid), fv])
        props.append(_xclaim_argv(key, gname, g, argv[k], nack))
        propagate_last_id = False
    if propagate_last_id:
        props.append([b"XGROUP", b"SETID", key, gname, id_str(g.last_id), b"ENTRIESREAD",
                      b"%d" % g.entries_read])
    _emit(c, props)
    return out


def _seen_consumer(c: Any, key: bytes, g: Group, name: bytes, now: int) -> Consumer:
    """The group's consumer ``name``, created if new, seen now (XCLAIM, XAUTOCLAIM)."""
    consumer = g.consumers.get(name)
    if consumer is None:
        consumer = g.consumers[name] = Consumer(name, now)
        notify(c, NOTIFY_STREAM, b"xgroup-createconsumer", key)
    else:
        consumer.seen_time = now
    return consumer


def _move_pending(consumer: Consumer, eid: int, nack: Nack) -> None:
    """A pending entry changes hands: out of its old consumer's PEL, into ``consumer``'s."""
    if nack.consumer is not consumer:
        if nack.consumer is not None:
            nack.consumer.pel.pop(eid, None)
        consumer.pel[eid] = nack
        nack.consumer = consumer


def _drop_pending(g: Group, eid: int, nack: Nack) -> None:
    """A pending entry whose stream entry is gone leaves the group's and its consumer's PEL."""
    del g.pel[eid]
    if nack.consumer is not None:
        nack.consumer.pel.pop(eid, None)


@_claim_command("xautoclaim", "Changes (or acquires) ownership of messages in a consumer group, "
                "as if the messages were delivered to the specified consumer.", "6.2.0")
def xautoclaim(c: Any, argv: list[bytes]) -> object:
    key, gname = argv[1], argv[2]
    minidle = _min_idle(argv[4], "XAUTOCLAIM")
    start, ex = parse_interval(argv[5], 0)
    if ex:
        if start == MAX_ID:
            raise ReplyError("ERR invalid start ID for the interval")
        start += 1
    count = 100
    justid = False
    j = 6
    n = len(argv)
    max_count = ((1 << 63) - 1) // 16
    while j < n:
        more = n - 1 - j
        if _is(argv[j], b"count") and more:
            try:
                count = parse_int(argv[j + 1])
            except ReplyError:
                raise ReplyError("ERR COUNT must be > 0") from None
            if not 1 <= count <= max_count:
                raise ReplyError("ERR COUNT must be > 0")
            j += 1
        elif _is(argv[j], b"justid"):
            justid = True
        else:
            raise ReplyError(SYNTAX)
        j += 1
    s, g = _stream_group(c, key, gname)
    attempts = count * 10
    now = c.core.now_ms
    name = argv[3]
    consumer: Consumer | None = None
    pel_ids = g.pel.from_id(start)
    pos = 0
    claimed: list[Any] = []
    deleted: list[bytes] = []
    props: list[list[bytes]] = []
    while attempts and count and pos < len(pel_ids):
        attempts -= 1
        eid = pel_ids[pos]
        pos += 1
        nack = g.pel[eid]
        fv = s.get(eid)
        if fv is None:
            props.append(_xclaim_argv(key, gname, g, id_str(eid), nack))
            _drop_pending(g, eid, nack)
            deleted.append(id_str(eid))
            count -= 1
            continue
        if minidle and now - nack.delivery_time < minidle:
            continue
        if consumer is None:
            consumer = _seen_consumer(c, key, g, name, now)
        nack.delivery_time = now
        if not justid:
            nack.delivery_count += 1
        _move_pending(consumer, eid, nack)
        claimed.append(id_str(eid) if justid else [id_str(eid), fv])
        count -= 1
        props.append(_xclaim_argv(key, gname, g, id_str(eid), nack))
    cursor = id_str(pel_ids[pos]) if pos < len(pel_ids) else b"0-0"
    _emit(c, props)
    return [cursor, claimed, deleted]


# -- XINFO ------------------------------------------------------------------------------------------

container("xinfo", group="stream", summary="A container for stream introspection commands",
          since="5.0.0")


def _pending(pel: Pel, count: int) -> list[tuple[int, Nack]]:
    """A PEL's first ``count`` entries in ID order (all of them for 0): XINFO STREAM FULL's."""
    return [(eid, pel[eid]) for eid in pel.from_id(0, count)]


def _xinfo_stream(c: Any, argv: list[bytes]) -> object:
    s = _xinfo_key(c, argv)             # the key first, then the options (xinfoCommand)
    full = True
    count = 10
    opts = argv[3:]
    if not opts:
        full = False
    else:
        if len(opts) not in (1, 3) or not _is(opts[0], b"full"):
            raise subcommand_error(argv)
        if len(opts) == 3:
            if not _is(opts[1], b"count"):
                raise subcommand_error(argv)
            count = parse_int(opts[2])
            if count < 0:
                count = 10
    items: list[tuple[object, object]] = [
        (b"length", s.length),
        (b"radix-tree-keys", len(s.nodes)),
        (b"radix-tree-nodes", s.rax_nodes()),
        (b"last-generated-id", id_str(s.last_id)),
        (b"max-deleted-entry-id", id_str(s.max_deleted)),
        (b"entries-added", s.entries_added),
        (b"recorded-first-entry-id", id_str(s.first_id)),
    ]
    if not full:
        items.append((b"groups", len(s.groups)))
        first = _first(s.range(0, MAX_ID), 1)
        last = _first(s.range(0, MAX_ID, rev=True), 1)
        items.append((b"first-entry", _entry(*first[0]) if first else None))
        items.append((b"last-entry", _entry(*last[0]) if last else None))
        return Map(items)
    items.append((b"entries", [_entry(e, fv) for e, fv in _first(s.range(0, MAX_ID), count)]))
    groups = []
    for gname in sorted(s.groups):
        g = s.groups[gname]
        pel = []
        for eid, nack in _pending(g.pel, count):
            assert nack.consumer is not None
            pel.append([id_str(eid), nack.consumer.name, nack.delivery_time,
                        nack.delivery_count])
        consumers = []
        for cname in sorted(g.consumers):
            cons = g.consumers[cname]
            cpel = [[id_str(eid), nack.delivery_time, nack.delivery_count]
                    for eid, nack in _pending(cons.pel, count)]
            consumers.append(Map([(b"name", cname), (b"seen-time", cons.seen_time),
                                  (b"pel-count", len(cons.pel)), (b"pending", cpel)]))
        groups.append(Map([
            (b"name", gname), (b"last-delivered-id", id_str(g.last_id)),
            (b"entries-read", None if g.entries_read == SCG_INVALID_ENTRIES_READ
             else g.entries_read),
            (b"lag", s.lag(g)), (b"pel-count", len(g.pel)), (b"pending", pel),
            (b"consumers", consumers)]))
    items.append((b"groups", groups))
    return Map(items)


@command("xinfo|stream", -3, "readonly", keys=(2, 2, 1), group="stream",
         summary="Get information about a stream", since="5.0.0", acl="stream")
def xinfo_stream(c: Any, argv: list[bytes]) -> object:
    return _xinfo_stream(c, argv)


def _xinfo_key(c: Any, argv: list[bytes]) -> Stream:
    s = _stream_read(c, argv[2])
    if s is None:
        raise ReplyError("ERR no such key")
    return s


@command("xinfo|groups", 3, "readonly", keys=(2, 2, 1), group="stream",
         summary="List the consumer groups of a stream", since="5.0.0", acl="stream")
def xinfo_groups(c: Any, argv: list[bytes]) -> object:
    s = _xinfo_key(c, argv)
    out = []
    for gname in sorted(s.groups):
        g = s.groups[gname]
        out.append(Map([
            (b"name", gname), (b"consumers", len(g.consumers)), (b"pending", len(g.pel)),
            (b"last-delivered-id", id_str(g.last_id)),
            (b"entries-read", None if g.entries_read == SCG_INVALID_ENTRIES_READ
             else g.entries_read),
            (b"lag", s.lag(g))]))
    return out


@command("xinfo|consumers", 4, "readonly", keys=(2, 2, 1), group="stream",
         summary="List the consumers in a consumer group", since="5.0.0", acl="stream")
def xinfo_consumers(c: Any, argv: list[bytes]) -> object:
    s = _xinfo_key(c, argv)
    g = s.groups.get(argv[3])
    if g is None:
        raise ReplyError(f"NOGROUP No such consumer group '{_c(argv[3])}' for key name "
                         f"'{_c(argv[2])}'")
    now = c.core.now_ms
    return [Map([(b"name", name), (b"pending", len(cons.pel)),
                 (b"idle", max(0, now - cons.seen_time))])
            for name, cons in sorted(g.consumers.items())]


help_command("xinfo", (
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
), group="stream", since="5.0.0", acl="stream")
