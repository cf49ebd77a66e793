"""The Python floor: the least a Python RESP server on uvloop + hiredis does per command.

    python bench/floor_server.py PORT [--replica PORT]

It parses requests with hiredis, runs the six commands the throughput benchmark sends (SET,
GET, INCR, LPUSH, HSET, ZADD) on plain dicts and lists, and writes the replies, one write per
read; anything else gets ``+OK`` (CONFIG GET, which redis-benchmark sends first, gets an empty
array). No validation, no expiry, no stats: what is left of a server's work when everything a
real one must do is removed. The benchmarks run it beside pyrepl and Redis and report pyrepl ÷
floor: how far pyrepl is from what Python itself allows.

The floor of replication, for the replication benchmark: with ``--replica PORT`` it connects
to another floor at PORT, says ``SYNC`` (that floor then applies what comes on the connection
and replies nothing), and passes on every read that held a write as it arrived, verbatim, the
reads of one event-loop pass in one write (as a real master writes its replicas once a pass).
No backlog, offsets, handshake or snapshot: a master's least work per replicated write.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque

import hiredis
import uvloop

OK = b"+OK\r\n"
NIL = b"$-1\r\n"
WRITES = frozenset((b"SET", b"INCR", b"LPUSH", b"HSET", b"ZADD"))


class Link:
    """The master side of a floor pair: reads with writes, passed on once a loop pass."""

    def __init__(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop
                 ) -> None:
        self.t = transport
        self.loop = loop
        self.pending: list[bytes] = []

    def add(self, chunk: bytes) -> None:
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.append(chunk)

    def flush(self) -> None:
        self.t.write(b"".join(self.pending))     # type: ignore[attr-defined]
        self.pending.clear()


class Floor(asyncio.Protocol):
    data: dict[bytes, object] = {}
    link: Link | None = None           # the master side's link to its replica floor
    silent = False                     # this connection is the master's: no replies

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.reader = hiredis.Reader()

    def data_received(self, chunk: bytes) -> None:
        self.reader.feed(chunk)
        out = []
        data = self.data
        wrote = False
        while (req := self.reader.gets()) is not False:
            cmd = req[0].upper()
            wrote = wrote or cmd in WRITES
            if cmd == b"SET":
                data[req[1]] = req[2]
                out.append(OK)
            elif cmd == b"GET":
                v = data.get(req[1])
                out.append(NIL if v is None else b"$%d\r\n%s\r\n" % (len(v), v))
            elif cmd == b"INCR":
                n = int(data.get(req[1], 0)) + 1
                data[req[1]] = b"%d" % n
                out.append(b":%d\r\n" % n)
            elif cmd == b"LPUSH":
                lst = data.get(req[1])
                if lst is None:
                    lst = data[req[1]] = deque()
                lst.extendleft(req[2:])
                out.append(b":%d\r\n" % len(lst))
            elif cmd in (b"HSET", b"ZADD"):
                h = data.setdefault(req[1], {})
                before = len(h)
                z = cmd == b"ZADD"              # (score member) pairs, not (field value)
                for i in range(2, len(req) - 1, 2):
                    h[req[i + z]] = req[i + 1 - z]
                out.append(b":%d\r\n" % (len(h) - before))
            elif cmd == b"PING":
                out.append(b"+PONG\r\n")
            elif cmd == b"CONFIG":
                out.append(b"*0\r\n")
            elif cmd == b"SYNC":
                self.silent = True
            else:
                out.append(OK)
        if wrote and self.link is not None:
            self.link.add(chunk)
        if not self.silent:
            self.t.write(b"".join(out))


async def main(port: int, replica: int | None) -> None:
    loop = asyncio.get_running_loop()
    if replica is not None:
        transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", replica)
        transport.write(b"*1\r\n$4\r\nSYNC\r\n")
        Floor.link = Link(transport, loop)
    server = await loop.create_server(Floor, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    args = sys.argv[1:]
    uvloop.run(main(int(args[0]), int(args[2]) if args[1:2] == ["--replica"] else None))
