"""Redis's bio threads: the AOF's background fsync (BIO_AOF_FSYNC and BIO_CLOSE_AOF) and the
lazy free (BIO_LAZY_FREE).

Theory of operation: with ``appendfsync everysec`` the main thread writes the AOF buffer with
write(2) and hands the fdatasync(2) to this thread at most once a second, so a slow disk stalls
the fsync, not the server. :meth:`pending` is bioPendingJobsOfType(BIO_AOF_FSYNC): while a job
is queued or running the writer postpones its next write (flushAppendOnlyFile's delay rule).
A failed fsync is kept (``error``) for INFO's aof_last_write_status and the MISCONF gate, and
cleared by the next fsync that works, as Redis's aof_bio_fsync_status.

:class:`BackgroundFree` is the core's lazy-free port (pyrepl/core/lazyfree.py): a job is a list
of objects the main thread no longer references; the thread clears the list (their last
references: the deallocation runs here) and moves the job's count from pending to freed.
"""

from __future__ import annotations

import os
import queue
import threading


class BackgroundFsync:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[int, bool]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0       # fsync jobs queued or running
        self._thread: threading.Thread | None = None
        self.error = 0          # errno of the last failed fsync (0: the last one worked)

    def pending(self) -> int:
        return self._pending

    def fsync(self, fd: int) -> None:
        """bioCreateFsyncJob: fdatasync ``fd`` in the background."""
        self._submit(fd, close=False)

    def fsync_and_close(self, fd: int) -> None:
        """bioCreateCloseJob(fd, need_fsync): the incr file a rewrite replaced."""
        self._submit(fd, close=True)

    def _submit(self, fd: int, close: bool) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="aof-fsync", daemon=True)
            self._thread.start()
        if not close:
            with self._lock:
                self._pending += 1
        self._jobs.put((fd, close))

    def _run(self) -> None:
        while True:
            fd, close = self._jobs.get()
            try:
                os.fdatasync(fd)
                if not close:
                    self.error = 0
            except OSError as e:
                if not close:
                    self.error = e.errno or 5
            finally:
                if close:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                else:
                    with self._lock:
                        self._pending -= 1


class BackgroundFree:
    """The lazy-free thread (bioCreateLazyFreeJob); counts as Redis's atomics."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[list, int]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._freed = 0
        self._thread: threading.Thread | None = None

    def release(self, objs: list, count: int) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="lazyfree", daemon=True)
            self._thread.start()
        with self._lock:
            self._pending += count
        self._jobs.put((objs, count))

    def pending(self) -> int:
        return self._pending

    def freed(self) -> int:
        return self._freed

    def reset_freed(self) -> None:
        with self._lock:
            self._freed = 0

    def _run(self) -> None:
        while True:
            objs, count = self._jobs.get()
            objs.clear()
            del objs
            with self._lock:
                self._pending -= count
                self._freed += count
