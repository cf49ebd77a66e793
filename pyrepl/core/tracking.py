"""Client-side caching: CLIENT TRACKING's tables and invalidation messages (Redis 7.0.15's
tracking.c) — sans-io.

Theory of operation. A client turns tracking on with CLIENT TRACKING ON (``enable``); its state
is three ``Client`` slots: ``tracking`` (the ``T_*`` bits below, 0 while off),
``tracking_redir`` (the REDIRECT client id, 0 for none) and ``tracking_prefixes`` (its BCAST
prefixes, sorted). Two tables are kept here, as Redis's ``TrackingTable`` and ``PrefixTable``:

* default mode: ``table`` maps a key to the ids of the clients that read it (``remember``,
  called by the core after a ``readonly`` command: Redis's trackingRememberKeys in call(),
  with OPTIN/OPTOUT and CLIENT CACHING's one-command lifetime; a read inside a script remembers
  the keys its caller declared, as Redis does). A modification (``key_modified``, from
  ``Database.touch``: Redis's signalModifiedKey -> trackingInvalidateKey) sends each of those
  clients one invalidation and forgets the key; a flush (``flushed``, from ``Database.flush``)
  sends every tracking client a null one and empties the table. ``tracking-table-max-keys``
  bounds the table: past it random keys are evicted with an invalidation (``limit``).
* BCAST mode: ``prefixes`` maps a prefix to the clients registered for it and the keys under
  it modified since the last batch (with who modified each, for NOLOOP); ``broadcast`` sends
  them, sorted, one message per prefix and client (Redis's trackingBroadcastInvalidationMessages
  in beforeSleep; here at the end of every top-level command and of the cron's tick).

Delivery (``_message``: sendTrackingMessage): a RESP3 client gets ``>2 invalidate <keys>``; a
client with REDIRECT has it sent to the other client — as that push when it speaks RESP3, as a
``message`` on ``__redis__:invalidate`` when it is a RESP2 client in pub/sub mode — and when
that client is gone the tracking client is flagged ``broken_redirect`` and, in RESP3, told
``tracking-redir-broken``. An invalidation for the client whose command is running (Redis's
``current_client``: set by ``enter``/``leave``, the core's hooks around ``call``) waits for the
end of the command, after its reply (tracking_pending_keys); so do the ones caused while
blocked clients are being served (their replies go out first, as Redis's order). Messages to
other clients go into their output at once.

Cost while nobody tracks: nothing in ``ServerCore.call`` (its hooks sit on the slow path that
every call takes while ``core.tracking_on``, see ``ServerCore.resample``), and
``Database.touch`` tests ``core.tracking_writes`` (True while a client tracks or the table still
holds keys). ``Database.touch`` is reached only when a key is watched (``if db.watched:`` in
the writers), so while ``tracking_writes`` is on every database's ``watched`` dict is a
:class:`_AlwaysTrue` (same contents, always true), which makes every writer call it.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from pyrepl.core.pubsub import Push
from pyrepl.resp.types import BLOCKED, Raw
from pyrepl.resp.writer import encode

if TYPE_CHECKING:
    from pyrepl.commands.table import Command
    from pyrepl.core.client import Client
    from pyrepl.core.ports import TrackingHost

#: What a frame in a client's output costs beyond its bytes: the Push object's header (49),
#: the allocator's rounding and the output list's slot.
FRAME_COST = 72

# Client.tracking bits (Redis's CLIENT_TRACKING_* flags)
T_ON = 1
T_BCAST = 2
T_OPTIN = 4
T_OPTOUT = 8
T_CACHING = 16
T_NOLOOP = 32
T_BROKEN_REDIR = 64

CHANNEL = b"__redis__:invalidate"
_NULL = {2: b"$-1\r\n", 3: b"_\r\n"}
_INVALIDATE = b">2\r\n$10\r\ninvalidate\r\n"
_MESSAGE = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
# Readonly commands whose own keys are not remembered (a read inside them remembers them).
_NOT_REMEMBERED = frozenset(("eval_ro", "evalsha_ro", "fcall_ro"))


def _one_key(key: bytes) -> bytes:
    return b"*1\r\n$%d\r\n%s\r\n" % (len(key), key)


def _keys_array(keys: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(keys) + b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)


def _id_order(client_id: int) -> bytes:
    """Redis's order of the ids of a key (a rax of the ids' little-endian bytes)."""
    return client_id.to_bytes(8, "little")


class _AlwaysTrue(dict):  # type: ignore[type-arg]
    """A database's ``watched`` while tracking is on: true even when empty, so that every
    writer's ``if db.watched: db.touch(key)`` signals the key."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True


