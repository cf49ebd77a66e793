"""The diskless child's copy for resumed syncs (pyrepl.net.master_io's ``_Copy``): the very
write loop the forked child runs (``stream_to_sockets``) on real socket pairs, read by threads.

The child holds the last ``tail`` payload bytes in memory; when a target fails it writes them
to the copy (after an 8-byte header naming their first payload byte, the base), then every
chunk it makes, to the end, even when no socket is left. A child no target failed in writes its
tail at the end. The copy must be exactly the payload (and the mark) from its base, the base at
most what the cut replica had read, and the child's result line must give the payload's end.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading

import pytest

from pyrepl.net.master_io import COPY_HEAD, KEPT_CID, stream_to_sockets

CHUNK = 64 << 10
CHUNKS = 64                                   # a 4 MB payload
PAYLOAD = [bytes([i % 251]) * CHUNK for i in range(CHUNKS)]
MARK = b"M" * 40
WHOLE = b"".join(PAYLOAD) + MARK


class Reader(threading.Thread):
    """A replica: reads its socket, and (``cut_at``) closes it after that many bytes."""

    def __init__(self, sock: socket.socket, cut_at: int = -1) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.cut_at = cut_at
        self.got = bytearray()

    def run(self) -> None:
        while True:
            want = 65536 if self.cut_at < 0 else min(65536, self.cut_at - len(self.got))
            data = self.sock.recv(want) if want > 0 else b""
            if not data:
                break
            self.got += data
        self.sock.close()


def _run(readers: list[int], tail: int) -> tuple[int, dict[int, bytes], bytes, list[Reader]]:
    """The child's loop to one socket pair per entry of ``readers`` (each a cut point, -1: no
    cut), keeping a copy with ``tail``: (exit code, result lines by id, the copy, readers)."""
    pairs = [socket.socketpair() for _ in readers]
    threads = [Reader(b, cut) for (_, b), cut in zip(pairs, readers, strict=True)]
    for t in threads:
        t.start()
    r, w = os.pipe()
    fd, path = tempfile.mkstemp(prefix="copy-")
    os.unlink(path)
    try:
        plan = [(i + 1, a.fileno(), b"") for i, (a, _) in enumerate(pairs)]
        code = stream_to_sockets(plan, lambda: iter(PAYLOAD), MARK, 10_000, w,
                                 kept=(fd, tail))
        for a, _ in pairs:
            a.close()
        for t in threads:
            t.join(10)
        lines = os.read(r, 4096).decode().splitlines()
        size = os.fstat(fd).st_size
        copy = os.pread(fd, size, 0)
    finally:
        os.close(r)
        os.close(fd)
    results = {int(ln.split()[0]): ln.encode() for ln in lines}
    return code, results, copy, threads


def _split(copy: bytes) -> tuple[int, bytes]:
    (base,) = COPY_HEAD.unpack(copy[:COPY_HEAD.size])
    return base, copy[COPY_HEAD.size:]


@pytest.mark.parametrize("tail", [1 << 20, 100_000, 0])   # (100 KB: less than the sockets hold)
def test_a_cut_target_starts_the_copy_from_the_tail(tail: int) -> None:
    cut = len(WHOLE) // 2 + 12345
    code, results, copy, (live, cut_one) = _run([-1, cut], tail)
    assert code == 0
    assert bytes(live.got) == WHOLE and len(cut_one.got) == cut
    base, data = _split(copy)
    assert data == WHOLE[base:]                     # exactly the payload from its base
    assert results[KEPT_CID] == b"0 1 %d -" % len(WHOLE)
    if tail == 0:
        assert base == 0                            # the whole payload, from the start
    elif tail == 1 << 20:
        # the child noticed the cut at most the sockets' buffers (a few hundred KB here) past
        # what the replica read, and held ``tail`` bytes back from there: the replica's byte
        # is in the copy
        assert 0 < base <= cut
    else:
        # a tail smaller than what the sockets held: the copy starts after the replica's
        # byte (its resume is refused: a full sync), and still holds the tail and the rest
        assert base > 0 and len(data) >= tail


def test_no_cut_keeps_the_tail_at_the_end() -> None:
    tail = 300_000
    code, results, copy, _ = _run([-1], tail)
    assert code == 0
    base, data = _split(copy)
    assert data == WHOLE[base:]
    # at least ``tail`` bytes (in whole chunks: less than a chunk more), not the whole payload
    assert tail <= len(data) < tail + CHUNK + len(MARK)
    assert results[KEPT_CID] == b"0 1 %d -" % len(WHOLE)


def test_every_target_cut_the_child_goes_on_into_the_copy() -> None:
    code, results, copy, (only,) = _run([200_000], 1 << 20)
    assert len(only.got) == 200_000
    base, data = _split(copy)
    assert base <= 200_000 and data == WHOLE[base:]      # to the very end, no socket left
    assert code == 0 and results[KEPT_CID] == b"0 1 %d -" % len(WHOLE)
    assert results[1].split()[1] == b"0"                 # the replica's transfer failed
