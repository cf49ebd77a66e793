"""Charts drawn by worker processes of their own: ``pyrepl metrics --follow`` draws a
trigger's charts there, side by side, while its own process goes on.

Theory of operation: matplotlib is pure CPU and holds the GIL, so a trigger's six charts
drawn in the follower's process take ~2 s one after the other (more while the driver builds
the next micro-batch's plan: every py4j call waits for the GIL). Between two passes one of
the machine's cores is idle; drawing in two processes at once halves the charts' part of a
trigger's latency and leaves the driver's GIL alone. The workers are spawned once (a fresh
interpreter: never a fork of a process with a JVM gateway's threads), import matplotlib and
draw a first chart before they are needed; each chart is a call of the report's own chart
function with the same input, so its pixels are those drawn in the process (tested). A
worker that dies (killed, out of memory) breaks the pool: that trigger's charts are drawn in
the process and the next trigger starts a new pool. A worker whose parent is gone (a follower
killed) exits.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

# a chart: its function (module-level, so that a worker can import it), input, file
Chart = tuple[Callable[[Any, str], None], Any, str]


def draw_here(charts: Sequence[Chart]) -> None:
    """Draw each chart in this process, in order."""
    for fn, data, path in charts:
        fn(data, path)


def _warm() -> None:
    """A worker's start: it ends when its parent does, whatever ends that (a SIGKILL leaves
    no orphans); matplotlib imported and its fonts loaded, by drawing a chart."""
    from pyrepl.analytics.present import empty_chart, pyplot, save_chart

    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_end_with, args=(parent,), daemon=True,
                         name="pyrepl-chart-parent").start()

    fig, ax = pyplot().subplots(figsize=(2, 1))
    empty_chart(ax, "warm")
    fd, path = tempfile.mkstemp(suffix=".png")
    os.close(fd)
    try:
        save_chart(fig, path)
    finally:
        os.unlink(path)


def _end_with(parent: Any) -> None:
    parent.join()       # (its sentinel: readable once the parent has exited)
    os._exit(0)


class ChartPool:
    """``workers`` processes that draw charts (``draw``); ``close`` ends them."""

    def __init__(self, workers: int = 2) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self.broken = 0     # pools lost to a dead worker (each trigger's charts then drawn here)

    def start(self) -> None:
        """Start the workers now (they warm up while the caller goes on)."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_warm)
            for _ in range(self.workers):   # the workers spawned now, not at the first chart
                self._pool.submit(os.getpid)

    def draw(self, charts: Sequence[Chart]) -> None:
        """Draw ``charts`` (the costliest first is best: they go to the workers in order) and
        return when all are written; a chart function's error is raised here."""
        if not charts:
            return
        self.start()
        assert self._pool is not None
        try:
            futures: list[Future[None]] = [self._pool.submit(fn, data, path)
                                           for fn, data, path in charts]
            for f in futures:
                f.result()
        except BrokenProcessPool:
            self.broken += 1
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            draw_here(charts)

    def pids(self) -> list[int]:
        """The workers' process ids (none before ``start``)."""
        procs = getattr(self._pool, "_processes", None) or {}
        return sorted(procs)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
