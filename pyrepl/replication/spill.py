"""A queue of bytes on disk: the part of a full sync's pending stream that memory does not hold
(``repl-full-sync-spill-threshold``; shared by both sides).

Theory of operation: :class:`SpillFile` is a first-in first-out queue in one file of ``dir``:
:meth:`~SpillFile.append` writes at its end, :meth:`~SpillFile.read` reads from its front,
each byte comes out once and in the order it went in. The file is unlinked as soon as it is
open, so a crash leaves nothing behind (its space is the process's until it closes it). When
the reader reaches the writer the file is truncated and both positions start again at 0, so a
queue that keeps draining does not grow on disk. The counters are the caller's figures:
``written`` (bytes ever appended), ``consumed`` (bytes ever read), ``pending`` (on disk now),
``peak`` (the most ever pending). Writes and reads are plain blocking ``pwrite``/``pread`` on
the event loop's thread, as Redis writes its AOF: the page cache takes them at memory speed
until the disk is the bottleneck, which is the case it exists for. An ``OSError`` (a full
disk) is the caller's to handle: the queue is then in an unknown state and must be closed.
"""

from __future__ import annotations

import itertools
import os

_SEQ = itertools.count(1)


class SpillFile:
    """A FIFO byte queue on disk (see the module docstring)."""

    __slots__ = ("fd", "path", "_rpos", "_wpos", "written", "consumed", "peak")

    def __init__(self, directory: str, name: str) -> None:
        self.path = os.path.join(directory, f"spill-{os.getpid()}-{next(_SEQ)}-{name}.tmp")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.unlink(self.path)
        except OSError:
            os.close(self.fd)
            raise
        self._rpos = 0
        self._wpos = 0
        self.written = 0
        self.consumed = 0
        self.peak = 0

    @property
    def pending(self) -> int:
        return self._wpos - self._rpos

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Queue ``data`` (all of it) at the end."""
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self._wpos)
            self._wpos += n
            self.written += n
            view = view[n:]
        if self.pending > self.peak:
            self.peak = self.pending

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes from the front (b"" when empty)."""
        want = min(n, self.pending)
        if want <= 0:
            return b""
        out = os.pread(self.fd, want, self._rpos)
        if not out:
            raise OSError(f"spill file {self.path}: {self.pending} bytes pending, none read")
        self._rpos += len(out)
        self.consumed += len(out)
        if self._rpos == self._wpos:   # drained: the space goes back
            os.ftruncate(self.fd, 0)
            self._rpos = self._wpos = 0
        return out

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
