"""``pyrepl collect``'s I/O shell: poll the nodes' INFO, write the events as rotated NDJSON.

Theory of operation: one round every ``every`` seconds polls each node once with redis-py
(``INFO server replication stats memory``, or plain ``INFO`` where a server takes one section
at most), the replicas before their masters (see :mod:`pyrepl.collect.links`), turns each reply
into a :class:`~pyrepl.collect.info.Sample`, gives the round's samples to a
:class:`~pyrepl.collect.links.Fleet` (the sans-io part: each node's
:func:`~pyrepl.collect.infer.infer` against its previous state, the only history kept, and
:class:`~pyrepl.collect.links.Links` over the round), and appends the round's lines to
``collect.ndjson`` in one write (rotated by size like the daemon's ``sync-log-file``), so a
stop never leaves half a line. A node that does not answer gets one line on stderr when it
stops answering and one when it answers again, and is retried with exponential backoff (from
``every`` up to ``max(30 s, every)``) while the others go on. SIGTERM and SIGINT end the
collector after the round in progress; ``count`` rounds or ``duration`` seconds end it too.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from pyrepl.collect.info import Sample, parse_info, to_sample
from pyrepl.collect.links import Fleet
from pyrepl.events import to_json_line
from pyrepl.net.synclog import RotatingNdjsonWriter

FILE_NAME = "collect.ndjson"
SECTIONS = ("server", "replication", "stats", "memory")
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class CollectConfig:
    nodes: tuple[str, ...]
    out_dir: str
    every: float = 1.0
    count: int | None = None
    duration: float | None = None
    username: str | None = None
    password: str | None = None
    tls: bool = False
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    timeout: float = 2.0
    max_size: int = 64 * 1024 * 1024
    max_files: int = 8
    progress: bool = False
    progress_every: float = 10.0


def split_addr(addr: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); ValueError when it is neither."""
    host, sep, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{addr!r}: expected HOST:PORT")
    return host, int(port)


class CollectFile(RotatingNdjsonWriter):
    """The daemon's rotating NDJSON writer, written a round at a time (one write call per file
    touched, flushed) and letting write errors reach the collector, which reports them."""

    def write_round(self, events: Sequence[dict[str, Any]]) -> int:
        pending: list[str] = []
        size = 0

        def flush() -> None:
            nonlocal pending, size
            if pending:
                fh = self._open()
                fh.write("".join(pending))
                fh.flush()
                self._size += size
                pending, size = [], 0

        self._open()
        for ev in events:
            line = to_json_line(ev)
            n = len(line.encode("utf-8"))
            if self.max_size and self._size + size and self._size + size + n > self.max_size:
                flush()
                self.rotate()
                self._open()  # a new file: its size starts at 0
            pending.append(line)
            size += n
        flush()
        return len(events)


class Node:
    """One polled node: its client and whether it answers (its history is in the Fleet)."""

    def __init__(self, addr: str, cfg: CollectConfig) -> None:
        self.addr = addr
        self.host, self.port = split_addr(addr)
        self.cfg = cfg
        self.client: Any = None
        self.sections: tuple[str, ...] = SECTIONS
        self.failing: str | None = None  # the error while it does not answer
        self.failures = 0
        self.failed_since = 0.0
        self.next_try = 0.0  # monotonic time of the next attempt

    def _connect(self) -> Any:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        cfg = self.cfg
        kw: dict[str, Any] = {}
        if cfg.tls:
            kw.update(ssl=True, ssl_ca_certs=cfg.cacert, ssl_certfile=cfg.cert,
                      ssl_keyfile=cfg.key, ssl_cert_reqs="required",
                      ssl_check_hostname=False)
        # no client name (CLIENT SETNAME): a user allowed only +info must be enough
        c = redis.Redis(host=self.host, port=self.port, username=cfg.username,
                        password=cfg.password, socket_timeout=cfg.timeout,
                        socket_connect_timeout=cfg.timeout, retry=Retry(NoBackoff(), 0),
                        decode_responses=True, **kw)
        c.set_response_callback("INFO", lambda resp, **_: resp)  # the text, parsed here
        return c

    def info_text(self) -> str:
        import redis

        if self.client is None:
            self.client = self._connect()
        if self.sections:
            try:
                return str(self.client.execute_command("INFO", *self.sections))
            except redis.exceptions.ResponseError as e:
                if "syntax" not in str(e).lower() and "wrong number" not in str(e).lower():
                    raise
                self.sections = ()  # a server before Redis 7: one section at a time
        return str(self.client.execute_command("INFO"))

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - closing a broken client
                pass
            self.client = None


