"""The Python floor: the least a Python RESP server on uvloop + hiredis does per command.

    python bench/floor_server.py PORT

It parses requests with hiredis, runs the six commands the throughput benchmark sends (SET,
GET, INCR, LPUSH, HSET, ZADD) on plain dicts and lists, and writes the replies, one write per
read; anything else gets ``+OK`` (CONFIG GET, which redis-benchmark sends first, gets an empty
array). No validation, no expiry, no stats, no replication: what is left of a server's work
when everything a real one must do is removed. The benchmarks run it beside pyrepl and Redis
and report pyrepl ÷ floor: how far pyrepl is from what Python itself allows.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque

import hiredis
import uvloop

OK = b"+OK\r\n"
NIL = b"$-1\r\n"


class Floor(asyncio.Protocol):
    data: dict[bytes, object] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.reader = hiredis.Reader()

    def data_received(self, chunk: bytes) -> None:
        self.reader.feed(chunk)
        out = []
        data = self.data
        while (req := self.reader.gets()) is not False:
            cmd = req[0].upper()
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
            else:
                out.append(OK)
        self.t.write(b"".join(out))


async def main(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1])))
