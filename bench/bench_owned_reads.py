"""What owning the client sockets' reads would save: uvloop's per-socket read callbacks against
one epoll of the server's own, side by side with redis-server 7.0.15.

uvloop runs libuv's loop without the GIL, and each socket's read callback takes it back
(``PyGILState_Ensure`` / ``Release``, ~1,600 instructions) before the protocol's
``data_received`` runs: once per ready socket in every pass. A server that owned its clients'
reads would register one epoll descriptor of its own with the loop (``add_reader``), keep the
client sockets in it instead of in uvloop's reading, and read every ready socket in the one
callback: one GIL hand-over a pass, however many clients are ready.

Two PING servers measure the difference, with the same Python work per read (``os.read`` of the
socket or uvloop's read, the same reply written with ``os.write``):

- ``transport``: ``asyncio.Protocol.data_received`` on uvloop's TCP transport (pyrepl today);
- ``owned``: the transport's reading paused at the connection (``pause_reading``), the socket in
  the server's own epoll, one ``add_reader`` callback for that epoll.

Each round runs ``redis-benchmark -t ping_mbulk`` against both and against redis-server, one
after the other, and reports requests a second and the server's CPU time a request
(``/proc/<pid>/stat``). It is an experiment for a decision, not a pyrepl benchmark.

    .venv/bin/python bench/bench_owned_reads.py [--rounds 3] [--requests 200000] [--clients 1,50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPLY = b"+PONG\r\n"


def serve(kind: str, port: int) -> None:
    import uvloop

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    ep = select.epoll()
    transports: dict[int, asyncio.Transport] = {}

    def on_ready() -> None:
        for fd, _ in ep.poll(0):
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                ep.unregister(fd)
                transports.pop(fd).close()
                continue
            os.write(fd, REPLY * data.count(b"*"))

    class Transported(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.fd = transport.get_extra_info("socket").fileno()

        def data_received(self, data: bytes) -> None:
            os.write(self.fd, REPLY * data.count(b"*"))

    class Owned(asyncio.Protocol):
        # (uvloop starts a new connection's reading after connection_made, whatever it did:
        # the pause comes once that is done, and what uvloop read before it is answered here)
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.fd = fd = transport.get_extra_info("socket").fileno()
            transports[fd] = transport  # type: ignore[assignment]
            ep.register(fd, select.EPOLLIN)
            loop.call_soon(transport.pause_reading)  # type: ignore[attr-defined]

        def data_received(self, data: bytes) -> None:
            os.write(self.fd, REPLY * data.count(b"*"))

    if kind == "owned":
        loop.add_reader(ep.fileno(), on_ready)
    proto = Owned if kind == "owned" else Transported
    server = loop.run_until_complete(loop.create_server(proto, "127.0.0.1", port))
    try:
        loop.run_forever()
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_port(port: int, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start(kind: str, work: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    if kind == "redis":
        argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", work]
    else:
        argv = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def bench(port: int, pid: int, clients: int, requests: int) -> tuple[float, float]:
    """(requests a second, server CPU µs a request) of one redis-benchmark run."""
    c0 = cpu_s(pid)
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(clients), "-P", "1",
                          "-n", str(requests), "-t", "ping_mbulk", "--csv"],
                         capture_output=True, text=True, timeout=600).stdout
    # (its exit status is 1 when CONFIG GET got no table, which these servers do not keep)
    cpu = cpu_s(pid) - c0
    row = [line for line in out.splitlines() if line.startswith('"PING_MBULK"')][0]
    rps = float(row.split(",")[1].strip('"'))
    return rps, cpu / requests * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--clients", default="1,50")
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0
    kinds = ("transport", "owned", "redis")
    work = tempfile.mkdtemp(prefix="owned-reads-")
    procs = {k: start(k, work) for k in kinds}
    try:
        for clients in map(int, args.clients.split(",")):
            got: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
            for _ in range(args.rounds):
                for k in kinds:
                    proc, port = procs[k]
                    got[k].append(bench(port, proc.pid, clients, args.requests))
            print(f"-c {clients} -P 1, medians of {args.rounds} rounds:")
            med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
                   for k, v in got.items()}
            for k in kinds:
                rps, cpu = med[k]
                print(f"  {k:10s} {rps:10,.0f} req/s ({rps / med['redis'][0]:.2f}x redis)"
                      f"  {cpu:6.2f} µs CPU a request")
    finally:
        for proc, _ in procs.values():
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
