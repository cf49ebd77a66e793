"""Propagation: what a write hands to the replication stream and the AOF (Redis's
``alsoPropagate`` / ``propagatePendingCommands``).

``call`` (pyrepl/core/dispatch.py) queues a write that changed the dataset in ``core._pending``
(as itself, or as the form its handler set in ``Client.propagate_argv``, e.g. EXPIRE ->
PEXPIREAT); ``flush_propagation`` hands the queue to ``repl_feed`` after the top-level call,
several commands wrapped in MULTI/EXEC. A pipelined run of plain writes propagates as *spans*:
the bytes the requests arrived as, fed at once (``end_span``). ``stream_live`` says whether any
of it goes anywhere (a backlog on a master, or the AOF). These functions are
:class:`ServerCore`'s methods (bound in its class body).
"""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING, Any

from pyrepl.aof.feed import FeedFanout
from pyrepl.core.client import Client
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore

#: Where a queued command goes (Redis's PROPAGATE_AOF / PROPAGATE_REPL). An entry of
#: ``core._pending`` is ``(db, argv)`` for both, ``(db, argv, target)`` for one of them (a
#: script's redis.set_repl).
PROPAGATE_AOF, PROPAGATE_REPL = 1, 2
PROPAGATE_ALL = PROPAGATE_AOF | PROPAGATE_REPL
_MULTI, _EXEC = encode_command([b"MULTI"]), encode_command([b"EXEC"])


def propagate_call(core: ServerCore, c: Client, argv: list[bytes], changed: bool) -> None:
    """What ``call`` and ``execute`` propagate after a write that did not propagate as it
    arrived: its rewritten form (``propagate_argv``) or itself when it changed the
    dataset, with what it queued meanwhile."""
    pa = c.propagate_argv
    if changed or pa is not None:
        if pa is None:
            core._pending.append((c.db.id, argv))
        elif pa:   # (empty: it propagated its effects itself)
            core._pending.append((c.db.id, pa))
        c.propagate_argv = None
    if core._pending:
        core.propagate_now(c, argv)


def propagate_now(core: ServerCore, c: Client, argv: list[bytes] | None = None) -> None:
    """Flush what the call queued; the client's ``woff`` (WAIT) is the offset after it,
    as ``execute`` leaves it."""
    core.flush_propagation(c, argv)
    if core.replication is not None:
        c.woff = core.replication.master_repl_offset


def end_span(core: ServerCore, c: Client, reqs: list[list[bytes]], a: int, b: int, db_id: int) -> int:
    """Propagate requests ``a`` to ``b - 1`` of a run as the bytes they arrived as (the
    request ``gets()`` returned last is 0), all at once when the replication layer takes
    a span (``repl_feed_span``; first in C, ``Replication.feed_span_c``, which takes a
    span that goes into the backlog's tail block at once); ``woff`` as
    ``propagate_now``. Returns -1 (no span)."""
    repl = core.replication
    # (feed_span_c is a plain function in a class variable: not bound, hence repl passed; a
    # run comes only from the fast reader, the one with raw_ahead)
    if core.aof_on or repl is None or \
            not repl.feed_span_c(repl, db_id, c.reader, a, b):  # type: ignore[call-arg,arg-type]
        data, ends = c.reader.raw_ahead(a, b)  # type: ignore[attr-defined]
        span = core.repl_feed_span
        if span is not None:
            span(db_id, data, ends)
        else:   # (a replication layer that takes one command at a time: the tests' fakes)
            feed = core.repl_feed
            assert feed is not None
            start = 0
            for argv, end in zip(reqs[a:b], ends, strict=True):
                feed(db_id, argv, data[start:end])
                start = end
    if repl is not None:
        c.woff = repl.master_repl_offset
    return -1


def should_propagate(core: ServerCore, target: int) -> bool:
    """shouldPropagate: whether anything takes a command for ``target`` (the AOF when on; the
    replication stream on a master with a backlog)."""
    if target & PROPAGATE_AOF and core.aof_on:
        return True
    if not target & PROPAGATE_REPL:
        return False
    repl = core.replication
    if repl is None:    # (a core whose feed is the stream itself: the tests' taps)
        return core.stream_live
    return repl.backlog is not None and repl.replica.master_host is None


def also_propagate(core: ServerCore, db_id: int, argv: list[bytes]) -> None:
    core._pending.append((db_id, argv))


