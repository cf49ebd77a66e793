"""Test fakes of the core's ports (pyrepl/core/ports.py), one per port, for unit tests that
drive the core without the process's real figures."""

from __future__ import annotations


class FakeMeter:
    """:class:`pyrepl.core.ports.Meter` with figures a test sets: ``used`` (what ``used()``
    answers, fresh or not), ``bound`` (defaults to ``used``), ``rss``. Counts the calls, so a
    test can hold the eviction engine to "no exact reading while the bound is under the
    limit"."""

    def __init__(self, used: int = 0, bound: int | None = None, rss: int | None = None,
                 kind: str = "fake") -> None:
        self.used_bytes = used
        self.bound_bytes = bound
        self.rss_bytes = rss
        self.kind = kind
        self.used_calls = 0
        self.fresh_calls = 0
        self.bound_calls = 0

    def set(self, used: int, bound: int | None = None) -> None:
        self.used_bytes = used
        self.bound_bytes = bound

    def used(self, fresh: bool = False) -> int:
        self.used_calls += 1
        self.fresh_calls += fresh
        return self.used_bytes

    def bound(self) -> int:
        self.bound_calls += 1
        return self.used_bytes if self.bound_bytes is None else self.bound_bytes

    def rss(self) -> int:
        return self.used_bytes if self.rss_bytes is None else self.rss_bytes
