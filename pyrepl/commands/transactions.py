"""Transactions: MULTI EXEC DISCARD WATCH UNWATCH (optimistic locking as in Redis's multi.c).

Theory of operation: while ``in_multi`` the dispatcher queues commands (replying +QUEUED) and
an error at queueing time (unknown command, arity) marks the transaction so EXEC answers
EXECABORT. WATCH registers the client on each key's watcher set in its Database; any write to
such a key (``Database.touch``) sets ``dirty_cas`` and EXEC then answers a null array. A watched
key that expires before EXEC also aborts it, unless it was already expired at WATCH time.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.fastpath import call
from pyrepl.resp.types import NO_REPLY, NULL_ARRAY, OK, ReplyError
from pyrepl.resp.writer import encode


@command("multi", 1, "no-script loading stale fast allow-busy", group="transactions", acl="transaction",
         summary="Starts a transaction.")
def multi(c: Any, argv: list[bytes]) -> object:
    if c.in_multi:
        raise ReplyError("ERR MULTI calls can not be nested")
    c.in_multi = True
    c.multi_queue = []
    c.multi_error = False
    return OK


def _in_multi(c: Any, name: str) -> None:
    """DISCARD's and EXEC's check: outside MULTI, ERR <name> without MULTI."""
    if not c.in_multi:
        raise ReplyError(f"ERR {name} without MULTI")


@command("discard", 1, "no-script loading stale fast allow-busy", group="transactions", acl="transaction",
         summary="Discards a transaction.")
def discard(c: Any, argv: list[bytes]) -> object:
    _in_multi(c, "DISCARD")
    c.discard_transaction()
    return OK


def _watched_key_expired(c: Any) -> bool:
    for db, key, expired_at_watch in c.watched:
        if not expired_at_watch and key in db.data and db.is_expired(key):
            return True
    return False


@command("exec", 1, "no-script loading stale skip-slowlog", group="transactions", acl="transaction",
         summary="Executes all commands in a transaction.")
def exec_(c: Any, argv: list[bytes]) -> object:
    _in_multi(c, "EXEC")
    if c.multi_error:
        c.discard_transaction()
        raise ReplyError("EXECABORT Transaction discarded because of previous errors.")
    if c.dirty_cas or _watched_key_expired(c):
        c.discard_transaction()
        return NULL_ARRAY
    queue = c.multi_queue
    c.in_multi = False
    c.multi_queue = []
    c.unwatch_all()
    core = c.core
    # (READONLY, NOREPLICAS and MASTERDOWN were checked on EXEC with its queue, as Redis's
    # processCommand does: none inside, so a REPLICAOF in the transaction does not refuse the
    # writes after it.) The replies go out one by one as Redis's addReply* calls do, so that what a command
    # writes itself (SUBSCRIBE's frames) takes its place in the array.
    c.out.append(b"*%d\r\n" % len(queue))
    core._call_depth += 1  # propagate the transaction as one unit, after it ran
    try:
        run_queue(c, core, queue, 0, c.last_cmd)
    finally:
        core._call_depth -= 1
    return NO_REPLY


def run_queue(c: Any, core: Any, queue: list, start: int, exec_cmd: Any) -> None:
    """EXEC's run of ``queue[start:]``, each reply appended to the client's output (also the
    C handler's rest, pyrepl/commands/_hot.c, once the client is restricted: an AUTH in the
    transaction). An ACL refusal of the last command counts as EXEC's own failure (Redis: an
    error after the last call())."""
    out = c.out
    refused_last = False
    for cmd, args in queue[start:] if start else queue:
        if c.restricted:    # ACL: checked again, the rules may have changed since queued
            err = _acl_refusal(c, cmd, args, queue, exec_cmd)
            refused_last = err is not None
            if err is not None:
                core.error_reply(c, err, None, rejected=False)
                out.append(encode(ReplyError(err), c.proto))
                continue
        out.append(encode(call(core, c, cmd, args), c.proto))   # (core.call)
        refused_last = False
    if refused_last:
        core.command_stat(exec_cmd).failed += 1


def _acl_refusal(c: Any, cmd: Any, args: list[bytes], queue: list, exec_cmd: Any) -> str | None:
    """execCommand's ACL check of a queued command (pyrepl.core.acl): the error, or None. The log
    entry's client info is taken as Redis shows the client inside EXEC: still in MULTI with
    its queue, its last command EXEC."""
    saved = c.in_multi, c.multi_queue, c.last_cmd
    c.in_multi, c.multi_queue, c.last_cmd = True, queue, exec_cmd
    try:
        return c.core.acl.exec_refusal(c, cmd, args)
    finally:
        c.in_multi, c.multi_queue, c.last_cmd = saved


@command("watch", -2, "no-script loading stale fast allow-busy", group="transactions", acl="transaction",
         keys=(1, -1, 1), summary="Monitors changes to keys to determine the execution of a transaction.")
def watch(c: Any, argv: list[bytes]) -> object:
    if c.in_multi:
        raise ReplyError("ERR WATCH inside MULTI is not allowed")
    db = c.db
    for key in argv[1:]:
        if any(d is db and k == key for d, k, _ in c.watched):
            continue
        c.watched.append([db, key, key in db.data and db.is_expired(key)])
        db.watched.setdefault(key, set()).add(c)
    c.mem_quiet = False    # (maxmemory-clients: counted after this read)
    return OK


@command("unwatch", 1, "no-script loading stale fast allow-busy", group="transactions", acl="transaction",
         summary="Forgets about watched keys of a transaction.")
def unwatch(c: Any, argv: list[bytes]) -> object:
    c.unwatch_all()
    return OK
