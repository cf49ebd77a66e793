"""Memory accounting: what ``used_memory`` is (issue 37 part 1), and the meter the core holds.

Theory of operation: Redis counts every allocation's usable size (zmalloc), so its
``used_memory`` rises and falls with what it holds. pyrepl's equivalent is ``pyrepl._memacct``
(its header comment has the design): under pymalloc it hooks only the arena allocator and the
RAW domain, and sums the pools of the arenas it knows (a walk, ~0.3 us per MiB), so nothing on a
command's path is hooked. :func:`install` puts it in place; the CLI calls it first thing in a
server process (cli/main.py), and it is safe to call again, or in a test process. Where it
cannot run (``PYREPL_PURE=1``, the extension not built, not CPython 3.11 with pymalloc, its
self-test refused the layout) the meter is RSS-based, and INFO says which one runs:

=====================  ===============  ==========================================================
``mem_allocator``      ``Meter.kind``   ``used_memory``
=====================  ===============  ==========================================================
``pymalloc-poolwalk``  ``pool-walk``    pymalloc's blocks at their size class + libc blocks at
                                        their usable size (exact at a walk), as Redis's zmalloc
``libc-rss``           ``rss``          the process's RSS (never shrinks: glibc keeps its heap)
=====================  ===============  ==========================================================

A meter is the core's port :class:`pyrepl.core.ports.Meter`: ``used(fresh)`` (``fresh``: a walk
now and the arenas from before the install re-read, else a walk at most once per interval),
``bound()`` (an upper bound without a walk: what a per-write maxmemory check calls), ``rss()``;
both figures count from the origin a server sets as it starts (:func:`set_origin`: the
interpreter's own memory left out).
C callers use the capsule ``pyrepl._memacct._C_API`` (pyrepl/_memacct.h).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from pyrepl import native

_ext: ModuleType | None = native.load("pyrepl._memacct")

POOL_WALK = "pool-walk"
RSS = "rss"
# INFO memory's mem_allocator for each kind (Redis says e.g. jemalloc-5.2.1, libc).
ALLOCATOR_NAME = {POOL_WALK: "pymalloc-poolwalk", RSS: "libc-rss"}

_why_not = "install() not called"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss() -> int:
    """The process's resident set size, in bytes (0 where /proc cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _unsupported() -> str:
    """Why the pool walk cannot run in this interpreter ("" when it can)."""
    if _ext is None:
        return f"plain Python ({native.WHY_PURE})"
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return "the pool walk reads CPython 3.11's pymalloc layout"
    allocator = os.environ.get("PYTHONMALLOC", "")
    if allocator not in ("", "pymalloc"):
        return f"PYTHONMALLOC={allocator} (the pool walk needs pymalloc without debug hooks)"
    if sys.flags.dev_mode:
        return "development mode (-X dev) puts debug hooks on pymalloc"
    if sys.maxsize != 2**63 - 1:
        return "a 32-bit build"
    return ""


def install() -> str:
    """Put the accounting in place; answers the meter kind that runs from then on ("pool-walk",
    or "rss" where it cannot: :func:`why_not` says why). Idempotent."""
    global _why_not
    if _ext is not None and _ext.installed():
        return POOL_WALK
    why = _unsupported()
    if not why:
        assert _ext is not None
        why = str(_ext.install())
        if why:
            why = "self-test: " + why
    _why_not = why
    return RSS if why else POOL_WALK


def installed() -> bool:
    return _ext is not None and bool(_ext.installed())


def why_not() -> str:
    """Why the meter is RSS-based ("" when the pool walk runs)."""
    return "" if installed() else _why_not


_rss_origin = 0


def set_origin() -> int:
    """Count the server's memory from now on: what the interpreter holds at this point (its
    code, the modules imported, their types and tables: ~27 MB, where Redis's own start-up
    is ~1 MB) is left out of ``used()`` and ``bound()`` of every meter, so ``used_memory`` and
    ``maxmemory`` measure what the server holds (its state, the dataset, the buffers), as a
    Redis configuration means them. Answers that origin in bytes (the fallback's is an RSS)."""
    global _rss_origin
    if _ext is not None and _ext.installed():
        _ext.set_origin(0)
        origin = int(_ext.used(2))
        _ext.set_origin(origin)
        return origin
    _rss_origin = rss()
    return _rss_origin


class PoolWalkMeter:
    """The pool walk (pyrepl._memacct installed)."""

    kind = POOL_WALK
    __slots__ = ("_used", "_bound")

    def __init__(self, ext: ModuleType) -> None:
        self._used = ext.used
        self._bound = ext.bound

    def used(self, fresh: bool = False) -> int:
        return int(self._used(2 if fresh else 0))

    def bound(self) -> int:
        return int(self._bound())

    def rss(self) -> int:
        return rss()


class RssMeter:
    """The fallback: the process's RSS for both figures (it does not fall after a free)."""

    kind = RSS
    __slots__ = ()

    def used(self, fresh: bool = False) -> int:
        return max(rss() - _rss_origin, 0)

    def bound(self) -> int:
        return max(rss() - _rss_origin, 0)

    def rss(self) -> int:
        return rss()


def meter() -> PoolWalkMeter | RssMeter:
    """The meter of this process: the pool walk when installed, else RSS."""
    if _ext is not None and _ext.installed():
        return PoolWalkMeter(_ext)
    return RssMeter()


def stats() -> dict[str, int]:
    """The pool walk's parts and counters (empty when it does not run): MEMORY STATS, tests."""
    if _ext is None or not _ext.installed():
        return {}
    return {str(k): int(v) for k, v in _ext.stats().items()}


def ground_truth() -> tuple[int, int]:
    """(pymalloc's bytes in allocated blocks over every arena, libc's heap in use), from
    CPython's and glibc's own statistics: slow (~0.1 ms), for tests and benchmarks."""
    if _ext is None:
        return (0, 0)
    return (int(_ext.debugstats()[1]), int(_ext.heap()))
