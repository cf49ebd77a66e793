"""Bounded waits: ``wait_for`` polls a condition until a deadline; ``wait_offsets`` and
``wait_synced`` wait until replicas have everything their master has."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.support.redispy import digest, in_sync


def wait_for(cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.02,
             what: str = "condition") -> object:
    """Poll ``cond`` until it returns a truthy value; raise AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - keep polling until the deadline
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


def wait_offsets(master: int, *replicas: int, timeout: float = 60) -> None:
    """Wait for ``in_sync`` (no digest: for servers without DEBUG)."""
    wait_for(lambda: in_sync(master, *replicas), timeout,
             what=f"replicas of {master} in sync")


def wait_synced(master: int, *replicas: int, timeout: float = 90) -> None:
    """Wait for ``in_sync``, then assert equal DEBUG DIGESTs."""
    wait_for(lambda: in_sync(master, *replicas), timeout, what="replicas caught up")
    want = digest(master)
    for p in replicas:
        assert digest(p) == want
