"""PUBLISH to 1 and to 50 subscribers, pyrepl beside Debian's redis-server, same run, interleaved.

    .venv/bin/python bench/bench_pubsub.py [--rounds 3] [--requests 50000]

For each server and each fan-out (0, 1 and 50 subscribers of the channel), the subscribers are
raw connections drained by one reader thread (a selector, 1 MB reads, counting the bytes), and
redis-benchmark publishes a 32-byte message (``-c 50``, ``-P 1`` and ``-P 16``); servers
alternate which goes first each round. Prints the medians of PUBLISH per second and the ratio
pyrepl / redis, and checks that every subscriber received every message. The pubsub output
limit is lifted on both servers (``client-output-buffer-limit pubsub 0 0 0``) so a subscriber
falling behind the publisher is measured, not dropped.
"""

from __future__ import annotations

import argparse
import selectors
import socket
import threading
import time

from common import median, redis_benchmark_command, start_pyrepl, start_redis

MESSAGE = "m" * 32
FANOUT = (0, 1, 50)


class Subscribers:
    """``n`` connections subscribed to ``chan``; a thread drains them and counts the bytes."""

    def __init__(self, port: int, chan: str, n: int) -> None:
        self.socks = []
        self.received = 0
        self._stop = False
        sel = selectors.DefaultSelector()
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(chan), chan.encode()))
            s.recv(1024)                           # the confirmation
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            self.socks.append(s)
        self.sel = sel
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self._stop:
            for key, _ in self.sel.select(0.05):
                try:
                    data = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                self.received += len(data)

    def wait_for(self, total: int, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while self.received < total and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.received >= total

    def close(self) -> None:
        self._stop = True
        self.thread.join()
        for s in self.socks:
            s.close()


def frame_len(chan: str) -> int:
    return len(b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
               % (len(chan), chan.encode(), len(MESSAGE), MESSAGE.encode()))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=50000)
    args = ap.parse_args()
    limit = ("--client-output-buffer-limit", "pubsub 0 0 0")
    servers = {"pyrepl": start_pyrepl(*limit), "redis": start_redis(*limit)}
    results: dict[tuple[int, int], dict[str, list[float]]] = {}
    try:
        order = list(servers.items())
        for rnd in range(args.rounds):
            for pipeline in (1, 16):
                for n in FANOUT:
                    for who, srv in (order if rnd % 2 == 0 else order[::-1]):
                        chan = f"ch{rnd}{pipeline}{n}"
                        subs = Subscribers(srv.port, chan, n)
                        try:
                            rps = redis_benchmark_command(
                                srv.port, ["PUBLISH", chan, MESSAGE], args.requests, 50,
                                pipeline)
                            want = n * args.requests * frame_len(chan)
                            assert subs.wait_for(want), \
                                f"{who}: {subs.received} of {want} bytes delivered"
                        finally:
                            subs.close()
                        results.setdefault((n, pipeline), {}).setdefault(who, []).append(rps)
                print(f"round {rnd + 1} -P{pipeline} done", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
    print(f"\n{'pipeline':8} {'subscribers':>11} {'pyrepl rps':>12} {'redis rps':>12} "
          f"{'ratio':>6}")
    for (n, pipeline), by in results.items():
        a, b = median(by["pyrepl"]), median(by["redis"])
        print(f"P{pipeline:<7} {n:11} {a:12,.0f} {b:12,.0f} {a / b:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
