"""The AOF's background fsync (Redis's bio thread, BIO_AOF_FSYNC and BIO_CLOSE_AOF).

Theory of operation: with ``appendfsync everysec`` the main thread writes the AOF buffer with
write(2) and hands the fdatasync(2) to this thread at most once a second, so a slow disk stalls
the fsync, not the server. :meth:`pending` is bioPendingJobsOfType(BIO_AOF_FSYNC): while a job
is queued or running the writer postpones its next write (flushAppendOnlyFile's delay rule).
A failed fsync is kept (``error``) for INFO's aof_last_write_status and the MISCONF gate, and
cleared by the next fsync that works, as Redis's aof_bio_fsync_status.
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
