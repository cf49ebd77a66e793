"""The replication backlog: a ring buffer addressed by absolute offsets (master side, but a
replica keeps one too so its own sub-replicas and a future promotion can continue).

Theory of operation: ``master_repl_offset`` is the absolute offset of the last byte appended
(the first byte ever has offset 1). The ring holds the newest ``histlen <= size`` bytes, so

    first_byte_offset = master_repl_offset - histlen + 1

and a PSYNC for ``offset`` can be served when ``first_byte_offset <= offset <=
master_repl_offset + 1`` (``master_repl_offset + 1`` means "nothing missing"). Appends copy
into a preallocated bytearray (wrapping at most once); :meth:`read_from` returns the bytes from
an offset to the end as at most two slices. :meth:`resize` keeps the newest history that fits.
"""

from __future__ import annotations


class BacklogRangeError(ValueError):
    pass


class Backlog:
    __slots__ = ("size", "buf", "idx", "histlen", "master_repl_offset")

    def __init__(self, size: int, master_repl_offset: int = 0) -> None:
        if size <= 0:
            raise ValueError("backlog size must be positive")
        self.size = size
        self.buf = bytearray(size)
        self.idx = 0  # where the next byte goes
        self.histlen = 0
        self.master_repl_offset = master_repl_offset

    @property
    def first_byte_offset(self) -> int:
        return self.master_repl_offset - self.histlen + 1

    def append(self, data: bytes) -> None:
        n = len(data)
        if not n:
            return
        self.master_repl_offset += n
        size = self.size
        if n >= size:
            self.buf[:] = data[n - size:]
            self.idx = 0
            self.histlen = size
            return
        idx = self.idx
        end = idx + n
        if end <= size:
            self.buf[idx:end] = data
            self.idx = end if end < size else 0
        else:
            first = size - idx
            self.buf[idx:] = data[:first]
            self.buf[: n - first] = data[first:]
            self.idx = n - first
        h = self.histlen + n
        self.histlen = h if h < size else size

    def can_serve(self, offset: int) -> bool:
        return self.first_byte_offset <= offset <= self.master_repl_offset + 1

    def read_from(self, offset: int) -> list[bytes]:
        """The bytes from absolute ``offset`` to the end, as one or two chunks."""
        if not self.can_serve(offset):
            raise BacklogRangeError(
                f"offset {offset} outside [{self.first_byte_offset}, "
                f"{self.master_repl_offset + 1}]")
        n = self.master_repl_offset - offset + 1  # bytes to send
        if n == 0:
            return []
        start = (self.idx - n) % self.size
        view = memoryview(self.buf)  # one copy per chunk, no intermediate bytearray
        if start + n <= self.size:
            return [bytes(view[start:start + n])]
        return [bytes(view[start:]), bytes(view[: n - (self.size - start)])]

    def resize(self, new_size: int) -> None:
        """Change the capacity, keeping the newest history that fits."""
        if new_size <= 0:
            raise ValueError("backlog size must be positive")
        if new_size == self.size:
            return
        keep = min(self.histlen, new_size)
        data = b"".join(self.read_from(self.master_repl_offset - keep + 1)) if keep else b""
        self.size = new_size
        self.buf = bytearray(new_size)
        self.buf[:keep] = data
        self.idx = keep % new_size
        self.histlen = keep

    def reset_offset(self, master_repl_offset: int) -> None:
        """Drop the history and continue at ``master_repl_offset`` (after a full sync)."""
        self.idx = 0
        self.histlen = 0
        self.master_repl_offset = master_repl_offset
