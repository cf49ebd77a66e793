"""The full sync's payload: header, streaming RDB load into fresh tables, swap (replica side).

Transfer: empty lines are keepalives; ``$<len>`` announces a disk-based payload of exactly
``len`` bytes (no trailing CRLF), ``$EOF:<40-char mark>`` a diskless one that ends with the mark.
The payload is parsed as it arrives by the streaming :class:`~pyrepl.rdb.decoder.RdbDecoder` into
*fresh* per-db KeyTables while the old dataset keeps serving reads; only when the RDB, its CRC64 and
(diskless) the mark are all good are the tables swapped in, atomically. A bad CRC, a broken mark,
a truncated payload or a timeout discard the new tables: nothing is half-applied, the cached
master is kept, and the side reconnects. Progress (``master_sync_*`` in INFO) is Redis's:
``total`` is -1 before the header, 0 for ``$EOF:``, ``len`` for ``$<len>``; ``read`` counts
payload bytes (the mark included); ``left = total - read``; ``perc = read / total * 100``.

A cut classic sync of a pyrepl master that named its snapshot (``+FULLRESYNC <replid> <offset>
<id>``, see pyrepl.replication.master.resume) is not discarded: the payload parsed so far (the
decoder mid-stream, the fresh tables) is kept as :class:`Parked` for
``repl-full-sync-resume-window`` seconds; the handshake then asks ``REPLCONF resume <id>
resume-offset <read>`` and, on ``+OK``, the same ``+FULLRESYNC`` and ``$RESUME:<read>``, the
bytes go on into the kept decoder, whose CRC64 covers the whole payload. A cut rdb-channel
sync keeps the main channel's buffer too (the stream from the snapshot offset + 1 up to
``stream_next - 1``, see :class:`Parked`): it is resumed on one connection with
``stream-offset <stream_next>`` added, the buffer waits beside the load (``resumed_stream``)
and, once the payload is loaded, becomes the channel's full-sync buffer again, which drains
before the stream that follows on the connection, as after an rdb-channel sync.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyrepl.keyspace.ktable import KeyTable
from pyrepl.rdb.decoder import Aux, End, FunctionSkipped, RdbDecoder, RdbError
from pyrepl.replication.replica.states import (
    LOAD_BACKOFF_MAX_MS,
    RDB_CHANNEL,
    TWO_CHANNELS,
    I,
)
from pyrepl.replication.wire import (
    CRON_MS,
    EOF_MARK_LEN,
    BulkHeader,
    FullResync,
    ResumeHeader,
    strtoll,
)

if TYPE_CHECKING:
    from pyrepl.replication.replica.rdbchannel import FullSyncBuffer
    from pyrepl.replication.replica.side import ReplicaSide
    from pyrepl.replication.replica.stream import Stream


class _Load:
    """The payload of one full sync being parsed into fresh KeyTables."""

    __slots__ = ("decoder", "data", "expires", "aux", "usemark", "mark", "tail", "first_ms",
                 "ended", "functions", "libraries", "async_")

    def __init__(self, ndbs: int, usemark: bool, mark: bytes, now_ms: int) -> None:
        self.decoder = RdbDecoder(databases=ndbs)
        self.data = [KeyTable() for _ in range(ndbs)]
        self.expires = [KeyTable(ageing=False) for _ in range(ndbs)]
        self.aux: dict[bytes, bytes] = {}
        self.usemark = usemark
        self.mark = mark
        self.tail = b""  # bytes after the RDB's end while waiting for the whole mark
        self.first_ms = now_ms
        self.ended = False
        self.functions: list[bytes] = []   # the function libraries' codes
        self.libraries: Any = None          # ... loaded (core.prepare_functions) once the RDB ended
        self.async_ = False     # Redis's async loading (Load.begin_payload)


@dataclass(slots=True, eq=False)
class Parked:
    """A classic full sync cut in the middle, kept to resume (pyrepl.replication.master.resume):
    the payload parsed so far (its decoder and fresh tables, as they stood) and where it was."""

    load: _Load
    size: int       # transfer_size (0: an $EOF: payload)
    read: int       # the payload bytes it has
    mode: str
    replid: str     # the snapshot's (+FULLRESYNC)
    offset: int
    rid: str        # the snapshot id
    master: str     # host:port it came from
    at_ms: int      # when it was cut
    # an rdb-channel sync's: the main channel's buffer, and the stream offset after it
    stream: FullSyncBuffer | None = None
    stream_next: int = -1


class Load:
    """The full sync's payload: header, streaming RDB load into fresh tables, swap (replica side).

    Owns the transfer's progress (``transfer_*``, Redis's ``repl_transfer_*``), the payload
    being parsed, the snapshot's id and offset (``master_replid`` / ``master_initial_offset``,
    from ``+FULLRESYNC`` on either channel) and the backoff after a dataset it cannot load.
    Its collaborators: the side (the link and the table), the stream (the master client the
    loaded dataset gets) and, through the side, the rdb channel that an rdb-channel sync ends."""

    def __init__(self, side: ReplicaSide, stream: Stream) -> None:
        self.side = side
        self.core = side.core
        self.manager = side.manager
        self.stream = stream
        self.transfer_size = -1  # -1 before the header, 0 for $EOF:, <len> for $<len>
        self.transfer_read = 0
        self.transfer_lastio_ms = 0  # also the connect's and the handshake's (repl-timeout)
        self.mode = ""  # disk, diskless, rdb-channel or dual-channel (sync events, INFO)
        self.master_replid = ""  # from +FULLRESYNC
        self.master_initial_offset = -1
        self.requested_ms = 0  # when the PSYNC that led to this transfer went out
        self._load: _Load | None = None
        # A cut classic sync that may resume (pyrepl masters, repl-full-sync-resume-window):
        # the snapshot id +FULLRESYNC named, what was kept of a cut one, and whether the
        # master accepted to resume it (REPLCONF resume: +OK)
        self.resume_id = ""
        self.parked: Parked | None = None
        self.resuming = False
        self.resumed_stream: FullSyncBuffer | None = None   # (a resumed rdb-channel sync's)
        # A dataset we cannot load: consecutive failures and when to try again (backoff).
        self._failures = 0
        self.retry_at_ms = 0

    @property
    def loading(self) -> bool:
        """A payload is being parsed (its header was read)."""
        return self._load is not None

    def _use(self, ld: _Load | None) -> None:
        """The payload being parsed (None: none); INFO's async_loading and the -LOADING of
        no-async-loading commands follow its ``async_``."""
        self._load = ld
        on = ld is not None and ld.async_
        core = self.core
        if core.async_loading != on:
            core.async_loading = on
            core.refresh_gate()

    def touch(self) -> None:
        """I/O with the master during a connect, handshake or transfer (repl-timeout)."""
        self.transfer_lastio_ms = self.side.now

    def set_target(self, replid: str | None, offset: int) -> None:
        """The snapshot's id and offset (+FULLRESYNC on either channel); ``replid`` None keeps
        the last one (a PSYNC going out only forgets the offset, as Redis)."""
        if replid is not None:
            self.master_replid = replid
        self.master_initial_offset = offset

    def start(self, requested_ms: int, mode: str = "") -> None:
        """A full sync was granted: the payload's header comes next (``mode`` "rdb-channel"
        or "dual-channel": on the rdb channel; otherwise the header tells disk or
        diskless)."""
        self.requested_ms = requested_ms
        self.mode = mode
        self.transfer_size = -1
        self.transfer_read = 0
        self.transfer_lastio_ms = self.side.now
        self._use(None)
        self.resume_id = ""

    # -- a cut sync that resumes ----------------------------------------------------------------
    def park(self, master: str, stream: FullSyncBuffer | None = None) -> bool:
        """The link was cut in the middle of a payload the master can resume: keep what was
        loaded (the decoder and the fresh tables as they stand) for the window; an
        rdb-channel sync's main-channel buffer too (``stream``, the channel's; else the one a
        resumed sync brought back). False: nothing kept (the caller's buffer stays its)."""
        ld = self._load
        window = self.core.config.repl_full_sync_resume_window
        own = stream is None
        if own:
            stream = self.resumed_stream
        two = self.mode == RDB_CHANNEL
        if (ld is None or not self.resume_id or not window
                or self.mode not in ("disk", "diskless", RDB_CHANNEL)
                or two != (stream is not None)):
            return False
        if own:
            self.resumed_stream = None
        self.parked = Parked(ld, self.transfer_size, self.transfer_read, self.mode,
                             self.master_replid, self.master_initial_offset, self.resume_id,
                             master, self.side.now, stream,
                             self.master_initial_offset + 1 + stream.total
                             if stream is not None else -1)
        self._use(None)
        kept = f" and {stream.total} bytes of its stream" if stream is not None else ""
        self.core.log.notice(f"MASTER <-> REPLICA sync: keeping the {self.transfer_read} bytes "
                             f"received of snapshot {self.resume_id}{kept}, to resume the sync")
        return True

    def parked_for(self, master: str) -> Parked | None:
        """What was kept of a cut sync of ``master``, still within the window (else it
        goes)."""
        p = self.parked
        if p is None:
            return None
        window_ms = self.core.config.repl_full_sync_resume_window * 1000
        if p.master != master or self.side.now - p.at_ms > window_ms:
            self.discard_parked()
            return None
        return p

    def discard_parked(self) -> None:
        p = self.parked
        if p is not None:
            self.core.log.notice(f"MASTER <-> REPLICA sync: discarding what was kept of "
                                 f"snapshot {p.rid}")
            if p.stream is not None:
                p.stream.close()
        self.parked = None
        self.resuming = False

    def resumes(self, fr: FullResync | None) -> bool:
        """+FULLRESYNC after REPLCONF resume's +OK: the same snapshot (id, replid, offset)
        goes on; anything else is a new full sync (what was kept goes)."""
        p = self.parked
        if (self.resuming and p is not None and fr is not None and fr.snapshot == p.rid
                and fr.replid == p.replid and fr.offset == p.offset):
            return True
        self.discard_parked()
        return False

    def resume_header(self, line: bytes) -> None:
        """``$RESUME:<offset>``: the payload goes on from there, into the load that was kept."""
        p = self.parked
        head = ResumeHeader.parse(line)
        if not self.resuming or p is None or head is None or head.offset != p.read:
            self.core.log.warning(f"MASTER <-> REPLICA sync: the resumed payload does not go "
                                  f"on where it stopped ({line.decode('utf-8', 'replace')})")
            self.discard_parked()
            self.side.cancel_handshake(True, I.TRANSFER_ERROR, "resume-mismatch",
                                       line.decode("utf-8", "replace"))
            return
        self.side.go(I.BULK_HEADER)
        self._use(p.load)
        self.transfer_size, self.transfer_read, self.mode = p.size, p.read, p.mode
        self.resumed_stream = p.stream
        self.parked = None
        self.resuming = False
        self.transfer_lastio_ms = self.side.now
        self.core.log.notice(f"MASTER <-> REPLICA sync: resuming snapshot {p.rid} from byte "
                             f"{p.read}")

    def expire_parked(self) -> None:
        """The cron: what was kept past the window goes (its tables hold memory)."""
        p = self.parked
        if p is not None and not self.resuming:
            self.parked_for(p.master)

    def abort(self) -> None:
        """Drop a payload being loaded: the fresh tables go, the old dataset stays."""
        if self._load is not None:
            self._use(None)
            self.core.log.notice("MASTER <-> REPLICA sync: Discarding temporary DB in background")
        if self.resumed_stream is not None:
            self.resumed_stream.close()
            self.resumed_stream = None
        self.transfer_size = -1
        self.transfer_read = 0

    def reset_backoff(self) -> None:
        """A new master: no backoff carried over."""
        self._failures = 0
        self.retry_at_ms = 0

    def header_line(self, line: bytes, raw_len: int) -> None:
        """The payload header or a keepalive (readSyncBulkPayload before the payload);
        ``raw_len``: the line's bytes on the wire."""
        self.core.stats.net_repl_input_bytes += raw_len
        log = self.core.log
        if not line:
            self.side.go(I.KEEPALIVE)
            self.transfer_lastio_ms = self.side.now
            return
        text = line.decode("utf-8", "replace")
        if line[:1] == b"-":
            log.warning(f"MASTER aborted replication with an error: {text[1:]}")
            self.side.cancel_handshake(True, I.TRANSFER_ERROR, "master-error", text)
            return
        if line.startswith(b"$RESUME:"):
            self.resume_header(line)
            return
        if line[:1] != b"$":
            log.warning(f"Bad protocol from MASTER, the first byte is not '$' (we received "
                        f"'{text}'), are you sure the host and port are right?")
            self.side.cancel_handshake(True, I.TRANSFER_ERROR, "bad-protocol", text)
            return
        head = BulkHeader.parse(bytes(line))
        self.mode = "diskless" if head.usemark else "disk"
        self.begin_payload(head.usemark, head.mark, head.size)

    def begin_payload(self, usemark: bool, mark: bytes, size: int) -> None:
        """The payload header was read (on the main channel or the rdb channel)."""
        log = self.core.log
        now = self.side.now
        self.side.go(I.BULK_HEADER)
        ndbs = len(self.core.dbs)
        ld = _Load(ndbs, usemark, mark if usemark else b"", now)
        # Redis's async loading (readSyncBulkPayload): a swapdb load of a snapshot of our own
        # history (the master's replid is ours: the old dataset is an earlier point of the
        # same one) serves the old dataset meanwhile, as pyrepl's load into fresh tables
        # always does, and says so
        ld.async_ = self.core.config.repl_diskless_load == "swapdb" and \
            self.master_replid == self.manager.ids.replid
        if usemark:
            self.transfer_size = 0
            log.notice("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF "
                       "to parser")
        else:
            self.transfer_size = size
            log.notice(f"MASTER <-> REPLICA sync: receiving {self.transfer_size} bytes from "
                       f"master to parser")
        self._use(ld)
        self.transfer_lastio_ms = now
        if not self.transfer_size and not ld.usemark:
            self.payload(b"", 0)  # "$0": the (empty) payload is complete already

    def payload(self, data: bytes, pos: int) -> int:
        """Feed payload bytes from ``data[pos:]``; returns the position after what belonged to
        the payload (the rest is replication stream)."""
        ld = self._load
        assert ld is not None
        side = self.side
        side.go(I.PAYLOAD)
        now = side.now
        n = len(data) - pos
        if self.transfer_read == 0 and n:
            ld.first_ms = now
            rdbch = self.mode in TWO_CHANNELS
            side.emit("rdb_first_byte", duration_ms=now - self.requested_ms, mode=self.mode,
                       offset=self.master_initial_offset if rdbch else None,
                       replid=self.master_replid or None if rdbch else None)
            self.core.log.notice("MASTER <-> REPLICA sync: Loading DB in memory")
        self.transfer_lastio_ms = now
        stats = self.core.stats
        if not ld.usemark:
            take = min(n, self.transfer_size - self.transfer_read)
            chunk = data[pos:pos + take] if (pos or take != len(data)) else data
            self.transfer_read += take
            stats.net_repl_input_bytes += take
            try:
                if not ld.ended:
                    ld.decoder.receive_data(chunk)
                    if self.transfer_read == self.transfer_size:
                        ld.decoder.receive_data(b"")
                    self._decode(ld)
            except RdbError as e:
                self._load_failed(f"Failed trying to load the MASTER synchronization DB "
                                  f"from socket: {e}", str(e))
                return len(data)
            if self.transfer_read < self.transfer_size:
                return pos + take
            if not ld.ended:  # pragma: no cover - the decoder raises on truncation
                self._load_failed("Failed trying to load the MASTER synchronization DB from "
                                  "socket: truncated", "truncated")
                return len(data)
            self._loaded()
            return pos + take
        # $EOF:<mark> form: everything is payload until the RDB ends and the mark follows.
        chunk = data[pos:] if pos else data
        self.transfer_read += n
        stats.net_repl_input_bytes += n
        if not ld.ended:
            try:
                ld.decoder.receive_data(chunk)
                self._decode(ld)
            except RdbError as e:
                self._load_failed(f"Failed trying to load the MASTER synchronization DB from "
                                  f"socket: {e}", str(e))
                return len(data)
            if not ld.ended:
                # Redis ends the transfer when the last 40 bytes read are the mark: then the
                # RDB was cut short (without this check we would wait for repl-timeout).
                ld.tail = chunk[-EOF_MARK_LEN:] if n >= EOF_MARK_LEN \
                    else (ld.tail + chunk)[-EOF_MARK_LEN:]
                if ld.tail == ld.mark:
                    self._load_failed("Failed trying to load the MASTER synchronization DB "
                                      "from socket: the EOF mark arrived before the end of "
                                      "the RDB", "truncated")
                return len(data)
            tail = ld.decoder.unused_data
        else:
            tail = ld.tail + chunk
        if len(tail) < EOF_MARK_LEN:
            ld.tail = tail
            return len(data)
        if tail[:EOF_MARK_LEN] != ld.mark:
            self._load_failed("Replication stream EOF marker is broken", "broken EOF mark")
            return len(data)
        extra = len(tail) - EOF_MARK_LEN
        # Bytes after the mark are stream: not payload.
        self.transfer_read -= extra
        stats.net_repl_input_bytes -= extra
        self._loaded()
        return len(data) - extra

    def _decode(self, ld: _Load) -> None:
        log = self.core.log
        for ev in ld.decoder.load_into(ld.data, ld.expires):
            t = type(ev)
            if t is Aux:
                key, val = ev.key, ev.value  # type: ignore[attr-defined]
                ld.aux[key] = val
                if key == b"redis-ver":
                    log.notice(f"Loading RDB produced by version {val.decode('utf-8', 'replace')}")
                elif key == b"ctime":
                    ctime = strtoll(val.decode("ascii", "replace"))
                    age = max(0, self.side.now // 1000 - ctime)
                    log.notice(f"RDB age {age} seconds")
                elif key == b"used-mem":
                    used = strtoll(val.decode("ascii", "replace"))
                    log.notice(f"RDB memory usage when created {used / (1024 * 1024):.2f} Mb")
            elif t is FunctionSkipped:
                ld.functions.append(ev.library_code)  # type: ignore[attr-defined]
            elif t is End:
                # RdbError ("Failed loading library, ...") when a library cannot be loaded
                ld.libraries = self.core.prepare_functions(ld.functions)
                ld.ended = True

    def _load_failed(self, message: str, error: str) -> None:
        """A payload we cannot load. One the master will send again identically (a type or
        encoding pyrepl does not know) is refused with reason ``rdb-unsupported`` and retried
        with a doubling delay (1 s, 2 s, 4 s ... up to LOAD_BACKOFF_MAX_MS), not every second."""
        log = self.core.log
        log.warning(message)
        if error.startswith("Unsupported RDB"):
            self._failures += 1
            delay = min(LOAD_BACKOFF_MAX_MS, CRON_MS << min(self._failures - 1, 10))
            self.retry_at_ms = self.side.now + delay
            log.warning(f"MASTER <-> REPLICA sync: the master's dataset holds what this replica "
                        f"cannot load; retrying in {delay // 1000} seconds (attempt "
                        f"{self._failures})")
            self.side.cancel_handshake(False, I.TRANSFER_ERROR, "rdb-unsupported", error)
            return
        self.side.cancel_handshake(True, I.TRANSFER_ERROR, "load-error", error)

    def _restart_aof(self) -> None:
        """restartAOFAfterSYNC: the AOF starts again on the new dataset (a rewrite, then ON);
        a replica that cannot turn it on exits rather than run without it, as Redis."""
        core = self.core
        for _ in range(10):
            if core.aof.start():
                return
            core.log.warning("Failed enabling the AOF after successful master synchronization! "
                             "Trying it again in one second.")
            core.host.sleep(1)
        core.log.warning("FATAL: this replica instance finished the synchronization with its "
                         "master, but the AOF can't be turned on. Exiting now.")
        core.host.exit_now(1)

    def _loaded(self) -> None:
        """The whole payload is in and verified: swap it in and go online."""
        ld = self._load
        assert ld is not None
        core = self.core
        m = self.manager
        side = self.side
        stream = self.stream
        log = core.log
        now = side.now
        rdbch = self.mode in TWO_CHANNELS
        if rdbch:  # the mark was read: the rdb channel is done (Redis closes it right away)
            side.channel.close(loaded=True)
            if side.channel.awaits_main:   # (Valkey's main connection: not given its stream)
                side.channel.when_main_continues(self._loaded)
                return
        side.emit("rdb_received", bytes=self.transfer_read, duration_ms=now - ld.first_ms,
                   mode=self.mode)
        keys = sum(len(d) for d in ld.data)
        core.persistence.last_load_keys_loaded = keys
        core.persistence.last_load_keys_expired = 0
        log.notice(f"Done loading RDB, keys loaded: {keys}, keys expired: 0.")
        self.reset_backoff()
        side.go(I.LOADED)
        if core.rdb_child_pid != -1 and core.rdb_child_purpose == "disk":
            # Like Redis: a BGSAVE of the old dataset must not overwrite the new one's dump.
            core.log.notice(f"Replica is about to load the RDB file received from the master, "
                            f"but there is a pending RDB child running. Killing process "
                            f"{core.rdb_child_pid} and removing its temp file to avoid any race")
            core.kill_rdb_child()
        # replicationAttachToNewMaster: a new history; our sub-replicas must resync too.
        stream.discard_cached()
        m.master.disconnect_replicas()
        m.free_backlog()
        if core.aof.on:   # (readSyncBulkPayload: the AOF of the old dataset is closed)
            core.aof.stop()
        log.notice("MASTER <-> REPLICA sync: Swapping active DB with loaded DB")
        core.replica_keys_with_expire.clear()   # the dataset is replaced (emptyData)
        for db, data, expires in zip(core.dbs, ld.data, ld.expires, strict=True):
            db.replace(data, expires, lazy=True)    # (discardTempDb: in the background)
        core.install_functions(ld.libraries)   # the master's libraries replace ours
        log.notice("MASTER <-> REPLICA sync: Discarding old DB in background")
        core.dirty += 1
        stream_db = strtoll(ld.aux.get(b"repl-stream-db", b"-1").decode("ascii", "replace"))
        self._use(None)
        ms = stream.attach_new(self.master_replid, self.master_initial_offset, stream_db)
        m.ids.replid = ms.replid if ms.replid else m.ids.replid
        m.master_repl_offset = max(ms.reploff, 0)
        m.ids.clear_secondary()
        if m.backlog is None:
            m.create_backlog()
        log.notice("MASTER <-> REPLICA sync: Finished with success")
        if core.config.appendonly:
            self._restart_aof()
        side.emit("load_done", keys=keys, duration_ms=now - ld.first_ms,
                  bytes=self.transfer_read, mode=self.mode)
        self.transfer_size = -1
        self.transfer_read = 0
        kept, self.resumed_stream = self.resumed_stream, None
        if kept is not None:   # a resumed rdb-channel sync: what its main channel had buffered
            side.channel.adopt(kept)
        if ld.usemark or rdbch:
            stream.send_ack()  # rdb channel: REPLCONF ACK <snapshot offset>
        # a diskless payload's last read is not the stream's (see ReplicaSide.link_is_up)
        side.link_is_up(self.mode, skip_read=ld.usemark and not rdbch)
        if rdbch:
            side.channel.start_drain()
