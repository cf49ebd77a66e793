"""Per-connection state of a client, and its sans-io byte interface.

Theory of operation: the I/O shell creates a :class:`Client` per accepted connection through
``ServerCore.connection_made`` and calls :meth:`receive_data` with every chunk read from the
socket; complete commands are parsed by the RESP reader and executed at once by the core, and
the encoded replies accumulate in ``out``. The shell then sends :meth:`data_to_send` and closes
the connection when ``close_after_reply`` is set and everything was written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrepl.core import clientevict
from pyrepl.fastpath import execute
from pyrepl.resp.fastreader import first, release
from pyrepl.resp.reader import ProtocolError, QueryBufferLimitExceeded
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore
    from pyrepl.keyspace.db import Database


# Client.reply_mode bits (CLIENT REPLY OFF / SKIP; REPLY_SET: the command just set the mode)
REPLY_OFF = 1
REPLY_SKIP = 2
REPLY_SET = 4
REPLY_RUNNING = 8     # (ServerCore.execute_quietly is running the client's command)


# Client.cluster_flags (Redis's CLIENT_ASKING, CLIENT_READONLY: pyrepl.core.cluster)
CLUSTER_ASKING = 1
CLUSTER_READONLY = 2


class Client:
    __slots__ = (
        "id", "core", "db", "proto", "name", "lib_name", "lib_ver", "authenticated", "user",
        "reader", "out", "close_after_reply", "closed", "addr", "laddr", "fd", "out_fd",
        "ctime_ms", "last_interaction_ms", "last_cmd", "in_multi", "multi_queue", "multi_error",
        "watched", "dirty_cas", "flags", "net_in", "net_out", "commands", "kind",
        "propagate_argv", "repl", "transport", "blocked", "woff", "unix_socket",
        "stream", "write_paused", "subs", "obuf_held", "obuf_soft_since", "reply_mode",
        "tracking", "tracking_redir", "tracking_prefixes", "acl_user", "restricted",
        "mem", "mem_quiet", "no_evict", "multi_mem", "ldb_mode", "cluster_flags", "cluster_slot",
        "_whole",   # (the C's: every slot set, pyrepl/_slots.h)
    )

    def __init__(self, core: ServerCore, client_id: int, addr: str = "", laddr: str = "",
                 fd: int = -1, unix_socket: bool = False) -> None:
        from pyrepl.resp.fastreader import make_reader

        cfg = core.config
        self.id = client_id
        self.core = core
        self.db: Database = core.dbs[0]
        self.proto = 2
        self.name = b""
        self.lib_name = b""
        self.lib_ver = b""
        self.user = "default"
        self.reader = make_reader(cfg.proto_max_bulk_len, cfg.client_query_buffer_limit)
        self.authenticated = True
        self.set_authenticated(not cfg.requirepass)
        # ACL (pyrepl.core.acl): the user's record (None: the default user before any ACL use) and
        # whether the dispatcher must check its permissions (False for an all-powerful user).
        self.acl_user: Any = None
        self.restricted = False
        acl = core.__dict__.get("acl")
        if acl is not None:
            acl.attach(self)
        self.out: list[bytes] = []
        self.close_after_reply = False
        self.closed = False
        self.addr = addr
        self.laddr = laddr
        self.fd = fd
        # the socket its transport writes to, when the net side may write replies to it itself
        # (pyrepl/net/_serve.c's send_reply checks the transport too); -1: never
        self.out_fd = -1
        self.ctime_ms = core.now_ms
        self.last_interaction_ms = core.now_ms
        self.last_cmd: Any = None  # the Command last run (CLIENT LIST cmd=)
        self.in_multi = False
        self.multi_queue: list[tuple[Any, list[bytes]]] = []
        self.multi_error = False
        # [db, key, expired]: expired, the key was logically expired when WATCHed (Redis's
        # watchedKey.expired: its deletion is then no change, Database.touch)
        self.watched: list[list[Any]] = []
        self.dirty_cas = False
        self.flags = ""  # CLIENT LIST letters added by replication: S (replica), M (master)
        self.cluster_flags = 0   # CLUSTER_ASKING | CLUSTER_READONLY (pyrepl.core.cluster)
        self.cluster_slot = -1   # the slot of the running command's keys (c->slot), or -1
        self._whole: bool | None = None
        self.net_in = 0
        self.net_out = 0
        self.commands = 0
        self.kind = "normal"  # normal | replica | master | pubsub
        self.propagate_argv: list[bytes] | None = None
        self.repl: Any = None  # replication link state attached by the replication layer
        self.transport: Any = None  # set by the I/O shell; the core never touches it
        # A replica link whose replication stream the shell writes after ``out`` (views of
        # the shared replication buffer, taken with Feeding.take); None for other clients.
        self.stream: Any = None
        self.write_paused = False  # the transport asked us to stop writing (flow control)
        # While a command waits (BLPOP, WAIT, ...): its pyrepl.core.blocking.Blocked record; the
        # commands sent meanwhile stay buffered in the reader (see process).
        self.blocked: Any = None
        self.woff = 0  # replication offset after this client's last write (WAIT)
        self.unix_socket = unix_socket  # connected through `unixsocket` (CLIENT LIST flag U)
        # Channels/patterns it listens to (pyrepl.core.pubsub.Subscriptions), None when none.
        self.subs: Any = None
        # Output held while the transport is paused (pub/sub messages) and since when it has
        # been over the soft limit: client-output-buffer-limit (pyrepl.core.pubsub).
        self.obuf_held = 0
        self.obuf_soft_since = 0
        self.reply_mode = 0   # CLIENT REPLY OFF / SKIP (core.REPLY_* bits; 0: ON)
        # CLIENT TRACKING (pyrepl.core.tracking): its T_* bits (0: off), the REDIRECT client id
        # (0: none) and the BCAST prefixes (sorted; None when none).
        self.tracking = 0
        self.tracking_redir = 0
        self.tracking_prefixes: list[bytes] | None = None
        # maxmemory-clients (pyrepl.core.clientevict): the memory last counted for it in the
        # clients' total (0: not counted), whether that had no query buffer or output in it
        # and nothing changed since (a read that leaves none needs no count), CLIENT NO-EVICT,
        # and the bytes of the arguments queued in MULTI (while ``multi_queue`` holds some).
        self.mem = 0
        self.mem_quiet = False
        self.no_evict = False
        self.multi_mem = 0
        self.ldb_mode: str | None = None   # SCRIPT DEBUG: "fork" (YES), "sync" or None (NO)

    def must_obey(self) -> bool:
        """mustObeyClient: the master's stream or the AOF being loaded, whose commands run
        even where a client's would be refused (a read-only replica, a busy script's kill)."""
        return self.kind == "master" or self.kind == "aof"

    def is_local(self) -> bool:
        """Redis's islocalClient: a Unix-socket client, or one from a loopback address (what
        ``enable-debug-command local`` and ``enable-protected-configs local`` allow)."""
        if self.unix_socket:
            return True
        host = self.addr.rpartition(":")[0]
        return host in ("127.0.0.1", "::1")

    def allows_protected(self, setting: str) -> bool:
        """Redis's allowProtectedAction for ``enable-debug-command`` & co: ``yes``, or
        ``local`` from a local client."""
        return setting == "yes" or (setting == "local" and self.is_local())

    # -- sans-io interface ----------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the socket; runs every complete command."""
        if self.closed or self.close_after_reply:
            return
        core = self.core
        self.net_in += len(data)
        stats = core.stats
        stats.net_input_bytes += len(data)
        stats.total_reads_processed += 1
        self.last_interaction_ms = core.now_ms
        if self.blocked is None:   # (process() would read the first request at once)
            argv = first(self.reader, data)   # (reader.feed_first(data), in C when it can)
        else:
            self.reader.feed(data)
            argv = None
        if self.stream is None:
            if argv is not None and not self.reader.queue:   # a lone request: run it here
                core.execute(self, argv)
                if core.obuf_normal and core.output_limits.check(self):
                    return
                reader = self.reader
                if reader.spent and not reader.queue:
                    return   # the read is all run
                argv = None
            self.process(argv)
            return
        # A replica being streamed to: the link carries the stream only, so a command that
        # produced a reply (checked per read, not per command) drops it, as Redis 7.0 does.
        sent = len(self.out)
        self.process(argv)
        if len(self.out) > sent and any(self.out[sent:]):   # (NO_REPLY appends b"")
            del self.out[sent:]
            assert core.replication is not None   # (a replica's link: the layer is attached)
            core.replication.master.replica_replied(self)

    def process(self, argv: list[bytes] | None = None) -> None:
        """Run the complete commands buffered in the reader (stops while blocked), starting
        with ``argv`` when the reader returned it already (``feed_first``). A read's common
        case runs in C (pyrepl/net/_serve.c's process); this stays its reference."""
        reader = self.reader
        core = self.core
        while not self.close_after_reply and self.blocked is None:
            if argv is None:
                try:
                    argv = reader.gets()
                except ProtocolError as e:
                    self.protocol_error(e)
                    return
                if argv is None:
                    return
            rest = reader.queue
            if core.obuf_normal:
                # client-output-buffer-limit normal: checked after each command (a pipeline
                # stops where the client is closed, as Redis's)
                execute(core, self, argv)
                if core.output_limits.check(self):
                    return
            elif not (rest and not self.in_multi and core.execute_run(self, argv, rest)):
                execute(core, self, argv)   # (core.execute; in MULTI, no run: queued one by one)
            if reader.spent and not reader.queue:
                release(reader)     # (the read's requests, run: not kept to the next read)
                return      # the read is all run (a lone request: no gets() to learn it)
            argv = None

    def protocol_error(self, e: ProtocolError) -> None:
        """Answer Redis's error text where Redis answers one, then close this client only."""
        if e.reply:
            self.write(b"-" + str(e).encode("latin-1") + b"\r\n")
        if isinstance(e, QueryBufferLimitExceeded):
            self.core.stats.client_qbuf_limit_disconnections += 1
        self.core.log.verbose(f"Protocol error ({e.reason}) from client: {self.describe()}")
        self.close_after_reply = True

    def set_authenticated(self, ok: bool) -> None:
        """Authentication state; the reader applies Redis's unauthenticated limits until then."""
        self.authenticated = ok
        self.reader.auth_required = not ok

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def pending_output(self) -> int:
        """Bytes of replies produced but not yet handed to the socket."""
        return sum(map(len, self.out))

    def data_to_send(self) -> bytes:
        if not self.out:
            return b""
        data = self.out[0] if len(self.out) == 1 else b"".join(self.out)
        self.out = []
        self.obuf_held = 0
        self.net_out += len(data)
        stats = self.core.stats
        stats.net_output_bytes += len(data)
        stats.total_writes_processed += 1
        return data

    def connection_lost(self) -> None:
        self.core.client_closed(self)

    # -- helpers --------------------------------------------------------------------------
    def info_line(self, running: list[bytes] | None = None) -> str:
        """The client as CLIENT LIST / CLIENT INFO and the logs show it (catClientInfoString);
        a replica's ``omem``/``oll`` are its part of the shared replication buffer. For the
        client whose command is ``running`` (CLIENT LIST's or INFO's caller), ``qbuf`` holds
        that command too and ``argv-mem`` its arguments, as Redis's query buffer and argv
        still do while it runs."""
        core = self.core
        now = core.now_ms
        flags = self.flags or ""
        if self in core.monitors:
            flags = "O" + flags
        if self.subs is not None:
            flags += "P"
        if self.in_multi:
            flags += "x"
        if self.blocked is not None:
            flags += "b"
        if self.tracking:    # t, then R (broken redirect) and B (BCAST), as Redis
            flags += "t" + ("R" if self.tracking & 64 else "") + ("B" if self.tracking & 2 else "")
        if self.unix_socket:
            flags += "U"
        if self.cluster_flags & CLUSTER_READONLY:
            flags += "r"
        if self.no_evict:
            flags += "e"
        if not flags:
            flags = "N"
        # qbuf: what is not parsed yet; qbuf-free: the room a big argument announced;
        # argv-mem: the arguments read of a request not complete yet (or the running one's)
        reader = self.reader
        qbuf = reader.unparsed()
        qbuf_free = reader.reserved()
        argv_mem = reader.partial_args()
        if running is not None:
            qbuf += len(encode_command(running))
            argv_mem = sum(len(a) for a in running)
        name = self.name.decode("utf-8", "replace")
        oll = 0
        ref = getattr(self.repl, "ref", None)
        backlog = core.replication.backlog if core.replication is not None else None
        if ref is not None and backlog is not None:   # a replica: its part of the shared buffer
            omem = self.pending_output() + backlog.usage(ref)
            oll = backlog.blocks(ref)
        else:    # (what the transport holds too: Redis's reply list is all not yet sent)
            omem = clientevict.output_memory(self)
        multi_mem = self.multi_mem if self.multi_queue else 0
        return (
            f"id={self.id} addr={self.addr} laddr={self.laddr} fd={self.fd} name={name} "
            f"age={(now - self.ctime_ms) // 1000} idle={(now - self.last_interaction_ms) // 1000} "
            f"flags={flags} db={self.db.id} {self._sub_counts()} "
            f"multi={len(self.multi_queue) if self.in_multi else -1} qbuf={qbuf} qbuf-free={qbuf_free} "
            f"argv-mem={argv_mem} multi-mem={multi_mem} rbs=16384 rbp=16384 obl=0 oll={oll} omem={omem} "
            f"tot-mem={clientevict.memory(self, running)} events=r cmd={self.last_cmd.name if self.last_cmd else 'NULL'} user={self.user} "
            f"redir={self.tracking_redir if self.tracking else -1} resp={self.proto} lib-name={self.lib_name.decode('utf-8', 'replace')} "
            f"lib-ver={self.lib_ver.decode('utf-8', 'replace')} tot-net-in={self.net_in} "
            f"tot-net-out={self.net_out} tot-cmds={self.commands}"
        )

    def _sub_counts(self) -> str:
        subs = self.subs
        if subs is None:
            return "sub=0 psub=0 ssub=0"
        return f"sub={len(subs.channels)} psub={len(subs.patterns)} ssub={len(subs.shard)}"

    def describe(self) -> str:
        return f"id={self.id} addr={self.addr} laddr={self.laddr} name={self.name.decode('utf-8', 'replace')}"

    def discard_transaction(self) -> None:
        """Redis's discardTransaction: leave MULTI, drop the queue, forget the WATCHes."""
        self.in_multi = False
        self.multi_queue = []
        self.multi_error = False
        self.unwatch_all()

    def watch_entry(self, db: Database, key: bytes) -> list[Any] | None:
        """The [db, key, expired] record of a WATCHed key, None when not watched."""
        for w in self.watched:
            if w[0] is db and w[1] == key:
                return w
        return None

    def unwatch_all(self) -> None:
        for db, key, _expired in self.watched:
            clients = db.watched.get(key)
            if clients is not None:
                clients.discard(self)
                if not clients:
                    del db.watched[key]
        self.watched = []
        self.dirty_cas = False
