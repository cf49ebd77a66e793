"""A full sync under a write load, measured on a pyrepl master: ``Load`` paces pipelined SETs
over a DEBUG POPULATE dataset, ``Sampler`` samples INFO memory every 50 ms (its peaks),
``loaded_master`` starts a master with both running, ``info`` reads one INFO section by port;
``BACKLOG`` is the masters' backlog size."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.procs import ServerProcess, start_pyrepl
from tests.support.resp import RawClient, encode_command, parse_reply
from tests.support.waits import wait_for

BACKLOG = 1 << 20


def info(port: int, section: str) -> dict[str, str]:
    with RawClient(port) as c:
        raw = parse_reply(c.call("INFO", section))
    assert isinstance(raw, bytes)
    return dict(line.split(":", 1) for line in raw.decode().splitlines()
                if ":" in line and not line.startswith("#"))


class Load(threading.Thread):
    """Pipelined SETs of 100-byte values over the ``keys`` keys of DEBUG POPULATE (so the
    dataset, and the snapshot's duration, stay the same), paced at ``rate`` SETs per second
    (about 7 MB/s of replication stream at the default)."""

    def __init__(self, port: int, keys: int, rate: int = 50000) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.keys = keys
        self.rate = rate
        self.stop = False
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                val = b"v" * 100
                i = 0
                t0 = time.monotonic()
                while not self.stop:
                    ahead = self.sent / self.rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)  # pacing, not a wait for a condition
                    batch = b"".join(encode_command("SET", b"key:%d" % ((i + j) * 7919
                                                                      % self.keys), val)
                                     for j in range(100))
                    i += 100
                    s.sendall(batch)
                    need = 100 * len(b"+OK\r\n")
                    got = 0
                    while got < need:
                        chunk = s.recv(65536)
                        assert chunk, "master closed the load connection"
                        got += len(chunk)
                    self.sent += 100
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def finish(self) -> None:
        """Stop the writes; the load must have met no error."""
        self.stop = True
        self.join(10)
        assert self.error is None, self.error


class Sampler(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = False
        self.peak = 0
        self.peak_clients = 0
        self.samples = 0

    def run(self) -> None:
        while not self.stop:
            mem = info(self.port, "memory")
            self.peak = max(self.peak, int(mem["mem_total_replication_buffers"]))
            self.peak_clients = max(self.peak_clients, int(mem["mem_clients_slaves"]))
            self.samples += 1
            time.sleep(0.05)  # the sampling period (not a wait for a condition)

    def finish(self) -> None:
        self.stop = True
        self.join(10)


@contextmanager
def loaded_master(keys: int, *flags: str) -> Iterator[tuple[ServerProcess, Load, Sampler]]:
    """A pyrepl master (``flags`` added) whose full syncs take a few seconds (backlog
    ``BACKLOG``, no diskless delay, a snapshot child slowed by rdb-key-save-delay 50 us) and
    ``keys`` keys of DEBUG POPULATE, with a ``Load`` running on them and a ``Sampler``; the
    load, the sampler and the master stopped on the way out."""
    srv = start_pyrepl("--loglevel", "notice", "--repl-diskless-sync-delay", "0",
                       "--repl-backlog-size", str(BACKLOG), "--rdb-key-save-delay", "50", *flags)
    load = Load(srv.port, keys)
    sampler = Sampler(srv.port)
    try:
        with RawClient(srv.port) as c:
            c.call("DEBUG", "POPULATE", keys, "key", 100)
        load.start()
        wait_for(lambda: load.sent > 2000, 20, what="the load to run")
        sampler.start()
        yield srv, load, sampler
    finally:
        load.stop = True
        sampler.stop = True
        srv.stop()
