"""Writes to a running server through redis-py: a background write load (``LoadWriter``),
a populated dataset under that load, and a batch of keys."""

from __future__ import annotations

import threading
import time

from tests.support.redispy import r
from tests.support.waits import wait_for


class LoadWriter(threading.Thread):
    """A write load on a master until stopped, bounded in count and time: pipelines of SET
    ``load:N`` + INCR ``load:counter`` (so the counter is ``ops // 2``), with an RPUSH and an
    HSET now and then. ``finish`` stops it and re-raises what it met; leaving a ``with`` block
    stops it."""

    def __init__(self, port: int, max_ops: int = 5_000_000, max_seconds: float = 120,
                 value_size: int = 0) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.max_ops = max_ops
        self.max_seconds = max_seconds
        self.value = "v" * value_size
        self.stop_event = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        import redis

        deadline = time.monotonic() + self.max_seconds
        try:
            with redis.Redis(port=self.port, socket_timeout=30) as c:
                i = 0
                while not self.stop_event.is_set() and self.ops < self.max_ops \
                        and time.monotonic() < deadline:
                    p = c.pipeline(transaction=False)
                    for _ in range(50):
                        i += 1
                        p.set(f"load:{i % 5000}", f"{i}{self.value}")
                        p.incr("load:counter")
                        if i % 7 == 0:
                            p.rpush(f"load:list:{i % 13}", i)
                        if i % 11 == 0:
                            p.hset("load:hash", f"f{i % 300}", i)
                    p.execute()
                    self.ops += 100
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive()
        assert self.error is None, self.error

    def __enter__(self) -> LoadWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()


def populate_under_load(port: int, keys: int, writer: LoadWriter, ops: int) -> None:
    """DEBUG POPULATE ``keys`` keys of 64 bytes, start ``writer`` and wait until it has done
    more than ``ops`` writes."""
    with r(port) as c:
        c.execute_command("DEBUG", "POPULATE", str(keys), "key", "64")
    writer.start()
    wait_for(lambda: writer.ops > ops, 20, what="write load running")


def write_keys(port: int, prefix: str, n: int, size: int = 100) -> None:
    """``n`` SETs of ``prefix:i`` to ``size`` bytes, in one pipeline."""
    with r(port) as c:
        p = c.pipeline(transaction=False)
        for i in range(n):
            p.set(f"{prefix}:{i}", "x" * size)
        p.execute()
