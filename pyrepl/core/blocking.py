"""Blocked clients: what each one waits for, the keys it waits on, its deadline, serving it.

Theory of operation (Redis 7.0's blocked.c and timeout.c). A command that cannot answer yet
hands its client a :class:`Blocked` record (:meth:`Blocking.block`) and returns ``BLOCKED``;
the client's later commands stay in its query buffer (``Client.process`` stops while
``client.blocked`` is set) until ``ServerCore.unblock`` answers it. ``btype`` names the kind as
Redis's BLOCKED_*: ``wait`` (WAIT), ``shutdown`` (SHUTDOWN waiting for replicas) and the kinds
blocked on keys, ``list`` and ``zset`` (``stream`` next), whose record is a :class:`KeyWait`.

Keys: ``waiters[(db, key)]`` holds the clients blocked on a key, first blocked first. Redis
marks a key ready when a value is *added* under it (dbAdd: a push creating the list, RENAME,
MOVE, RESTORE, SORT STORE, and SWAPDB's rescan). We find those moments without a hook in the
keyspace: after every write that changed something (``ServerCore.call``: one test of
``core.keys_waited`` while nobody waits) each waited key's value is compared, by identity, with
the one seen there last, and a new value makes the key ready (queued once, in order). Once the
top-level command has been propagated (:meth:`Blocking.after_write` flushes it; for EXEC, the
flush of the whole transaction), :meth:`Blocking.serve_ready` offers
each ready key's value to its waiters in FIFO order through the record's ``serve`` (the command
module's pop, which also propagates what Redis rewrites the command to); a waiter of another
kind than the value's type is skipped, and a pop that deleted the key ends the key's turn.
Keys a serve makes ready (BLMOVE's push) are served in the same pass, after the others.

Deadlines are absolute ms (0: none), checked by the cron (:meth:`Blocking.expire`, Redis's
handleBlockedClientsTimeout): a record times out once ``deadline < now``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pyrepl.intparse import LLONG_MAX, LLONG_MIN
from pyrepl.keyspace.db import of_kind
from pyrepl.longdouble import parse_long_double, round_long_double
from pyrepl.resp.types import NULL_ARRAY, ReplyError

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.core.ports import BlockingHost
    from pyrepl.keyspace.db import Database

#: What a ``KeyWait.serve`` returns to leave its client blocked (nothing for it in the value).
NOT_SERVED: Any = object()

TIMEOUT_NOT_FLOAT = "ERR timeout is not a float or out of range"
TIMEOUT_NEGATIVE = "ERR timeout is negative"
UNBLOCKED_BY_CLIENT = "UNBLOCKED client unblocked via CLIENT UNBLOCK"
UNBLOCKED_BY_ROLE = ("UNBLOCKED force unblock from blocking operation, instance state changed "
                     "(master -> replica?)")


def parse_timeout(arg: bytes, now_ms: int) -> int:
    """getTimeoutFromObjectOrReply(UNIT_SECONDS): the deadline in ms, 0 for none.

    As Redis on x86-64: a long double times 1000, ceil'd and cast to long long (a value out of
    range, inf included, becomes LLONG_MIN: "negative"); the deadline wraps like a long long."""
    v = parse_long_double(arg)
    if v is None:
        raise ReplyError(TIMEOUT_NOT_FLOAT)
    ms = LLONG_MIN
    if isinstance(v, Fraction):
        scaled = round_long_double(v * 1000)
        if scaled is not None:
            ms = math.ceil(scaled)
            if not LLONG_MIN <= ms <= LLONG_MAX:
                ms = LLONG_MIN
    if ms < 0:
        raise ReplyError(TIMEOUT_NEGATIVE)
    if ms == 0:
        return 0
    return (ms + now_ms + (1 << 63)) % (1 << 64) - (1 << 63)


class Blocked:
    """A blocked client's record (Redis's btype and bpop.timeout). ``on_timeout`` gives the
    reply at the deadline or on CLIENT UNBLOCK TIMEOUT (a null array when not given)."""

    __slots__ = ("btype", "deadline", "on_timeout", "call_argv", "call_us")

    def __init__(self, btype: str, deadline: int = 0,
                 on_timeout: Callable[[], object] | None = None) -> None:
        self.btype = btype
        self.deadline = deadline
        self.on_timeout = on_timeout
        # The call that blocked, when it was timed (dispatch.timed_call): its arguments and
        # microseconds, for the slow log entry Redis makes once the client is served.
        self.call_argv: list[bytes] | None = None
        self.call_us = 0

    def timeout_reply(self) -> object:
        return NULL_ARRAY if self.on_timeout is None else self.on_timeout()


class ReplicaWait(Blocked):
    """WAIT: the replication offset to be acknowledged and by how many replicas."""

    __slots__ = ("offset", "numreplicas")

    def __init__(self, offset: int, numreplicas: int, deadline: int,
                 on_timeout: Callable[[], object]) -> None:
        super().__init__("wait", deadline, on_timeout)
        self.offset = offset
        self.numreplicas = numreplicas


#: serve(client, key, value) -> the client's reply (or NOT_SERVED); it pops from ``value`` and
#: propagates with ``core.also_propagate``; a ReplyError it raises is the client's reply.
ServeFn = Callable[["Client", bytes, Any], object]


class KeyWait(Blocked):
    """Blocked until one of ``keys`` (in ``db``) gets a value of type ``vtype``. ``gone``, when
    given, is the reply once a waited key is deleted or stops holding a ``vtype`` (XREADGROUP:
    its group went with the key; Redis's unblockDeletedStreamReadgroupClients)."""

    __slots__ = ("db", "keys", "vtype", "serve", "gone")

    def __init__(self, btype: str, db: Database, keys: list[bytes],
                 vtype: type | frozenset[type], deadline: int, serve: ServeFn,
                 gone: object = None) -> None:
        super().__init__(btype, deadline)
        self.db = db
        self.keys = list(dict.fromkeys(keys))   # a key named twice is waited on once
        self.vtype = vtype
        self.serve = serve
        self.gone = gone


class _Waiters:
    """The clients blocked on one key, and the value last seen under it (by identity)."""

    __slots__ = ("clients", "seen")

    def __init__(self, seen: object) -> None:
        self.clients: list[Client] = []
        self.seen = seen


class Blocking:
    """Every blocked client of a server, the keys waited on and the keys ready to serve."""

    def __init__(self, core: BlockingHost) -> None:
        self.core = core
        self.clients: dict[Client, None] = {}      # blocked clients, in the order they blocked
        self.waiters: dict[tuple[Database, bytes], _Waiters] = {}
        self.ready: deque[tuple[Database, bytes]] = deque()
        self._queued: set[tuple[Database, bytes]] = set()
        self._deferring = 0                         # >0: unblocked clients resume later
        self.serving = False
        self._resume: list[Client] = []

    # -- blocking and unblocking ------------------------------------------------------------
    def block_for_acks(self, c: Client, offset: int, numreplicas: int, deadline: int,
                       on_timeout: Callable[[], object]) -> None:
        """WAIT: ``c`` blocked until ``numreplicas`` replicas acked ``offset`` (the
        replication layer unblocks it, or ``on_timeout`` answers at ``deadline``)."""
        self.block(c, ReplicaWait(offset, numreplicas, deadline, on_timeout))

    @staticmethod
    def acks_awaited(c: Client) -> ReplicaWait | None:
        """The WAIT ``c`` is blocked in, if it is (the offset and how many replicas)."""
        b = c.blocked
        return b if isinstance(b, ReplicaWait) else None

    def block(self, c: Client, record: Blocked) -> None:
        """blockClient / blockForKeys."""
        c.blocked = record
        self.clients[c] = None
        if isinstance(record, KeyWait):
            db = record.db
            for key in record.keys:
                k = (db, key)
                w = self.waiters.get(k)
                if w is None:
                    w = self.waiters[k] = _Waiters(db.data.peek(key))
                w.clients.append(c)
            self.core.keys_waited = True

    def release(self, c: Client) -> None:
        """Forget a client's blocked state (unblockClient's bookkeeping; no reply)."""
        record = c.blocked
        if record is None:
            return
        c.blocked = None
        self.clients.pop(c, None)
        if isinstance(record, KeyWait):
            db = record.db
            for key in record.keys:
                k = (db, key)
                w = self.waiters.get(k)
                if w is None:
                    continue
                try:
                    w.clients.remove(c)
                except ValueError:
                    pass
                if not w.clients:
                    del self.waiters[k]
            if not self.waiters:
                self.core.keys_waited = False
                self.ready.clear()
                self._queued.clear()

    def resume(self, c: Client) -> None:
        """Run what an unblocked client pipelined meanwhile: at once, or after the current
        serving / timeout pass (Redis's processUnblockedClients in beforeSleep)."""
        if self._deferring:
            self._resume.append(c)
        else:
            c.process()

    def _resume_deferred(self) -> None:
        while self._resume and not self._deferring:
            c = self._resume.pop(0)
            if c.blocked is None and not c.closed:
                c.process()

    def count(self) -> int:
        """INFO blocked_clients."""
        return len(self.clients)

    def in_timeout_table(self) -> int:
        """INFO clients_in_timeout_table: blocked clients with a deadline."""
        return sum(1 for c in self.clients if c.blocked is not None and c.blocked.deadline)

    # -- ready keys ---------------------------------------------------------------------------
    def after_write(self, c: Client) -> None:
        """A write by ``c`` changed the dataset while keys are waited on: queue the keys it
        made ready and serve them after the write is propagated (processCommand's
        handleClientsBlockedOnKeys, after ``c.woff`` is taken). Inside EXEC the serving waits
        for the transaction's flush (so the EXEC client's WAIT offset counts the pops too)."""
        self.note_writes()
        if not self.ready or self.serving:
            return
        core = self.core
        if not core.in_nested_call:
            core.flush_propagation()
            if core.replication is not None:
                c.woff = core.replication.master_repl_offset
            self.serve_ready()
        else:
            core.serve_after_flush = True   # (core.flush_propagation calls the next method)

    def serve_after_flush(self) -> None:
        """After ``core.flush_propagation`` once an EXEC has made keys ready (see
        after_write)."""
        if not self.serving:
            self.serve_ready()

    def signal(self, db: Database, key: bytes) -> None:
        """signalKeyAsReady for a value changed in place (XADD appends to the same stream
        object, which ``note_writes`` cannot see)."""
        k = (db, key)
        if k in self.waiters and k not in self._queued:
            self._queued.add(k)
            self.ready.append(k)

    def note_writes(self) -> None:
        """After a write: queue the waited keys that got a new value (signalKeyAsReady)."""
        queued = self._queued
        for k, w in self.waiters.items():
            v = k[0].data.peek(k[1])
            if v is not w.seen:
                w.seen = v
                if k not in queued:     # (a deleted key too: its XREADGROUP waiters go)
                    queued.add(k)
                    self.ready.append(k)

    def serve_ready(self) -> None:
        """handleClientsBlockedOnKeys: serve the ready keys' waiters, in Redis's order, at the
        time of now (outside a command Redis's expiry reads the clock: a key that expired
        while a transaction ran, DEBUG SLEEP in it, serves no one)."""
        self.core.refresh_clock()
        ready = self.ready
        self._deferring += 1
        self.serving = True
        try:
            while ready:
                k = ready.popleft()
                self._queued.discard(k)
                w = self.waiters.get(k)
                if w is None:
                    continue
                db, key = k
                value = db.lookup(key)   # an expired key goes (and its DEL is propagated)
                if value is not None:
                    self._serve_key(db, key, value, w)
                if w.clients:
                    self._unblock_gone(key, value, w)
                w.seen = db.data.peek(key)
        finally:
            self.serving = False
            self._deferring -= 1
        self._resume_deferred()

    def _serve_key(self, db: Database, key: bytes, value: Any, w: _Waiters) -> None:
        core = self.core
        for c in list(w.clients):
            record = c.blocked
            if not isinstance(record, KeyWait) or not of_kind(value, record.vtype):
                continue
            t0 = core.clock_ns()
            try:
                reply = record.serve(c, key, value)
            except ReplyError as e:
                core.error_reply(c, str(e), c.last_cmd, rejected=False)
                reply = e
            if reply is NOT_SERVED:
                continue
            core.unblock(c, reply)
            if record.call_argv is not None:   # (updateStatsOnUnblock: the call was timed)
                core.unblocked_stats(c, record.call_argv, record.call_us,
                                     (core.clock_ns() - t0) // 1000)
            if core.propagation_pending:
                core.flush_propagation()
            self.note_writes()      # what the serve created (BLMOVE's push) is ready now
            if db.data.peek(key) is not value:
                break               # the pop emptied and deleted the key

    def _unblock_gone(self, key: bytes, value: Any, w: _Waiters) -> None:
        """The waiters with a ``gone`` reply, when the key is not of their type any more."""
        for c in list(w.clients):
            record = c.blocked
            if isinstance(record, KeyWait) and record.gone is not None and \
                    not of_kind(value, record.vtype):
                self.core.error_reply(c, str(record.gone), c.last_cmd, rejected=False)
                self.core.unblock(c, record.gone)

    # -- timeouts, CLIENT UNBLOCK, role change ---------------------------------------------
    def expire(self, now_ms: int) -> None:
        """handleBlockedClientsTimeout: answer the clients whose deadline passed, earliest
        first."""
        due = [c for c in self.clients
               if c.blocked is not None and c.blocked.deadline and c.blocked.deadline < now_ms]
        if not due:
            return
        due.sort(key=lambda c: (c.blocked.deadline, c.id))
        self._deferring += 1
        try:
            for c in due:
                record = c.blocked
                if record is not None:
                    self.core.unblock(c, record.timeout_reply())
        finally:
            self._deferring -= 1
        self._resume_deferred()

    def client_unblock(self, target: Client | None, error: bool) -> bool:
        """CLIENT UNBLOCK: answer ``target`` as at its timeout, or with -UNBLOCKED. False when
        it is not blocked (or blocked by SHUTDOWN, which has no timeout reply)."""
        if target is None or target.blocked is None or target.blocked.btype == "shutdown":
            return False
        core = self.core
        cmd = target.last_cmd
        record = target.blocked
        if error:
            core.error_reply(target, UNBLOCKED_BY_CLIENT, None, rejected=False)
            core.unblock(target, ReplyError(UNBLOCKED_BY_CLIENT))
        else:
            core.unblock(target, record.timeout_reply())
        if cmd is not None:   # updateStatsOnUnblock(..., had_errors=1): one failed call
            core.command_stat(cmd).failed += 1
        if record.call_argv is not None:   # (after unblockClient reset its arguments: Redis
            # 7.0 logs the entry with none)
            core.unblocked_stats(target, [], record.call_us, 0)
        return True

    def disconnect_all(self) -> None:
        """disconnectAllBlockedClients: the server turned into a replica; every blocked client
        gets -UNBLOCKED and is closed after it (SHUTDOWN's waiter stays). A client postponed
        by a pause stays too (BLOCKED_POSTPONE): its command has not started, and runs (or
        is redirected) when the pause ends, as a manual failover's clients of the old master
        are (cluster/10-manual-failover)."""
        core = self.core
        for c in list(self.clients):
            record = c.blocked
            if record is None or record.btype in ("shutdown", "postpone"):
                continue
            core.error_reply(c, UNBLOCKED_BY_ROLE, None, rejected=False)
            c.close_after_reply = True
            core.unblock(c, ReplyError(UNBLOCKED_BY_ROLE))