class _Prefix:
    """One BCAST prefix (bcastState): its clients, and the keys modified since the last batch
    -> the client that modified each last (None: the server, e.g. an expiry)."""

    __slots__ = ("clients", "keys")

    def __init__(self) -> None:
        self.clients: dict[Client, None] = {}
        self.keys: dict[bytes, Any] = {}


class Tracking:
    def __init__(self, core: TrackingHost) -> None:
        self.core = core
        self.table: dict[bytes, dict[int, None]] = {}     # key -> ids of clients that read it
        self.items = 0                                     # ids across the table
        # The memory the invalidations sent so far took in clients' output (each frame's
        # bytes and FRAME_COST): an eviction cycle leaves its own out of what it freed.
        self.emitted_mem = 0
        self.prefixes: dict[bytes, _Prefix] = {}
        self.clients = 0                                   # tracking_clients
        self.bcast_dirty = False           # keys wait in some prefix for the next batch
        # The top-level command's client (server.current_client), the innermost command a
        # real client runs (a script's caller: its declared keys), invalidations for the
        # current client that wait for its reply, and what enter() saved (re-entrant calls).
        self.current: Client | None = None
        self.cmd_argv: tuple[Command, list[bytes]] | None = None
        self.pending: list[tuple[Client, bytes | None]] = []
        self._saved: list[tuple[Any, Any, Any]] = []
        self._calls = 0                    # calls entered (one null per FLUSHALL, not per db)
        self._flush_call = -1
        self._expired_mark = 0             # stats.expired_keys at the last touch (expiries)
        self._own_for: Client | None = None    # leave(): frames for it follow its reply
        self._own: list[bytes] = []
        self._limit_counter = 0            # trackingLimitUsedSlots' timeout_counter
        self.rng = random.Random()

    # -- state ----------------------------------------------------------------------------
    def _refresh(self) -> None:
        """The core's two flags (and the databases' ``watched`` dicts, see the module doc)."""
        core = self.core
        # (on while a command entered with it on has not left: what waits for its reply)
        on = self.clients > 0 or bool(self._saved)
        if on != core.tracking_on:
            core.tracking_on = on
            core.resample()      # every call takes call()'s slow path while a client tracks
        writes = core.tracking_on or bool(self.table)
        if writes != core.tracking_writes:
            core.tracking_writes = writes
            for db in core.dbs:
                db.watched = _AlwaysTrue(db.watched) if writes else dict(db.watched)
            self._expired_mark = core.stats.expired_keys

    def enable(self, c: Client, redirect: int, options: int, prefixes: list[bytes]) -> None:
        """enableTracking: ``options`` is T_BCAST / T_OPTIN / T_OPTOUT / T_NOLOOP bits."""
        if not c.tracking & T_ON:
            self.clients += 1
        c.tracking = (c.tracking | T_ON) & ~(T_BROKEN_REDIR | T_BCAST | T_OPTIN | T_OPTOUT
                                             | T_NOLOOP)
        c.tracking_redir = redirect
        if options & T_BCAST:
            c.tracking |= T_BCAST
            for p in prefixes or [b""]:
                bs = self.prefixes.get(p)
                if bs is None:
                    bs = self.prefixes[p] = _Prefix()
                if c not in bs.clients:
                    bs.clients[c] = None
                    mine = c.tracking_prefixes or []
                    mine.append(p)
                    mine.sort()
                    c.tracking_prefixes = mine
                    c.mem_quiet = False    # (maxmemory-clients: counted after this read)
        c.tracking |= options & (T_OPTIN | T_OPTOUT | T_NOLOOP)
        self._refresh()

    def disable(self, c: Client) -> None:
        """disableTracking: leave the prefixes; the table forgets the client lazily."""
        if c.tracking & T_BCAST and c.tracking_prefixes:
            for p in c.tracking_prefixes:
                bs = self.prefixes.get(p)
                if bs is not None:
                    bs.clients.pop(c, None)
                    if not bs.clients:
                        del self.prefixes[p]
            c.tracking_prefixes = None
        if c.tracking & T_ON:
            self.clients -= 1
            c.tracking = 0
        self._refresh()

    def prefix_collision(self, c: Client, prefixes: list[bytes]) -> tuple[str | None, bool]:
        """checkPrefixCollisionsOrReply: (the error, whether the command stops). As Redis, an
        overlap inside the list found past its first prefix is reported yet does not stop the
        command (the client gets the error, then OK)."""
        mine = c.tracking_prefixes or []
        for i, p in enumerate(prefixes):
            for q in mine:
                if p.startswith(q) or q.startswith(p):
                    return (f"ERR Prefix '{_text(p)}' overlaps with an existing prefix "
                            f"'{_text(q)}'. Prefixes for a single client must not overlap.",
                            True)
            for q in prefixes[i + 1:]:
                if p.startswith(q) or q.startswith(p):
                    return (f"ERR Prefix '{_text(p)}' overlaps with another provided prefix "
                            f"'{_text(q)}'. Prefixes for a single client must not overlap.",
                            i == 0)
        return None, False

    # -- the core's hooks around call() ---------------------------------------------------
    def enter(self, c: Client, cmd: Command, argv: list[bytes]) -> None:
        """Before a handler runs (only while a client tracks)."""
        self._calls += 1
        if c.id:                       # (not the scripts' pseudo-client)
            self.cmd_argv = (cmd, argv)
        if not self.core.in_nested_call:
            self._saved.append((self.current, self.pending, self.cmd_argv))
            self.current = c
            self.pending = []
            self._expired_mark = self.core.stats.expired_keys

    def leave(self, c: Client, cmd: Command, argv: list[bytes], reply: object) -> object:
        """After a handler ran (only while a client tracks): remember what a read fetched;
        at the top level, send what waited for the reply, the BCAST batch and the table's
        evictions, and end a CLIENT CACHING's effect. Returns the reply, with the frames for
        ``c`` after it."""
        if cmd.readonly and cmd.name not in _NOT_REMEMBERED:
            if c.id:
                if c.tracking & T_ON and not c.tracking & T_BCAST:
                    self.remember(c, cmd, argv)
            else:                      # a read in a script: the caller's declared keys
                eng = getattr(self.core, "scripts", None)
                ctx = eng.ctx if eng is not None else None
                caller = ctx.caller if ctx is not None else None
                if (caller is not None and caller.tracking & T_ON
                        and not caller.tracking & T_BCAST and self.cmd_argv is not None):
                    self.remember(caller, *self.cmd_argv)
        if self.core.in_nested_call or not self._saved:
            return reply
        pending = self.pending
        self.current, self.pending, self.cmd_argv = self._saved.pop()
        self._own_for = c
        own = self._own = []
        try:
            self._send_pending(pending)          # trackingHandlePendingKeyInvalidations
            self.cron()                          # beforeSleep's batch, the table's limit
        finally:
            self._own_for = None
            self._own = []
        if not self._saved and not self.clients:
            self._refresh()
        if c.tracking & T_CACHING and not c.in_multi and not cmd.name.startswith("client|"):
            c.tracking &= ~T_CACHING
        if not own:
            return reply
        if reply is BLOCKED or c.reply_mode:
            c.out.extend(Push(f) for f in own)   # (CLIENT REPLY OFF keeps push frames)
            return reply
        return Raw(encode(reply, c.proto) + b"".join(own))

    def cron(self) -> None:
        """beforeSleep's BCAST batch and the table's limit (serverCron, processCommand): after
        every top-level command and at every tick."""
        if self.pending and self.current is None:      # (caused while no command ran)
            pending, self.pending = self.pending, []
            self._send_pending(pending)
        if self.bcast_dirty:
            self.broadcast()
        max_keys = self.core.config.tracking_table_max_keys
        if max_keys and len(self.table) > max_keys:
            self.limit()
        else:
            self._limit_counter = 0

    def _send_pending(self, pending: list[tuple[Client, bytes | None]]) -> None:
        for target, key in pending:
            if not target.closed:
                self._message(target, _NULL[target.proto] if key is None else _one_key(key))

    def client_closed(self, c: Client) -> None:
        if c.tracking:
            self.disable(c)

    # -- reads ----------------------------------------------------------------------------
    def remember(self, c: Client, cmd: Command, argv: list[bytes]) -> None:
        """trackingRememberKeys."""
        t = c.tracking
        caching = t & T_CACHING
        if (t & T_OPTIN and not caching) or (t & T_OPTOUT and caching):
            return
        positions = cmd.key_positions(argv)
        if not positions or "pubsub" in cmd.flags:
            return
        table = self.table
        cid = c.id
        for i in positions:
            key = argv[i]
            ids = table.get(key)
            if ids is None:
                ids = table[key] = {}
            if cid not in ids:
                ids[cid] = None
                self.items += 1

    # -- writes ---------------------------------------------------------------------------
    def key_modified(self, key: bytes) -> None:
        """trackingInvalidateKey(c, key, bcast=1), ``c`` being who changed it."""
        core = self.core
        expired = core.stats.expired_keys
        if self.prefixes:
            if expired != self._expired_mark:
                who: Any = None            # an expiry: no client changed it
            else:
                eng = getattr(core, "scripts", None)
                who = eng.client if eng is not None and eng.ctx is not None else self.current
            for p, bs in self.prefixes.items():
                if key.startswith(p):
                    bs.keys[key] = who
                    self.bcast_dirty = True
        self._expired_mark = expired
        self.invalidate(key)

    def invalidate(self, key: bytes) -> None:
        """The default-mode part: tell the clients that read ``key`` and forget them."""
        ids = self.table.pop(key, None)
        if ids is None:
            return
        self.items -= len(ids)
        clients = self.core.clients
        current = self.current
        serving = self.core.blocking.serving   # (the served clients' replies come first)
        for cid in (sorted(ids, key=_id_order) if len(ids) > 1 else ids):
            target = clients.get(cid)
            if target is None or target.tracking & (T_ON | T_BCAST) != T_ON:
                continue
            if target is current:
                if not target.tracking & T_NOLOOP:
                    self.pending.append((target, key))
            elif serving:
                self.pending.append((target, key))
            else:
                self._message(target, _one_key(key))
        if not self.table and not self.core.tracking_on:
            self._refresh()

    def flushed(self) -> None:
        """trackingInvalidateKeysOnFlush: a null invalidation to every tracking client (once
        per flushing command: FLUSHALL empties the databases one by one), an empty table."""
        if self.current is not None:
            if self._flush_call == self._calls:
                return
            self._flush_call = self._calls
        if self.clients:
            current = self.current
            for c in list(self.core.clients.values()):
                if c.tracking & T_ON:
                    if c is current:
                        self.pending.append((c, None))
                    else:
                        self._message(c, _NULL[c.proto])
        self.table = {}
        self.items = 0
        self._refresh()

    def limit(self) -> None:
        """trackingLimitUsedSlots: evict random keys (with an invalidation, no broadcast)
        until the table is within tracking-table-max-keys, with an effort that grows while it
        is not."""
        max_keys = self.core.config.tracking_table_max_keys
        effort = 100 * (self._limit_counter + 1)
        keys = self.rng.sample(list(self.table), min(effort, len(self.table)))
        saved, self.current = self.current, None      # as outside a command (cron)
        try:
            for key in keys:
                self.invalidate(key)
                if len(self.table) <= max_keys:
                    self._limit_counter = 0
                    return
        finally:
            self.current = saved
        self._limit_counter += 1

    def broadcast(self) -> None:
        """trackingBroadcastInvalidationMessages."""
        self.bcast_dirty = False
        for p in sorted(self.prefixes):
            bs = self.prefixes[p]
            if not bs.keys:
                continue
            keys = sorted(bs.keys)
            proto = _keys_array(keys)
            for c in list(bs.clients):
                if c.tracking & T_NOLOOP:
                    mine = [k for k in keys if bs.keys[k] is not c]
                    if mine:
                        self._message(c, _keys_array(mine))
                else:
                    self._message(c, proto)
            bs.keys = {}

    # -- delivery -------------------------------------------------------------------------
    def _message(self, c: Client, body: bytes) -> None:
        """sendTrackingMessage: ``body`` is the RESP of the keys (or of a null)."""
        target = c
        if c.tracking_redir:
            target = self.core.clients.get(c.tracking_redir)  # type: ignore[assignment]
            if target is None or target.closed:
                c.tracking |= T_BROKEN_REDIR
                if c.proto > 2:
                    self._emit(c, b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n"
                               % c.tracking_redir)
                return
            if target.proto > 2:
                frame = _INVALIDATE + body
            elif target.subs is not None:
                frame = _MESSAGE + body
            else:
                return
        elif c.proto > 2:
            frame = _INVALIDATE + body
        else:
            return
        self._emit(target, frame)

    def _emit(self, c: Client, frame: bytes) -> None:
        if c is self._own_for:
            self._own.append(frame)
            return
        if c.closed or c.close_after_reply:
            return
        core = self.core
        if not c.out:
            core.pending_flush.append(c)
        c.out.append(Push(frame))
        self.emitted_mem += len(frame) + FRAME_COST
        if core.maxmemory_clients:   # (Redis updates the client's memory after each)
            core.client_eviction.grew(c, len(frame))

    # -- introspection --------------------------------------------------------------------
    def info_fields(self) -> list[tuple[str, int]]:
        """INFO stats' tracking_total_keys / _items / _prefixes."""
        return [("tracking_total_keys", len(self.table)), ("tracking_total_items", self.items),
                ("tracking_total_prefixes", len(self.prefixes))]


def _text(b: bytes) -> str:
    """A prefix as Redis's %s prints it (up to a NUL byte)."""
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")