class Collector:
    def __init__(self, cfg: CollectConfig, err: TextIO | None = None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.err = err if err is not None else sys.stderr
        self.clock = clock
        self.monotonic = monotonic
        self.nodes = [Node(a, cfg) for a in dict.fromkeys(cfg.nodes)]
        self.fleet = Fleet(horizon_s=max(900.0, 10 * cfg.every))
        self.path = os.path.join(cfg.out_dir, FILE_NAME)
        self.file = CollectFile(self.path, cfg.max_size, cfg.max_files)
        self.stopping = False
        self.rounds = 0
        self.samples = 0
        self.lines = 0
        self.inferred = 0
        self.write_error: str | None = None

    def say(self, msg: str) -> None:
        try:
            self.err.write(f"pyrepl collect: {msg}\n")
            self.err.flush()
        except (OSError, ValueError):
            pass

    # -- one round ---------------------------------------------------------------------------

    def _poll(self, node: Node) -> Sample | None:
        import redis

        now = self.monotonic()
        if node.failing is not None and now < node.next_try:
            return None
        t0 = self.clock()
        try:
            text = node.info_text()
        except (redis.exceptions.RedisError, OSError) as e:
            node.close()
            node.failures += 1
            cap = max(MAX_BACKOFF_S, self.cfg.every)
            node.next_try = self.monotonic() + min(cap, self.cfg.every * 2 ** (node.failures - 1))
            if node.failing is None:
                node.failing = str(e) or type(e).__name__
                node.failed_since = now
                what = "unreachable" if isinstance(e, (redis.exceptions.ConnectionError,
                                                       redis.exceptions.TimeoutError, OSError)) \
                    and not isinstance(e, redis.exceptions.AuthenticationError) \
                    else "refuses INFO"
                self.say(f"{node.addr}: {what}: {node.failing} (retrying with backoff up to "
                         f"{cap:g}s; the other nodes go on)")
            return None
        t1 = self.clock()
        if node.failing is not None:
            self.say(f"{node.addr}: answering again after {now - node.failed_since:.1f}s")
            node.failing = None
        node.failures = 0
        return to_sample(node.addr, (t0 + t1) / 2.0, parse_info(text))

    def round(self) -> list[dict[str, Any]]:
        """Poll every node once; the round's events (also written to the file)."""
        samples: list[Sample] = []
        for node in sorted(self.nodes, key=lambda n: self.fleet.poll_order(n.addr)):
            if self.stopping:
                break
            s = self._poll(node)
            if s is not None:
                samples.append(s)
        events = self.fleet.round(*samples)
        self.rounds += 1
        self.samples += len(samples)
        try:
            self.lines += self.file.write_round(events)
            self.inferred += sum(1 for e in events if e.get("inferred"))
            if self.write_error is not None:
                self.say(f"writing {self.path} works again")
                self.write_error = None
        except OSError as e:
            self.file.close()
            if self.write_error is None:
                self.write_error = str(e)
                self.say(f"cannot write {self.path}: {e} (this round's lines are lost; "
                         f"retrying each round)")
        return events

    # -- the loop ----------------------------------------------------------------------------

    def _progress(self, t_start: float) -> None:
        answering = sum(1 for n in self.nodes if n.addr in self.fleet.states
                        and n.failing is None)
        self.say(f"{self.monotonic() - t_start:.0f}s, {self.rounds} rounds, {answering}/"
                 f"{len(self.nodes)} nodes answering, {self.lines} lines ({self.inferred} "
                 f"inferred events) in {self.path}")

    def stop(self, *_: object) -> None:
        self.stopping = True

    def run(self) -> int:
        """Poll until stopped; 0, or 1 when no node ever answered."""
        cfg = self.cfg
        old: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, self.stop)
        t_start = self.monotonic()
        end = t_start + cfg.duration if cfg.duration is not None else math.inf
        next_round = t_start
        next_progress = t_start + cfg.progress_every
        try:
            while not self.stopping:
                if cfg.count is not None and self.rounds >= cfg.count:
                    break
                if self.monotonic() >= end:
                    break
                self.round()
                now = self.monotonic()
                if cfg.progress and now >= next_progress:
                    self._progress(t_start)
                    next_progress = now + cfg.progress_every
                next_round = max(next_round + cfg.every, now)
                if cfg.count is not None and self.rounds >= cfg.count:
                    break
                while not self.stopping:
                    now = self.monotonic()
                    if now >= next_round or now >= end:
                        break
                    time.sleep(min(0.05, next_round - now, end - now))
        finally:
            self.file.close()
            for n in self.nodes:
                n.close()
            for sig, h in old.items():
                signal.signal(sig, h)
        self._progress(t_start)
        if self.samples == 0:
            self.say("no node answered")
            return 1
        return 0


def run(cfg: CollectConfig) -> int:
    return Collector(cfg).run()
