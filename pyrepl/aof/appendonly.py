"""The AOF as the server sees it: state, files, rewrite scheduling, INFO (Redis's aof.c).

Theory of operation: one :class:`AppendOnly` per server (``core.aof``), driven by a few calls:

* :meth:`boot` after the dataset was loaded at start with ``appendonly yes``
  (aofOpenIfNeededOnServerStart: a base written at once when there are no files yet, the last
  incr file opened for appending, the manifest persisted, history deleted);
* writes arrive through the propagation fan-out (:mod:`pyrepl.aof.feed`) into the writer's
  buffer; :meth:`before_reply` writes it (and fsyncs with ``always``) before the I/O shell lets
  any reply of the pass go out; :meth:`cron` does what serverCron does (postponed flushes,
  everysec fsyncs, scheduled and automatic rewrites);
* :meth:`start` / :meth:`stop` are ``CONFIG SET appendonly yes|no`` (the first waits for a
  rewrite: WAIT_REWRITE); :meth:`rewrite_background` is BGREWRITEAOF, :meth:`child_done` its
  child's end; :meth:`shutdown` the flush and fsync at exit.

What it uses of the server is the :class:`AofServer` port: the config, the log, the clock, the
child slot and the fork, the dataset for a rewrite's child, the latency monitor.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from pyrepl.aof import manifest as mf
from pyrepl.aof.manifest import Manifest
from pyrepl.aof.rewrite import temp_base_path, write_base
from pyrepl.aof.states import AofInput, AofState, move
from pyrepl.aof.writer import AofWriter, FsyncPort, LogPort, annotation
from pyrepl.config import Config

AOF_REWRITE_LIMITE_THRESHOLD = 3
AOF_REWRITE_LIMITE_MAX_MINUTES = 60


class AofHost(Protocol):
    """What the AOF asks of the I/O shell (core.Host): the fork and the child, the clock."""

    def fork_child(self, job: Callable[[], int], purpose: str) -> int: ...
    def kill_child(self, pid: int) -> None: ...
    def key_save_delay_hook(self) -> Callable[[], None] | None: ...
    def shared_counter(self) -> Any: ...
    def exit_now(self, code: int) -> None: ...
    @staticmethod
    def clock_ns() -> int: ...


class AofServer(Protocol):
    """What the AOF reads and calls of the server (ServerCore satisfies it)."""

    config: Config
    log: LogPort
    now_ms: int
    dbs: list[Any]
    rdb_child_pid: int
    rdb_child_purpose: str
    total_forks: int
    save_progress: Any
    save_keys_total: int

    @property
    def host(self) -> AofHost: ...   # (read-only: the server's Host stands for it)

    def latency_sample(self, event: str, ms: int) -> None: ...
    def refresh_stream_live(self) -> None: ...
    def refresh_disk_error(self) -> None: ...
    def function_codes(self) -> list[bytes]: ...


class AppendOnly:
    def __init__(self, server: AofServer, fsync: FsyncPort) -> None:
        self.server = server
        self.cfg = server.config
        self.log = server.log
        self.fsync = fsync
        self.state = AofState.OFF
        self.writer = AofWriter(self.log, fsync, self._exit, server.latency_sample,
                                lambda: server.now_ms // 1000)
        self.manifest = Manifest()
        self.rewrite_base_size = 0         # aof_rewrite_base_size
        self.rewrite_scheduled = False     # aof_rewrite_scheduled
        self.rewrite_time_start = -1       # unix seconds, -1: none running
        self.rewrite_time_last = -1
        self.last_bgrewrite_ok = True
        self.rewrites = 0                  # stat_aof_rewrites
        self.consecutive_failures = 0      # stat_aofrw_consecutive_failures
        self.last_cow_size = 0
        self._limit_delay_min = 0
        self._limit_next_s = 0
        self.child_pid = -1
        self._fsync_error_seen = 0
        self.writer.timestamps = bool(self.cfg.aof_timestamp_enabled)   # (and on CONFIG SET)

    # -- paths ----------------------------------------------------------------------------
    @property
    def dirpath(self) -> str:
        return os.path.join(self.cfg.dir, self.cfg.appenddirname)

    @property
    def filename(self) -> str:
        name: str = self.cfg.appendfilename
        return name

    @property
    def on(self) -> bool:
        return self.state is not AofState.OFF

    def _now_s(self) -> int:
        return self.server.now_ms // 1000

    def _exit(self, code: int) -> None:
        self.server.host.exit_now(code)

    def _go(self, inp: AofInput) -> None:
        self.state = move(self.state, inp)
        self._refresh_accepting()
        self.server.refresh_stream_live()
        self.server.refresh_disk_error()

    def _refresh_accepting(self) -> None:
        """feedAppendOnlyFile's condition, kept where the write path tests it: AOF is ON, or
        waits for its first rewrite and that rewrite's child runs."""
        self.writer.accepting = self.state is AofState.ON or (
            self.state is AofState.WAIT_REWRITE and self.child_pid != -1)

    def _timestamp(self) -> bytes:
        """What a rewrite's base starts with (genAofTimestampAnnotationIfNeeded(1))."""
        return annotation(self._now_s()) if self.cfg.aof_timestamp_enabled else b""

    # -- start ----------------------------------------------------------------------------
    def load_manifest(self) -> None:
        """aofLoadManifestFromDisk (ManifestError / OSError: the start fails)."""
        self.manifest = mf.load(self.dirpath, self.filename)

    def boot(self) -> None:
        """aofOpenIfNeededOnServerStart, then aofDelHistoryFiles. Raises OSError (the start
        fails, as Redis exits)."""
        log = self.log
        try:
            mf.dir_create_if_missing(self.dirpath)
        except OSError as e:
            log.warning(f"Can't open or create append-only dir {self.cfg.appenddirname}: "
                        f"{e.strerror}")
            raise
        am = self.manifest
        had_incr = bool(am.incr)
        if am.base is None and not am.incr:
            name = am.new_base(self.filename, self.cfg.aof_use_rdb_preamble)
            path = os.path.join(self.dirpath, name)
            try:
                self._write_base_now(path)
            except OSError as e:
                log.warning(f"Write error writing append only file on disk: {e.strerror}")
                raise
            log.notice(f"Creating AOF base file {name} on server start")
        name = am.last_incr(self.filename)
        path = os.path.join(self.dirpath, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            log.warning(f"Can't open the append-only file {name}: {e.strerror}")
            raise
        mf.persist(self.dirpath, self.filename, am)
        size = os.fstat(fd).st_size
        self.writer.use_fd(fd, size)
        self.writer.selected_db = -1
        self.writer.last_fsync_s = self._now_s()
        if self.writer.current_size == 0:
            self.writer.current_size = self._files_size()
        log.notice(f"{'Opening' if had_incr else 'Creating'} AOF incr file {name} on server "
                   f"start")
        self._go(AofInput.BOOT)
        self.delete_history()

    def loaded(self, total_size: int, base_size: int) -> None:
        """What loading measured (aof_current_size, aof_rewrite_base_size)."""
        self.writer.current_size = total_size
        self.rewrite_base_size = base_size

    def _files_size(self) -> int:
        total = 0
        for info in self.manifest.files():
            try:
                total += os.stat(os.path.join(self.dirpath, info.name)).st_size
            except OSError:
                pass
        return total

    def _write_base_now(self, path: str) -> None:
        """rewriteAppendOnlyFile in this process (the base of an empty start)."""
        srv = self.server
        write_base(path, srv.dbs, rdb_preamble=self.cfg.aof_use_rdb_preamble,
                   functions=srv.function_codes(),
                   checksum=self.cfg.rdbchecksum, now_ms=srv.now_ms, timestamp=self._timestamp(),
                   compress=bool(self.cfg.rdbcompression))

    # -- the write path -------------------------------------------------------------------
    def before_reply(self) -> None:
        """beforeSleep's flushAppendOnlyFile(0): the buffer written (and fsynced with
        ``always``) before the replies of this pass leave."""
        self._flush(False)

    def flush_force(self) -> None:
        """flushAppendOnlyFile(1): written even behind a running background fsync."""
        self._flush(True)

    def _flush(self, force: bool) -> None:
        w = self.writer
        cfg = self.cfg
        ok = w.write_ok
        w.flush(force, cfg.appendfsync, cfg.no_appendfsync_on_rewrite,
                self.server.rdb_child_pid != -1, self._clock_ms)
        if w.write_ok is not ok:     # (writes refused with MISCONF, or allowed again)
            self.server.refresh_disk_error()

    def _clock_ms(self) -> int:
        return self.server.host.clock_ns() // 1_000_000

    @property
    def write_error(self) -> str | None:
        """writeCommandsDeniedByDiskError's AOF part: the MISCONF text while the AOF cannot
        be written (or its background fsync failed), else None."""
        if self.state is AofState.OFF:
            return None
        err = 0 if self.writer.write_ok else self.writer.write_errno
        if not err and self.fsync.error:
            err = self.fsync.error
        if not err:
            return None
        return f"MISCONF Errors writing to the AOF file: {os.strerror(err)}"

    # -- cron -----------------------------------------------------------------------------
    def cron(self, now_ms: int, child_active: bool) -> None:
        """serverCron's AOF parts."""
        w = self.writer
        now_s = now_ms // 1000
        if not child_active and self.rewrite_scheduled and not self._limited(now_s):
            self.rewrite_background()
            child_active = self.server.rdb_child_pid != -1
        if (self.state is AofState.ON and not child_active and self.cfg.auto_aof_rewrite_percentage
                and w.current_size > self.cfg.auto_aof_rewrite_min_size):
            base = self.rewrite_base_size or 1
            growth = w.current_size * 100 // base - 100
            if growth >= self.cfg.auto_aof_rewrite_percentage and not self._limited(now_s):
                self.log.notice(f"Starting automatic rewriting of AOF on {growth}% growth")
                self.rewrite_background()
        if self.on:
            # beforeSleep flushes every loop pass, which is also how the everysec fsync and
            # a postponed write happen while no client writes; a failed write is retried.
            self.before_reply()
        if self.fsync.error != self._fsync_error_seen:   # (the background fsync's outcome)
            self._fsync_error_seen = self.fsync.error
            self.server.refresh_disk_error()

    def _limited(self, now_s: int) -> bool:
        """aofRewriteLimited: after 3 failed rewrites in a row, wait 1, 2, 4 ... 60 minutes
        between automatic tries (BGREWRITEAOF resets the count)."""
        if self.consecutive_failures < AOF_REWRITE_LIMITE_THRESHOLD:
            self._limit_delay_min = self._limit_next_s = 0
            return False
        if self._limit_next_s:
            if now_s < self._limit_next_s:
                return True
            self._limit_next_s = 0
            return False
        self._limit_delay_min = min(AOF_REWRITE_LIMITE_MAX_MINUTES,
                                    self._limit_delay_min * 2 or 1)
        self._limit_next_s = now_s + self._limit_delay_min * 60
        self.log.warning(f"Background AOF rewrite has repeatedly failed and triggered the "
                         f"limit, will retry in {self._limit_delay_min} minutes")
        return True

    # -- CONFIG SET appendonly ------------------------------------------------------------
    def start(self, in_exec: bool = False) -> bool:
        """startAppendOnly: WAIT_REWRITE, and a rewrite now or scheduled. False (and OFF) when
        the rewrite cannot start."""
        srv = self.server
        self._go(AofInput.ENABLE)
        if srv.rdb_child_pid != -1 and srv.rdb_child_purpose != "aof":
            self.rewrite_scheduled = True
            self.log.warning("AOF was enabled but there is already another background "
                             "operation. An AOF background was scheduled to start when "
                             "possible.")
        elif in_exec:
            self.rewrite_scheduled = True
            self.log.warning("AOF was enabled during a transaction. An AOF background was "
                             "scheduled to start when possible.")
        else:
            if srv.rdb_child_pid != -1:
                self.log.warning("AOF was enabled but there is already an AOF rewriting in "
                                 "background. Stopping background AOF and starting a rewrite "
                                 "now.")
                self.kill_child()
            if not self.rewrite_background():
                self._go(AofInput.FAILED)
                self.log.warning("Redis needs to enable the AOF but can't trigger a background "
                                 "AOF rewrite operation. Check the above logs for more info "
                                 "about the error.")
                return False
        self.writer.last_fsync_s = self._now_s()
        if self.fsync.error:
            self.log.warning("AOF reopen, just ignore the AOF fsync error in bio job")
            self.fsync.error = 0
        if not self.writer.write_ok:
            self.log.warning("AOF reopen, just ignore the last error.")
            self.writer.write_ok = True
        self.server.refresh_disk_error()
        return True

    def stop(self) -> None:
        """stopAppendOnly."""
        w = self.writer
        self.flush_force()
        w.fsync_now()
        w.close()
        w.selected_db = -1
        self.rewrite_scheduled = False
        w.last_incr_size = w.last_incr_fsync_offset = 0
        self.kill_child()
        w.buf = bytearray()
        self._go(AofInput.STOP)

    # -- rewrite --------------------------------------------------------------------------
    def rewrite_background(self) -> bool:
        """rewriteAppendOnlyFileBackground: True when the child started."""
        srv = self.server
        log = self.log
        if srv.rdb_child_pid != -1:
            return False
        try:
            mf.dir_create_if_missing(self.dirpath)
        except OSError as e:
            log.warning(f"Can't open or create append-only dir {self.cfg.appenddirname}: "
                        f"{e.strerror}")
            self.last_bgrewrite_ok = False
            return False
        w = self.writer
        w.selected_db = -1
        self.flush_force()
        if not self._open_new_incr():
            self.last_bgrewrite_ok = False
            return False
        self.rewrites += 1
        dbs = srv.dbs
        cfg = self.cfg
        codes = srv.function_codes()
        now = srv.now_ms
        ts = self._timestamp()
        host = srv.host
        key_hook = host.key_save_delay_hook()
        progress = host.shared_counter()
        dirpath = cfg.dir
        preamble = cfg.aof_use_rdb_preamble
        checksum = cfg.rdbchecksum
        compress = bool(cfg.rdbcompression)
        incremental = bool(cfg.aof_rewrite_incremental_fsync)

        def job() -> int:
            path = temp_base_path(dirpath, os.getpid())
            try:
                write_base(path, dbs, rdb_preamble=preamble, functions=codes,
                           checksum=checksum, now_ms=now, timestamp=ts, key_hook=key_hook,
                           progress=progress.set, incremental_fsync=incremental,
                           compress=compress)
            except OSError:
                return 1
            return 0

        try:
            pid = host.fork_child(job, "aof")
        except OSError as e:
            self.last_bgrewrite_ok = False
            log.warning(f"Can't rewrite append only file in background: fork: {e}")
            return False
        srv.total_forks += 1
        srv.rdb_child_pid = pid
        srv.rdb_child_purpose = "aof"
        srv.save_progress = progress
        srv.save_keys_total = sum(len(db.data) for db in dbs)
        self.child_pid = pid
        self._refresh_accepting()
        log.notice(f"Background append only file rewriting started by pid {pid}")
        self.rewrite_scheduled = False
        self.rewrite_time_start = self._now_s()
        return True

    def _open_new_incr(self) -> bool:
        """openNewIncrAofForAppend: False (nothing changed) when the file or the manifest
        cannot be written."""
        if self.state is AofState.OFF:
            return True
        temp: Manifest | None = None
        if self.state is AofState.WAIT_REWRITE:
            name = mf.temp_incr_name(self.filename)
        else:
            temp = self.manifest.copy()
            name = temp.new_incr(self.filename)
        path = os.path.join(self.dirpath, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
        except OSError as e:
            self.log.warning(f"Can't open the append-only file {name}: {e.strerror}")
            return False
        if temp is not None:
            try:
                mf.persist(self.dirpath, self.filename, temp)
            except OSError as e:
                self.log.warning(f"Can't persist the AOF manifest: {e.strerror}")
                os.close(fd)
                return False
            self.manifest = temp
        self.log.notice(f"Creating AOF incr file {name} on background rewrite")
        w = self.writer
        w.use_fd(fd, 0)
        w.last_fsync_s = self._now_s()
        return True

    def child_done(self, exitcode: int, by_signal: int = 0) -> None:
        """backgroundRewriteDoneHandler."""
        log = self.log
        pid = self.child_pid
        self.child_pid = -1
        tmp = temp_base_path(self.cfg.dir, pid)
        if not by_signal and exitcode == 0:
            log.notice("Background AOF rewrite terminated with success")
            self._install(tmp)
        elif not by_signal:
            self._failed()
            log.warning("Background AOF rewrite terminated with error")
        else:
            if by_signal != 10:   # (SIGUSR1: killed on purpose, not an error)
                self._failed()
            log.warning(f"Background AOF rewrite terminated by signal {by_signal}")
        _unlink(tmp)
        if self.state is AofState.WAIT_REWRITE:   # (the rewrite failed: try again)
            self.writer.buf = bytearray()
            self._refresh_accepting()
            self.writer.close()
            temp_incr = mf.temp_incr_name(self.filename)
            log.notice(f"Removing the temp incr aof file {temp_incr} in the background")
            _unlink(os.path.join(self.dirpath, temp_incr))
            self.rewrite_scheduled = True
        self.rewrite_time_last = self._now_s() - self.rewrite_time_start \
            if self.rewrite_time_start >= 0 else -1
        self.rewrite_time_start = -1

    def _install(self, tmp: str) -> None:
        """The rewrite's success path: the base renamed in, the manifest switched."""
        log = self.log
        temp = self.manifest.copy()
        base_name = temp.new_base(self.filename, self.cfg.aof_use_rdb_preamble)
        base_path = os.path.join(self.dirpath, base_name)
        if not self._rename("base", tmp, base_path):
            self._failed()
            return
        new_incr_path = None
        if self.state is AofState.WAIT_REWRITE:
            temp_incr = os.path.join(self.dirpath, mf.temp_incr_name(self.filename))
            new_incr_path = os.path.join(self.dirpath, temp.new_incr(self.filename))
            if not self._rename("incr", temp_incr, new_incr_path):
                _unlink(base_path)
                self._failed()
                return
        temp.mark_rewritten_incr_as_history(keep_last=self.writer.fd != -1)
        try:
            mf.persist(self.dirpath, self.filename, temp)
        except OSError as e:
            log.warning(f"Can't persist the AOF manifest: {e.strerror}")
            _unlink(base_path)
            if new_incr_path is not None:
                _unlink(new_incr_path)
            self._failed()
            return
        self.manifest = temp
        w = self.writer
        if self.state is not AofState.OFF:
            try:
                base_size = os.stat(base_path).st_size
            except OSError:
                base_size = 0
            w.current_size = base_size + w.last_incr_size
            self.rewrite_base_size = w.current_size
        self.delete_history()
        self.last_bgrewrite_ok = True
        self.consecutive_failures = 0
        log.notice("Background AOF rewrite finished successfully")
        if self.state is AofState.WAIT_REWRITE:
            self._go(AofInput.REWRITTEN)

    def _rename(self, kind: str, src: str, dst: str) -> bool:
        """The rewrite's temporary base or incr file renamed to its name, logged as Redis."""
        try:
            os.rename(src, dst)
        except OSError as e:
            self.log.warning(f"Error trying to rename the temporary AOF {kind} file {src} into "
                             f"{dst}: {e.strerror}")
            return False
        self.log.notice(f"Successfully renamed the temporary AOF {kind} file "
                        f"{os.path.basename(src)} into {os.path.basename(dst)}")
        return True

    def _failed(self) -> None:
        self.last_bgrewrite_ok = False
        self.consecutive_failures += 1

    def delete_history(self) -> None:
        """aofDelHistoryFiles (unless aof-disable-auto-gc)."""
        am = self.manifest
        if self.cfg.aof_disable_auto_gc or not am.history:
            return
        for info in am.history:
            self.log.notice(f"Removing the history file {info.name} in the background")
            _unlink(os.path.join(self.dirpath, info.name))
        am.history = []
        am.dirty = True
        try:
            mf.persist(self.dirpath, self.filename, am)
        except OSError as e:
            self.log.warning(f"Can't persist the AOF manifest: {e.strerror}")

    def kill_child(self) -> None:
        """killAppendOnlyChild."""
        srv = self.server
        if self.child_pid == -1 or srv.rdb_child_pid != self.child_pid:
            return
        pid = self.child_pid
        self.log.notice(f"Killing running AOF rewrite child: {pid}")
        srv.host.kill_child(pid)
        srv.rdb_child_pid = -1
        srv.save_progress = None
        _unlink(temp_base_path(self.cfg.dir, pid))
        self.child_pid = -1
        self.rewrite_time_start = -1
        self._refresh_accepting()

    # -- shutdown -------------------------------------------------------------------------
    def shutdown(self, force: bool) -> bool:
        """prepareForShutdown's AOF part; False when it must not exit (the initial AOF is
        still being written)."""
        log = self.log
        if self.child_pid != -1:
            if self.state is AofState.WAIT_REWRITE:
                if force:
                    log.warning("Writing initial AOF. Exit anyway.")
                else:
                    log.warning("Writing initial AOF, can't exit.")
                    return False
            log.warning("There is a child rewriting the AOF. Killing it!")
            self.kill_child()
        if self.state is not AofState.OFF:
            log.notice("Calling fsync() on the AOF file.")
            self.flush_force()
            self.writer.fsync_now()
        return True

    # -- INFO -----------------------------------------------------------------------------
    def info_fields(self, now_ms: int) -> list[tuple[str, object]]:
        now_s = now_ms // 1000
        w = self.writer
        running = self.child_pid != -1
        return [
            ("aof_enabled", int(self.state is not AofState.OFF)),
            ("aof_rewrite_in_progress", int(running)),
            ("aof_rewrite_scheduled", int(self.rewrite_scheduled)),
            ("aof_last_rewrite_time_sec", self.rewrite_time_last),
            ("aof_current_rewrite_time_sec", now_s - self.rewrite_time_start if running else -1),
            ("aof_last_bgrewrite_status", "ok" if self.last_bgrewrite_ok else "err"),
            ("aof_rewrites", self.rewrites),
            ("aof_rewrites_consecutive_failures", self.consecutive_failures),
            ("aof_last_write_status", "ok" if w.write_ok and not self.fsync.error else "err"),
            ("aof_last_cow_size", self.last_cow_size),
        ]

    def enabled_fields(self) -> list[tuple[str, object]]:
        """The fields INFO adds while ``appendonly`` is yes."""
        w = self.writer
        return [
            ("aof_current_size", w.current_size),
            ("aof_base_size", self.rewrite_base_size),
            ("aof_pending_rewrite", int(self.rewrite_scheduled)),
            ("aof_buffer_length", len(w.buf)),
            ("aof_pending_bio_fsync", self.fsync.pending()),
            ("aof_delayed_fsync", w.delayed_fsync),
        ]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
