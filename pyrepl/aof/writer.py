"""The AOF writer: the buffer every write is appended to, and its flush to the incr file.

Theory of operation (Redis's feedAppendOnlyFile and flushAppendOnlyFile): every write the
server propagates arrives at :meth:`AofWriter.feed` exactly as it goes to the replicas (a
relative expiry already made absolute, a transaction wrapped in MULTI/EXEC, a script's
effects, an expired key's DEL), preceded by a SELECT when its db is not the last one written
and, with ``aof-timestamp-enabled``, a ``#TS:<unix time>`` annotation when the second changed.
It only appends to ``buf``; :meth:`AofWriter.flush` writes the buffer to the file with one
write(2) before any reply leaves (the I/O shell holds the replies of a pass until then), and
then applies the fsync policy:

* ``always``: fdatasync in this thread before the replies go out; a failed write or fsync
  exits the process (the replies cannot be taken back: Redis's contract).
* ``everysec``: fdatasync in the background thread (:mod:`pyrepl.net.bio`) at most once a
  second; while that fsync still runs the write is postponed up to two seconds, then done
  anyway and counted in ``aof_delayed_fsync`` ("Asynchronous AOF fsync is taking too long").
* ``no``: the kernel decides.

A failed write under everysec/no keeps the buffer, sets ``write_ok`` False (writes then get
``-MISCONF``) and is retried at every flush; a short write is truncated away first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from pyrepl.resp.writer import encode_command


class LogPort(Protocol):
    """The server's log, as the AOF writes to it (Redis's levels)."""

    def notice(self, msg: str) -> None: ...
    def warning(self, msg: str) -> None: ...


class FsyncPort(Protocol):
    """The background fsync the I/O shell runs (pyrepl/net/bio.py, Redis's bio thread)."""

    error: int

    def pending(self) -> int: ...
    def fsync(self, fd: int) -> None: ...
    def fsync_and_close(self, fd: int) -> None: ...


class InlineFsync:
    """The port done at once in the caller's thread (a sans-io core with no shell)."""

    error = 0

    def pending(self) -> int:
        return 0

    def fsync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
            self.error = 0
        except OSError as e:
            self.error = e.errno or 5

    def fsync_and_close(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError:
            pass
        os.close(fd)


AOF_WRITE_LOG_ERROR_RATE = 30     # seconds between two logs of a failing write


def annotation(now_s: int) -> bytes:
    """An ``aof-timestamp-enabled`` line (genAofTimestampAnnotationIfNeeded's text)."""
    return b"#TS:%d\r\n" % now_s


class AofWriter:
    def __init__(self, log: LogPort, bio: FsyncPort,
                 exit_process: Callable[[int], None],
                 latency: Callable[[str, int], None],
                 clock_s: Callable[[], int] = lambda: 0) -> None:
        self.log = log
        self.bio = bio
        self.exit_process = exit_process
        self.latency = latency
        self.clock_s = clock_s       # the server's unix time (server.unixtime)
        self.buf = bytearray()
        self.fd = -1
        self.accepting = False        # feed() appends (state ON, or WAIT_REWRITE with a child)
        self.selected_db = -1         # aof_selected_db
        self.timestamps = False       # aof-timestamp-enabled
        self.cur_timestamp = 0
        self.current_size = 0         # aof_current_size: base + incr files
        self.last_incr_size = 0       # aof_last_incr_size
        self.last_incr_fsync_offset = 0
        self.last_fsync_s = 0         # aof_last_fsync (unix seconds)
        self.flush_postponed_start = 0
        # DEBUG AOF-FLUSH-SLEEP: what sleeps before each write of a non-empty buffer, or None
        self.flush_sleep: Callable[[], None] | None = None
        self.delayed_fsync = 0        # aof_delayed_fsync
        self.write_ok = True          # aof_last_write_status
        self.write_errno = 0          # aof_last_write_errno
        self._last_error_log_s = 0

    # -- feeding --------------------------------------------------------------------------
    def feed(self, db_id: int, argv: list[bytes], data: bytes | bytearray | None = None) -> None:
        """feedAppendOnlyFile: ``data`` is the command's RESP when the caller has it."""
        if self.accepting:
            self._head(db_id)
            self.buf += data if data is not None else encode_command(argv)

    def feed_span(self, db_id: int, data: bytes | bytearray | memoryview) -> None:
        """Several writes of one db as they arrived (a pipelining client's run)."""
        if self.accepting:
            self._head(db_id)
            self.buf += data

    def _head(self, db_id: int) -> None:
        """What goes before a command: a ``#TS:`` annotation when the second changed
        (genAofTimestampAnnotationIfNeeded), a SELECT when the db is not the last one's."""
        buf = self.buf
        if self.timestamps:
            now_s = self.clock_s()
            if self.cur_timestamp < now_s:
                self.cur_timestamp = now_s
                buf += annotation(now_s)
        if db_id != self.selected_db and db_id >= 0:
            self.selected_db = db_id
            buf += encode_command([b"SELECT", b"%d" % db_id])

    # -- the file -------------------------------------------------------------------------
    def use_fd(self, fd: int, size: int) -> None:
        """A new incr file to append to (its current size); the old one is fsynced and closed
        in the background, as openNewIncrAofForAppend does."""
        if self.fd != -1:
            self.bio.fsync_and_close(self.fd)
        self.fd = fd
        self.last_incr_size = size
        self.last_incr_fsync_offset = size

    def close(self) -> None:
        if self.fd != -1:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def fsync_now(self) -> bool:
        """redis_fsync in this thread (shutdown, stopAppendOnly); False on failure."""
        if self.fd == -1:
            return True
        try:
            os.fdatasync(self.fd)
        except OSError as e:
            self.log.warning(f"Fail to fsync the AOF file: {os.strerror(e.errno or 5)}.")
            return False
        self.last_incr_fsync_offset = self.last_incr_size
        self.last_fsync_s = self.clock_s()
        return True

    def _write(self, data: bytearray) -> tuple[int, int]:
        """aofWrite: write everything, retrying short writes; (written, errno)."""
        view = memoryview(data)
        total = 0
        while total < len(data):
            try:
                n = os.write(self.fd, view[total:])
            except InterruptedError:
                continue
            except OSError as e:
                return total if total else -1, e.errno or 5
            if n == 0:
                return total, 28     # (ENOSPC: nothing more goes in)
            total += n
        return total, 0

    def flush(self, force: bool, policy: str, no_fsync_on_rewrite: bool,
              child_active: bool, clock_ms: Callable[[], int]) -> None:
        """flushAppendOnlyFile(force)."""
        now_s = self.clock_s()
        sync_in_progress = False
        if not self.buf:
            # Nothing to write, but an fsync may still be due for what was written (everysec
            # once no fsync runs; always after a switch from everysec).
            if self.last_incr_fsync_offset != self.last_incr_size and (
                    policy == "always" or not self.bio.pending()):
                self._fsync_policy(now_s, policy, no_fsync_on_rewrite, child_active, False,
                                   clock_ms)
            return
        if self.fd == -1:
            return
        if policy == "everysec":
            sync_in_progress = self.bio.pending() > 0
        if policy == "everysec" and not force and sync_in_progress:
            if self.flush_postponed_start == 0:
                self.flush_postponed_start = now_s
                return
            if now_s - self.flush_postponed_start < 2:
                return
            self.delayed_fsync += 1
            self.log.notice("Asynchronous AOF fsync is taking too long (disk is busy?). "
                            "Writing the AOF buffer without waiting for fsync to complete, "
                            "this may slow down Redis.")
        if self.flush_sleep is not None:
            self.flush_sleep()
        t0 = clock_ms()
        nwritten, err = self._write(self.buf)
        took = clock_ms() - t0
        if sync_in_progress:
            self.latency("aof-write-pending-fsync", took)
        elif child_active:
            self.latency("aof-write-active-child", took)
        else:
            self.latency("aof-write-alone", took)
        self.latency("aof-write", took)
        self.flush_postponed_start = 0
        if nwritten != len(self.buf):
            can_log = now_s - self._last_error_log_s > AOF_WRITE_LOG_ERROR_RATE
            if can_log:
                self._last_error_log_s = now_s
            if nwritten == -1:
                if can_log:
                    self.log.warning(f"Error writing to the AOF file: {os.strerror(err)}")
                self.write_errno = err
            else:
                if can_log:
                    self.log.warning(f"Short write while writing to the AOF file: "
                                     f"(nwritten={nwritten}, expected={len(self.buf)})")
                try:
                    os.ftruncate(self.fd, self.last_incr_size)
                    nwritten = -1
                except OSError as e:
                    if can_log:
                        self.log.warning(f"Could not remove short write from the append-only "
                                         f"file.  Redis may refuse to load the AOF the next "
                                         f"time it starts.  ftruncate: {os.strerror(e.errno or 5)}")
                self.write_errno = 28
            if policy == "always":
                self.log.warning("Can't recover from AOF write error when the AOF fsync policy "
                                 "is 'always'. Exiting...")
                self.exit_process(1)
                return
            self.write_ok = False
            if nwritten > 0:
                self.current_size += nwritten
                self.last_incr_size += nwritten
                del self.buf[:nwritten]
            return
        if not self.write_ok:
            self.log.warning("AOF write error looks solved, Redis can write again.")
            self.write_ok = True
        self.current_size += nwritten
        self.last_incr_size += nwritten
        self.buf.clear()
        self._fsync_policy(now_s, policy, no_fsync_on_rewrite, child_active, sync_in_progress,
                           clock_ms)

    def _fsync_policy(self, now_s: int, policy: str, no_fsync_on_rewrite: bool,
                      child_active: bool, sync_in_progress: bool,
                      clock_ms: Callable[[], int]) -> None:
        """flushAppendOnlyFile's try_fsync part."""
        if no_fsync_on_rewrite and child_active:
            return
        if policy == "always":
            t0 = clock_ms()
            try:
                os.fdatasync(self.fd)
            except OSError as e:
                self.log.warning(f"Can't persist AOF for fsync error when the AOF fsync policy "
                                 f"is 'always': {os.strerror(e.errno or 5)}. Exiting...")
                self.exit_process(1)
                return
            self.latency("aof-fsync-always", clock_ms() - t0)
            self.last_incr_fsync_offset = self.last_incr_size
            self.last_fsync_s = now_s
        elif policy == "everysec" and now_s > self.last_fsync_s:
            if not sync_in_progress:
                self.bio.fsync(self.fd)
                self.last_incr_fsync_offset = self.last_incr_size
            self.last_fsync_s = now_s
