"""The cyclic GC under a replica's stream: a read of thousands of requests must not set off
collections of the old generations, whose cost grows with the dataset (every element of a
list key is visited by a full collection).

Two parts keep it so: the request reader's lists are out of the GC's view (they hold only
bytes, ints and such lists: pyrepl/resp/_scan.c), and the server's young-generation threshold
(``net.server.GC_YOUNG_THRESHOLD``) is above a read's worth of requests. CPython's default
threshold (700) is the control: the same reads then do run old-generation collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pyrepl import native
from pyrepl.net.server import GC_YOUNG_THRESHOLD
from pyrepl.resp.fastreader import make_reader
from tests.support.cores import cmd
from tests.support.replica_side import synced_node

READ = 256 * 1024   # uvloop's read buffer: the most one read hands the replica


@contextmanager
def collections_counted(threshold: int) -> Iterator[list[int]]:
    """Collections per generation while the block runs, at a young threshold of
    ``threshold`` (the others as they are)."""
    counts = [0, 0, 0]
    before = gc.get_threshold()

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            counts[info["generation"]] += 1

    gc.collect()            # (the young count from zero)
    gc.set_threshold(threshold, *before[1:])
    gc.callbacks.append(count)
    try:
        yield counts
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*before)


def _stream_reads(sets: int) -> list[bytes]:
    data = cmd("SELECT", "0") + b"".join(cmd("SET", b"key:%d" % i, b"xxx")
                                         for i in range(sets))
    return [data[i:i + READ] for i in range(0, len(data), READ)]


def _apply_counted(reads: list[bytes], sets: int, threshold: int) -> list[int]:
    """Collections per generation while a replica in sync applies ``reads`` (``sets`` SETs)."""
    n = synced_node()
    data = n.core.dbs[0].data
    keys = len(data)
    with collections_counted(threshold) as counts:
        for r in reads:
            n.feed(r)
    assert len(data) == keys + sets, "the stream was not applied"
    return counts


@pytest.mark.skipif(native.PURE, reason=f"the C scan untracks its lists ({native.WHY_PURE})")
def test_the_readers_lists_are_out_of_the_gcs_view() -> None:
    r = make_reader()
    r.feed(cmd("SET", "a", "1") + cmd("LPUSH", "l", "x", "y") + cmd("GET", "a"))
    got = []
    while (argv := r.gets()) is not None:
        got.append(argv)
    assert got == [[b"SET", b"a", b"1"], [b"LPUSH", b"l", b"x", b"y"], [b"GET", b"a"]]
    assert not any(gc.is_tracked(argv) for argv in got)


def test_a_replicas_reads_run_no_old_generation_collection() -> None:
    sets = 60_000
    reads = _stream_reads(sets)
    assert len(reads) > 8
    counts = _apply_counted(reads, sets, GC_YOUNG_THRESHOLD)
    assert counts[1] == counts[2] == 0, counts
    # the control: CPython's default threshold, the same reads on another replica
    counts = _apply_counted(reads, sets, 700)
    assert counts[0] > 50 and counts[1] > 0, counts
