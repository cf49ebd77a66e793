"""The master client: applying the stream, passing it on, ACKs (replica side).

Streaming: the connection becomes the *master client* (``Client`` kind ``master``, flags ``M``),
whose commands run through ``core.execute`` with their replies dropped. Offsets (Redis's names):
``read_reploff`` counts every byte read from the master; ``reploff`` (``slave_repl_offset``)
advances only when a command has been executed, and not inside MULTI (so a transaction counts
at its EXEC): ``reploff = reader_base + reader.consumed``. Exactly the applied bytes are passed on
verbatim with ``manager.feed_raw`` (backlog and sub-replicas keep the master's ids and offsets).
Invariants: ``reploff <= read_reploff``; after each read ``manager.master_repl_offset ==
reploff`` while CONNECTED; the bytes fed to ``feed_raw`` are the master's bytes
``(fed, reploff]``, each exactly once.
``REPLCONF ACK <reploff>`` goes out once a second and when the master asks ``REPLCONF GETACK``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrepl import native
from pyrepl.config import repr_arg
from pyrepl.fastpath import account_run, start_run
from pyrepl.fastpath import execute as dispatch
from pyrepl.replication.replica.states import (
    I,
    _printable,
)
from pyrepl.resp.fastreader import first, make_reader, release
from pyrepl.resp.reader import ProtocolError
from pyrepl.resp.types import NO_REPLY
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.replication.ports import ReplClient
    from pyrepl.replication.replica.side import ReplicaSide

_feed = native.load("pyrepl.replication._feed")   # (feed_raw's common case in C)


def write_aof(core: Any) -> None:
    """What our AOF holds in its buffer, written now (its writer's pass)."""
    if core.aof_on and core.aof.writer.buf:
        core.aof.before_reply()


class MasterState:
    """Redis's ``server.master`` / ``server.cached_master``: the master client and its offsets."""

    __slots__ = ("client", "replid", "reploff", "read_reploff", "pre_psync", "reader_base",
                 "fed", "unapplied", "read")

    def __init__(self, client: ReplClient, replid: str, reploff: int) -> None:
        self.client = client
        self.replid = replid
        self.reploff = reploff  # offset of the last byte applied
        self.read_reploff = reploff  # offset of the last byte read
        self.pre_psync = reploff == -1  # a master answering SYNC: no offsets, no ACKs
        self.reader_base = reploff  # reploff when the client's reader was created
        self.fed = reploff  # offset up to which applied bytes went to manager.feed_raw
        self.unapplied = bytearray()  # bytes read, not yet passed on (the query buffer)
        # A read being applied while ``unapplied`` was empty: kept out of it, so that when
        # the read is applied whole (the common case) it is passed on as it is, uncopied;
        # feed_applied buffers what is left of it. None otherwise.
        self.read: bytes | None = None


class Stream:
    """The master client: applying the stream, passing it on, ACKs (replica side). Owns
    ``master`` (Redis's ``server.master``) and ``cached`` (``server.cached_master``)."""

    # read at their offsets by a read's common case in C (replica/_streamread.c)
    __slots__ = ("core", "manager", "master", "__dict__")

    def __init__(self, side: ReplicaSide) -> None:
        self.side = side
        self.core = side.core
        self.manager = side.manager
        self.master: MasterState | None = None  # server.master
        self.cached: MasterState | None = None  # server.cached_master

    def _new_master_client(self) -> ReplClient:
        core = self.core
        cfg = core.config
        c: ReplClient = core.internal_client("master", flags="M")
        c.reader = make_reader(cfg.proto_max_bulk_len, cfg.client_query_buffer_limit,
                               from_master=True)
        return c

    def _link_master_client(self, ms: MasterState) -> None:
        """Attach the master client to the current connection and the client table."""
        c = ms.client
        core = self.core
        side = self.side
        io = side.io
        info = io.link_info(side.token) if io is not None else None
        if info is not None:
            c.addr, c.laddr, c.fd, c.transport = info
        else:
            c.addr, c.laddr, c.fd, c.transport = side.peer, "", -1, None
        c.closed = False
        c.close_after_reply = False
        c.last_interaction_ms = side.now
        cfg = core.config
        c.reader = make_reader(cfg.proto_max_bulk_len, cfg.client_query_buffer_limit,
                               from_master=True)
        ms.reader_base = ms.reploff
        ms.read_reploff = ms.reploff
        ms.fed = ms.reploff
        ms.unapplied = bytearray()
        core.clients[c.id] = c

    def attach_new(self, replid: str, offset: int, stream_db: int) -> MasterState:
        """replicationCreateMasterClient after a full sync: the master client of the loaded
        dataset (``offset`` -1: a master that answered SYNC), on the current connection."""
        core = self.core
        c = self._new_master_client()
        ms = MasterState(c, replid, offset)
        if 0 <= stream_db < len(core.dbs):
            c.db = core.dbs[stream_db]
        self.master = ms
        self._link_master_client(ms)
        return ms

    def resurrect_cached(self) -> MasterState:
        """replicationResurrectCachedMaster (+CONTINUE): the cached master streams again."""
        ms = self.cached
        assert ms is not None
        self.cached = None
        self.master = ms
        self._link_master_client(ms)
        return ms

    def rename_cached(self, replid: str) -> None:
        """+CONTINUE <new id>: the cached master's history goes on under the master's new id."""
        assert self.cached is not None
        self.cached.replid = replid

    def detach(self, cache: bool) -> MasterState:
        """freeClient(server.master): out of the client table and closed; kept as the cached
        master (what was read but not applied dropped: the master resends it after
        +CONTINUE) unless ``cache`` is False."""
        ms = self.master
        assert ms is not None
        c = ms.client
        self.core.clients.pop(c.id, None)
        c.transport = None
        c.closed = True
        self.master = None
        if c.blocked is not None:   # (postponed by CLIENT PAUSE: unblocked as it is freed)
            self.core.blocking.release(c)
        if cache:
            self.core.log.notice("Caching the disconnected master state.")
            ms.read_reploff = ms.reploff
            ms.fed = ms.reploff
            ms.unapplied = bytearray()
            if c.in_multi:
                c.in_multi = False
                c.multi_queue = []
                c.multi_error = False
            c.out.clear()
            self.cached = ms
        return ms

    def discard_cached(self) -> None:
        if self.cached is None:
            return
        self.core.log.notice("Discarding previously cached master state.")
        self.cached = None

    def cache_master_using_myself(self) -> None:
        """replicationCacheMasterUsingMyself: PSYNC our own history with the new master."""
        core = self.core
        m = self.manager
        core.log.notice("Before turning into a replica, using my own master parameters to "
                        "synthesize a cached master: I may be able to synchronize with the new "
                        "master with just a partial transfer.")
        c = self._new_master_client()
        stream_db = core.persistence.loaded_repl_stream_db
        if stream_db is not None and 0 <= stream_db < len(core.dbs):
            c.db = core.dbs[stream_db]
        ms = MasterState(c, m.ids.replid, m.master_repl_offset)
        ms.pre_psync = False
        self.cached = ms

    def stream_db(self) -> int:
        """The db our master's stream has selected (repl-stream-db of an RDB we write)."""
        m = self.master or self.cached
        return m.client.db.id if m is not None else -1

    def stream(self, data: bytes) -> None:
        """Apply replication stream bytes (processInputBuffer for the master client)."""
        self.side.go(I.STREAM)
        ms = self.master
        assert ms is not None
        c = ms.client
        core = self.core
        n = len(data)
        c.net_in += n
        core.stats.net_repl_input_bytes += n
        c.last_interaction_ms = core.now_ms
        ms.read_reploff += n
        reader = c.reader
        if c.blocked is not None:
            # A command postponed by CLIENT PAUSE (WRITE or ALL): the stream is read and kept,
            # not applied, until the pause ends (resume_postponed), as Redis's master client
            # waits blocked with its query buffer growing.
            ms.unapplied += data
            reader.feed(data)
            return
        if ms.unapplied or type(data) is not bytes:
            ms.unapplied += data
        else:
            ms.read = data
        # the master's commands see keys that expired on our clock (its DEL removes them)
        core.applying_master_stream = True
        try:
            # feed, then the first request (first: its common case in C)
            self.apply_commands(ms, c, reader, core, first(reader, data))
        finally:
            core.applying_master_stream = False
            # even if a command raised: what was applied is passed on, offsets stay coherent
            self.feed_applied(ms)
            write_aof(core)   # (Redis writes its AOF every event-loop pass)

    def resume_postponed(self, c: ReplClient, argv: list[bytes]) -> None:
        """The pause that postponed ``argv`` ended: apply it and what was read behind it."""
        ms = self.master
        if ms is None or ms.client is not c:
            return  # (the link went meanwhile: the master resends from reploff)
        core = self.core
        core.applying_master_stream = True
        try:
            self.apply_commands(ms, c, c.reader, core, argv)
        finally:   # (stream()'s tail)
            core.applying_master_stream = False
            self.feed_applied(ms)
            write_aof(core)

    def apply_commands(self, ms: MasterState, c: ReplClient, reader: Any, core: Any,
                       argv: list[bytes] | None) -> None:
        """Run the requests the reader holds, ``argv`` (the read's first, or None) first.
        (Its C: ``_streamread``'s apply(), which calls reader_failed and apply_batch as this
        does.)"""
        while True:
            try:
                if argv is None:
                    if reader.spent and not reader.queue:
                        release(reader)    # (the read's requests, run: not kept)
                        return  # the read all run
                    argv = reader.gets()
            except ProtocolError as e:
                self.reader_failed(ms, c, e)
                return
            if argv is None:
                return
            rest = reader.queue
            if rest and self.apply_batch(ms, c, reader, argv, rest):
                if self.master is not ms:
                    return
                argv = None
                continue
            # core.execute (its common case in C): an error reply comes back through
            # propagation_error
            dispatch(core, c, argv)
            argv = None
            if c.out:
                c.out.clear()
            if c.blocked is not None:
                return  # postponed by CLIENT PAUSE: reploff stays before it
            if not c.in_multi:
                ms.reploff = ms.reader_base + reader.consumed_now()
            if self.master is not ms:
                return  # the command dropped the link

    def reader_failed(self, ms: MasterState, c: ReplClient, e: ProtocolError) -> None:
        """The master sent what is not a request: logged as Redis logs it, the master dropped
        uncached (a full sync next). What was applied before it is passed on first."""
        self.feed_applied(ms)
        log = self.core.log
        log.warning(f"Protocol error ({e.reason}) from client: {c.describe()}. "
                    f"Query buffer during protocol error: "
                    f"'{_printable(bytes(ms.unapplied[:128]))}'")
        if "inline" in str(e):
            log.warning("WARNING: Receiving inline protocol from master, master stream "
                        "corruption? Closing the master connection and discarding the "
                        "cached master.")
        self.side.master_lost("protocol-error", cache=False)

    def apply_batch(self, ms: MasterState, c: ReplClient, reader: Any, first: list[bytes],
                     rest: list[list[bytes]]) -> bool:
        """Apply ``first`` and the plain commands queued right behind it in one pass
        (``plainrun.start``, ``core.run_plain``, or ``core.run_propagating`` while our AOF
        takes what we apply); False (nothing done) when ``first`` does
        not qualify and ``execute`` must run it. The replies are dropped (the master gets
        none). ``reploff`` moves once, to the run's end; if a handler raises anything but a
        ReplyError, to the end of the command before it, as the one-by-one loop leaves it."""
        core = self.core
        run = start_run(core, c, first, rest)   # (plainrun.start; its common case in C)
        if run is None:
            return False
        cmds, reqs, one = run
        replies: list[object] = []
        t0 = core.clock_ns()
        try:
            if core.stream_live:   # (our AOF is on: the run's writes go to it, as they came)
                core.run_propagating(c, cmds, reqs, replies, one)
            else:
                core.run_plain(c, cmds, reqs, replies, one)
        except BaseException:
            k = len(replies)   # reqs[:k] applied: reploff at the end of reqs[k - 1]
            left = len(rest)
            if k:
                reader.take_queued(left - k + 1)
                ms.reploff = ms.reader_base + reader.consumed_now()
            reader.take_queued(left - k)   # reqs[k] was read (the one-by-one loop's state)
            raise
        ns = core.clock_ns() - t0
        reader.take_queued(len(rest) - len(reqs) + 1)
        ms.reploff = ms.reader_base + reader.consumed_now()
        if c.out:
            c.out.clear()
        account_run(core, c, cmds, one, ns)   # (plainrun.account; in C)
        return True

    def propagation_error(self, command: str, message: str) -> None:
        """A command of the master's stream answered an error here (Redis's afterErrorReply for
        the master client): logged as Redis, with the latest backlog, counted in INFO
        ``unexpected_error_replies``, a ``propagation_error`` sync event; with
        ``propagation-error-behavior panic`` / ``panic-on-replicas`` on a read-only replica the
        process panics, as Redis does. The link stays up (``ignore``, the default)."""
        core = self.core
        err = message[:4096]
        core.log.warning(f"== CRITICAL == This replica is sending an error to its master: "
                         f"'-{err}' after processing the command '{command}'")
        backlog = self.manager.backlog
        if backlog is not None and backlog.histlen:
            latest = backlog.tail_bytes(256)
            core.log.warning(f"Latest backlog is: '{repr_arg(latest)}'")
        core.stats.unexpected_error_replies += 1
        ms = self.master
        self.side.emit("propagation_error", command=command, error=err,
                   offset=ms.reploff if ms is not None else None)
        cfg = core.config
        if cfg.replica_read_only and cfg.propagation_error_behavior in ("panic",
                                                                       "panic-on-replicas"):
            core.host.panic(f"This replica panicked sending an error to its master after "
                            f"processing the command '{command}'")

    def feed_applied(self, ms: MasterState) -> None:
        """Pass the bytes applied since the last call, ``(fed, reploff]``, to the backlog and
        the sub-replicas (manager.feed_raw: same bytes, same offsets)."""
        applied = ms.reploff - ms.fed
        read = ms.read
        if read is not None:   # (the buffer was empty: the read's bytes, applied first)
            ms.read = None
            if applied < len(read):
                ms.unapplied += read[max(applied, 0):]
            chunk = read if applied == len(read) else read[:applied]
        elif applied > 0:
            buf = ms.unapplied
            chunk = bytes(buf[:applied])
            del buf[:applied]
        if applied <= 0:
            return
        ms.fed = ms.reploff
        m = self.manager
        if _feed is None or not _feed.feed_raw(m, chunk):   # (its common case in C)
            m.feed_raw(chunk)

    def send_ack(self) -> None:
        """replicationSendAck: REPLCONF ACK <reploff>."""
        ms = self.master
        if ms is None:
            return
        core = self.core
        write_aof(core)   # (what we acknowledge is in our AOF first, as Redis)
        data = encode_command([b"REPLCONF", b"ACK", b"%d" % ms.reploff])
        ms.client.net_out += len(data)
        core.stats.net_output_bytes += len(data)
        self.side.send(data)

    def on_master_replconf(self, client: ReplClient, argv: list[bytes]) -> object:
        """REPLCONF sent by our master: GETACK asks for an ACK now; nothing is replied."""
        ms = self.master
        if ms is None or client is not ms.client:
            return NO_REPLY
        for i in range(1, len(argv) - 1, 2):
            if argv[i].lower() == b"getack":
                if self.side.master_host is not None:
                    self.send_ack()
                break
        return NO_REPLY