def propagate_internal(core: ServerCore, db_id: int, argv: list[bytes]) -> None:
    """Propagate a command the server itself generated (expired key DEL)."""
    core._pending.append((db_id, argv))
    if core._call_depth == 0:
        core.flush_propagation()


def refresh_stream_live(core: ServerCore) -> None:
    """``stream_live``: whether a write's propagation goes anywhere (a backlog on a master,
    or the AOF); while it is False the core keeps no pending propagation at all (the write
    path's cheapest case). With AOF on the feeds are the fan-out (pyrepl.aof.feed)."""
    repl = core.replication
    core.aof_on = aof_on = core.aof.on
    core.stream_live = aof_on or (repl is not None and repl.backlog is not None
                                  and repl.replica.master_host is None)
    if aof_on:
        fan = FeedFanout(core.aof.writer, repl)
        core.repl_feed, core.repl_feed_span = fan.feed, fan.feed_span
        core.feed_aof_only, core.feed_repl_only = fan.feed_aof, fan.feed_repl
    elif repl is not None:
        core.repl_feed, core.repl_feed_span = repl.feed, repl.feed_span
        core.feed_aof_only, core.feed_repl_only = None, repl.feed
    else:
        core.repl_feed = core.repl_feed_span = None
        core.feed_aof_only = core.feed_repl_only = None


def flush_propagation(core: ServerCore, c: Client | None = None,
                      request: list[bytes] | None = None) -> None:
    """Hand what the last top-level call changed to the replication layer. When that is
    exactly ``request``, the command ``c`` sent, the bytes it arrived as are passed along
    if its reader proved them canonical (a slice instead of an encode)."""
    pending = core._pending
    core._pending = []
    feed = core.repl_feed
    if feed is None or not pending:
        pass
    elif len(pending) == 1 and len(pending[0]) == 2:
        db_id, argv = pending[0]
        feed(db_id, argv, c.reader.raw_last(argv) if argv is request and c else None)
    else:
        _flush_transaction(core, pending, feed)
    if core.serve_after_flush:
        core.serve_after_flush = False
        core.blocking.serve_after_flush()


def _flush_transaction(core: ServerCore, pending: list[tuple[Any, ...]], feed: Any) -> None:
    """More than one write, wrapped in MULTI/EXEC. In one db, none of them targeted and AOF off
    (EXEC's, a script's effects): one span, the bytes and the backlog's blocks of feeding
    MULTI, each command and EXEC one by one (with AOF on, one by one: each may take its own
    timestamp annotation, as in Redis)."""
    db_id = pending[0][0]
    span = core.repl_feed_span
    parts = [_MULTI]
    if span is not None and not core.aof_on:
        repl = core.replication
        assert repl is not None        # (span is its feed_span)
        if repl.feed_transaction_c(repl, db_id, pending):  # type: ignore[call-arg,arg-type]
            return                     # (all of it in the tail block, in C)
        for p in pending:
            if len(p) != 2 or p[0] != db_id:
                break
            parts.append(encode_command(p[1]))
        else:
            parts.append(_EXEC)
            span(db_id, b"".join(parts), list(accumulate(map(len, parts))))
            return
    if any(len(p) == 3 for p in pending):
        _flush_targeted(core, pending)
        return
    feed(db_id, [b"MULTI"])
    for db_id, argv in pending:
        feed(db_id, argv)
    feed(pending[-1][0], [b"EXEC"])


def _flush_targeted(core: ServerCore, pending: list[tuple[Any, ...]]) -> None:
    """propagatePendingCommands with targets: each command where its target says, the
    MULTI/EXEC around more than one to both (so a replica may get an empty transaction)."""
    feed = core.repl_feed
    assert feed is not None
    aof_only = core.feed_aof_only
    repl_only = core.feed_repl_only or feed   # (a core whose feed is the stream: the taps)

    def one(entry: tuple[Any, ...]) -> None:
        target = entry[2] if len(entry) == 3 else PROPAGATE_ALL
        if target == PROPAGATE_ALL:
            feed(entry[0], entry[1])
        elif target == PROPAGATE_REPL:
            repl_only(entry[0], entry[1])
        elif aof_only is not None:
            aof_only(entry[0], entry[1])

    if len(pending) == 1:
        one(pending[0])
        return
    feed(pending[0][0], [b"MULTI"])
    for entry in pending:
        one(entry)
    feed(pending[-1][0], [b"EXEC"])
