"""The RDB file: SAVE, BGSAVE and the save points, the load at start (the AOF's or the RDB's,
as Redis's loadDataFromDisk) and DEBUG RELOAD's, and their INFO persistence bookkeeping.

``Persistence`` is the core's (``core.persistence``) and owns that bookkeeping: when the last
save was and how it went (``ok``: a failed one sets the core's MISCONF gate through
``core.refresh_disk_error``), what a BGSAVE started with, the keys the last load read, the
replication id and offset an RDB file carried. The forked child itself is the core's one
child slot (``core.rdb_child_pid`` and its purpose, progress and copy-on-write sample), which
the AOF rewrite and a diskless sync share with BGSAVE; ``core.child_exited`` hands a disk
save's end to ``bgsave_done``.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import TYPE_CHECKING

from pyrepl.core.stats import CowSample
from pyrepl.rdb.decoder import drive

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore
    from pyrepl.rdb.decoder import LoadedRdb


class AofLoadError(Exception):
    """The AOF named by the manifest could not be loaded (the start fails, as Redis exits)."""


class Persistence:
    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.lastsave_ms = core.now_ms       # LASTSAVE, rdb_last_save_time
        self.saves = 0                       # rdb_saves
        self.last_duration_ms = -1           # rdb_last_bgsave_time_sec
        self.started_ms = 0                  # the running BGSAVE's start
        self.last_try_ms = 0                 # the last BGSAVE tried (5 s between failures)
        self.dirty_at_start = 0              # core.dirty when the running BGSAVE forked
        self.last_cow_size = 0               # rdb_last_cow_size
        self.scheduled = False               # BGSAVE SCHEDULE: at the next cron with no child
        self._ok = True
        # INFO's rdb_last_load_*
        self.last_load_keys_loaded = 0
        self.last_load_keys_expired = 0
        # INFO's loading_* while the RDB loads at start (seconds, bytes)
        self.loading_start_s = 0
        self.loading_total_bytes = 0
        self.loading_loaded_bytes = 0
        # What the RDB file loaded at start carried (a restarted replica goes on from it).
        self.loaded_repl_id: bytes | None = None
        self.loaded_repl_offset: int | None = None
        self.loaded_repl_stream_db: int | None = None

    @property
    def ok(self) -> bool:
        """rdb_last_bgsave_status: whether the last save (SAVE or BGSAVE) worked."""
        return self._ok

    @ok.setter
    def ok(self, ok: bool) -> None:
        self._ok = ok
        self.core.refresh_disk_error()

    def rdb_path(self) -> str:
        cfg = self.core.config
        return os.path.join(cfg.dir, cfg.dbfilename)

    def rdb_aux(self) -> dict[str, bytes | str | int]:
        aux: dict[str, bytes | str | int] = {}
        fields = self.core.aux_fields
        if fields is not None:
            aux.update(fields())
        return aux

    # -- saving ---------------------------------------------------------------------------
    def save(self) -> bool:
        """SAVE: write the RDB file in this process."""
        from pyrepl.rdb.encoder import save_rdb_file

        core = self.core
        start = core.now_ms
        try:
            save_rdb_file(self.rdb_path(), core.dbs, aux=self.rdb_aux(),
                          functions=core.function_codes(),
                          checksum=core.config.rdbchecksum, now_ms=core.now_ms,
                          compress=bool(core.config.rdbcompression),
                          key_hook=core.host.key_save_delay_hook())   # (rdb-key-save-delay)
        except OSError as e:
            # (a failed foreground save leaves the last background save's status as it was,
            # as Redis 7.0's rdbSave: no -MISCONF from it)
            core.log.warning(f"Failed saving the DB: {e}")
            return False
        core.log.notice("DB saved on disk")
        self.saves += 1
        core.dirty = 0
        self.lastsave_ms = core.now_ms
        self.ok = True
        self.last_duration_ms = core.now_ms - start
        return True

    def bgsave(self) -> str | None:
        """BGSAVE: fork a child that writes the RDB file. Returns an error text or None."""
        from pyrepl.rdb.encoder import save_rdb_file

        core = self.core
        if core.rdb_child_pid != -1:
            return "ERR Background save already in progress"
        path = self.rdb_path()
        dbs = core.dbs
        aux = self.rdb_aux()
        functions = core.function_codes()
        checksum = core.config.rdbchecksum
        compress = bool(core.config.rdbcompression)
        now = core.now_ms
        key_hook = core.host.key_save_delay_hook()
        progress = core.host.shared_counter()

        def job() -> int:
            try:
                save_rdb_file(path, dbs, aux=aux, functions=functions, checksum=checksum,
                              compress=compress,
                              now_ms=now,
                              key_hook=key_hook, progress=progress.set)
            except OSError:
                return 1
            return 0

        self.last_try_ms = now
        try:
            pid = core.host.fork_child(job, "rdb")
        except OSError as e:
            self.ok = False
            core.log.warning(f"Can't save in background: fork: {e}")
            return f"ERR Can't BGSAVE: fork failed: {e}"
        core.total_forks += 1
        core.rdb_child_pid = pid
        core.rdb_child_purpose = "disk"
        self.started_ms = now
        self.dirty_at_start = core.dirty
        core.save_progress = progress
        core.save_keys_total = sum(len(db.data) for db in dbs)
        core.cow = CowSample()
        core.log.notice(f"Background saving started by pid {pid}")
        return None

    def bgsave_done(self, ok: bool, cow_size: int) -> None:
        """A BGSAVE's child ended (the core freed its child slot)."""
        core = self.core
        self.last_cow_size = cow_size
        self.last_duration_ms = core.now_ms - self.started_ms
        if ok:
            self.saves += 1
            core.log.notice("Background saving terminated with success")
            core.dirty -= self.dirty_at_start
            self.lastsave_ms = self.started_ms
        else:
            core.log.warning("Background saving error")
        self.ok = ok

    def cron(self, now_ms: int) -> None:
        """The save points (and a scheduled BGSAVE), while no child runs."""
        core = self.core
        if core.rdb_child_pid != -1:
            return
        if self.scheduled:
            self.scheduled = False
            self.bgsave()
            return
        cfg = core.config
        if not cfg.save:
            return
        for seconds, changes in cfg.save:
            if core.dirty >= changes and now_ms - self.lastsave_ms > seconds * 1000:
                # After a failed BGSAVE wait 5 s before trying again (CONFIG_BGSAVE_RETRY_DELAY).
                if not self.ok and now_ms - self.last_try_ms < 5000:
                    continue
                core.log.notice(f"{changes} changes in {seconds} seconds. Saving...")
                self.bgsave()
                break

    # -- loading --------------------------------------------------------------------------
    def load(self) -> None:
        """loadDataFromDisk: the AOF when ``appendonly yes`` (then its files opened for
        appending: AppendOnly.boot), else the RDB file, if present. The AOF manifest is read
        in any case (a later ``CONFIG SET appendonly yes`` goes on from it), as Redis does.
        Raises on anything that must stop the start."""
        drive(self.load_steps())

    def load_steps(self) -> Generator[tuple[int, int], None, None]:
        """:meth:`load` a step at a time: an RDB file yields (bytes read, keys read) every
        ``loading-process-events-interval-bytes``, where the shell serves its clients (they
        get -LOADING meanwhile, as Redis's processEventsWhileBlocked)."""
        from pyrepl.aof.manifest import ManifestError

        core = self.core
        aof = core.aof
        log = core.log
        try:
            aof.load_manifest()
        except ManifestError as e:
            log.warning("*** FATAL AOF MANIFEST FILE ERROR ***")
            if e.line_no:
                log.warning(f"Reading the manifest file, at line {e.line_no}")
                log.warning(f">>> '{e.line}'")
            log.warning(e.message)
            raise AofLoadError(e.message) from e    # (logged: the start fails silently now)
        if core.config.appendonly:
            self.load_aof()
            aof.boot()
            return
        yield from self.load_rdb_steps()

    def load_aof(self) -> None:
        """loadAppendOnlyFiles; AofLoadError (the dataset left empty) on failure."""
        from pyrepl.aof.boot import load_into
        from pyrepl.aof.loader import LoadStatus

        core = self.core
        clock_ns = core.host.clock_ns
        t0 = clock_ns()
        status = load_into(core, lambda: clock_ns() / 1e9)
        if status in (LoadStatus.FAILED, LoadStatus.OPEN_ERR):
            for db in core.dbs:      # (nothing of a half-loaded dataset stays)
                db.replace({}, {})
            raise AofLoadError("the append only file could not be loaded")
        if status is not LoadStatus.NOT_EXIST:
            core.log.notice(f"DB loaded from append only file: "
                            f"{(clock_ns() - t0) / 1e9:.3f} seconds")

    def merge_rdb(self, replace: bool) -> bool:
        """DEBUG RELOAD NOFLUSH [MERGE]: the RDB file loaded into the dataset and libraries
        as they are (rdbLoad with RDBFLAGS_ALLOW_DUP when ``replace``). A library already
        there without ``replace`` fails the load (False, nothing changed: the file holds the
        libraries first); a key already there without it is Redis's panic ("Duplicated key
        found in RDB file")."""
        from pyrepl.rdb.decoder import RdbError, load_rdb_file
        from pyrepl.scripting.functions import FunctionLoadError, merge_libraries

        core = self.core
        try:
            loaded = load_rdb_file(self.rdb_path(), len(core.dbs), now_ms=core.now_ms,
                                   verify_checksum=not core.skip_checksum_validation)
            merge_libraries(core, core.prepare_functions(loaded.functions), replace)
        except (OSError, RdbError, FunctionLoadError):
            return False
        for i, db in enumerate(core.dbs):
            expires = loaded.expires[i]
            for key, value in loaded.data[i].items():
                if not replace and key in db.data:
                    core.log.warning(f"RDB has duplicated key '{key.decode('utf-8', 'replace')}'"
                                     f" in DB {db.id}")
                    core.host.panic("Duplicated key found in RDB file")
                db.set(key, value)
                when = expires.get(key)
                if when is not None:
                    db.set_expire(key, when)
        return True

    def load_rdb(self) -> None:
        """The RDB file, if present, as the dataset (a start, DEBUG RELOAD)."""
        drive(self.load_rdb_steps())

    def load_rdb_steps(self) -> Generator[tuple[int, int], None, None]:
        """:meth:`load_rdb` a chunk at a time (``core.loading`` meanwhile, INFO's loading_*
        fields following it; key-load-delay applied by the shell between chunks)."""
        core = self.core
        path = self.rdb_path()
        if not os.path.exists(path):
            return
        # A master drops keys that expired while it was down; a replica keeps them until its
        # master's DEL arrives (as Redis: iAmMaster(), which in cluster mode is the role
        # nodes.conf gave this node, read before the data)
        replica = core.config.replicaof is not None or (
            core.cluster is not None and core.cluster.myself.is_replica)
        was_loading = core.loading
        core.loading = True      # (startLoading: clients get -LOADING meanwhile)
        core.refresh_gate()
        self.loading_start_s = core.now_ms // 1000
        self.loading_total_bytes = os.path.getsize(path)
        self.loading_loaded_bytes = 0
        try:
            steps = self.install_rdb_steps(path, None if replica else core.now_ms,
                                           core.config.loading_process_events_interval_bytes)
            while True:
                try:
                    progress = next(steps)
                except StopIteration as end:
                    loaded = end.value
                    break
                self.loading_loaded_bytes = progress[0]
                yield progress
        finally:
            core.loading = was_loading      # (stopLoading)
            core.refresh_gate()
        aux = loaded.aux
        if b"repl-id" in aux and b"repl-offset" in aux:
            self.loaded_repl_id = aux[b"repl-id"]
            # the db the replication stream had selected (a restarted replica continues in it)
            sdb = aux.get(b"repl-stream-db", b"0")
            self.loaded_repl_stream_db = int(sdb) if sdb.lstrip(b"-").isdigit() else 0
            try:
                self.loaded_repl_offset = int(aux[b"repl-offset"])
            except ValueError:
                self.loaded_repl_offset = None
            rid = self.loaded_repl_id.decode("ascii", "replace")
            if (core.replication is not None and self.loaded_repl_offset is not None
                    and len(rid) == 40):
                core.replication.restore_from_rdb(rid, self.loaded_repl_offset, replica)
        done = f"Done loading RDB, keys loaded: {loaded.keys_loaded}, " \
               f"keys expired: {loaded.keys_expired}"
        if loaded.empty_keys_skipped:       # (a warning then, as Redis's)
            core.log.warning(f"{done}, empty keys skipped: {loaded.empty_keys_skipped}.")
        else:
            core.log.notice(done + ".")

    def install_rdb(self, path: str, now_ms: int | None) -> LoadedRdb:
        """An RDB file's dataset and function libraries in place of ours (keys expired at
        ``now_ms`` dropped; None keeps them), INFO's rdb_last_load_* set; the load at start
        and DEBUG RELOAD, and an AOF's RDB base. RdbError leaves ours as it was."""
        return drive(self.install_rdb_steps(path, now_ms))

    def install_rdb_steps(self, path: str, now_ms: int | None, chunk_size: int = 8 << 20
                          ) -> Generator[tuple[int, int], None, LoadedRdb]:
        """:meth:`install_rdb` a chunk of ``chunk_size`` bytes at a time (yields bytes and
        keys read so far)."""
        from pyrepl.rdb.decoder import load_rdb_file_steps

        core = self.core
        loaded = yield from load_rdb_file_steps(
            path, len(core.dbs), now_ms=now_ms, chunk_size=chunk_size,
            verify_checksum=not core.skip_checksum_validation,
            deep=core.config.sanitize_dump_payload == "yes")
        for key in loaded.empty_keys:
            core.log.warning("rdbLoadObject skipping empty key: "
                             + key.decode("utf-8", "backslashreplace"))
        libraries = core.prepare_functions(loaded.functions)   # RdbError if one fails
        for i, db in enumerate(core.dbs):
            db.replace(loaded.data[i], loaded.expires[i])
        core.install_functions(libraries)
        self.last_load_keys_loaded = loaded.keys_loaded
        self.last_load_keys_expired = loaded.keys_expired
        return loaded
