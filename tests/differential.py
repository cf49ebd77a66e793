"""Differential testing against a real redis-server: same commands, compare every reply.

``Pair`` holds one raw connection to pyrepl and one to Redis (both switched to the same RESP
version). ``Pair.check(*argv)`` sends the command to both and asserts the replies are equal —
byte for byte, except for commands whose reply order is unspecified (hash/set iteration
order), which are compared after sorting.
"""

from __future__ import annotations

import time

from support import RawClient, RespError, encode_command, parse_reply

# Commands whose array replies have no defined order (compare sorted). Map replies (RESP3
# HGETALL) are compared as dicts by parse_reply already.
UNORDERED = {
    b"smembers", b"sunion", b"sinter", b"sdiff", b"hkeys", b"hvals", b"keys", b"hgetall",
    b"sunionstore", b"sinterstore", b"sdiffstore",
}
PAIRED = {b"hgetall"}  # flat key/value arrays in RESP2: compare as pairs


def normalize(argv: tuple, reply: bytes) -> object:
    name = (argv[0].encode() if isinstance(argv[0], str) else argv[0]).lower()
    if name not in UNORDERED:
        return reply
    v = parse_reply(reply)
    if isinstance(v, list):
        if name in PAIRED:
            pairs = sorted(zip(v[0::2], v[1::2], strict=True))
            return ("pairs", pairs)
        return ("sorted", sorted(v, key=repr))
    if isinstance(v, RespError):
        return ("error", str(v))
    return v


class Pair:
    def __init__(self, pyrepl_port: int, redis_port: int, proto: int = 2) -> None:
        self.a = RawClient(pyrepl_port)
        self.b = RawClient(redis_port)
        self.proto = proto
        if proto == 3:
            self.a.call("HELLO", "3")
            self.b.call("HELLO", "3")

    def close(self) -> None:
        self.a.close()
        self.b.close()

    def both(self, *argv: bytes | str | int) -> tuple[bytes, bytes]:
        return self.a.call(*argv), self.b.call(*argv)

    def check(self, *argv: bytes | str | int) -> bytes:
        ra, rb = self.both(*argv)
        na, nb = normalize(argv, ra), normalize(argv, rb)
        assert na == nb, f"{argv!r}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}"
        return ra

    def flushall(self) -> None:
        self.both("FLUSHALL")


# -- propagation: what pyrepl hands to replication vs what a real Redis sends a replica ----

SENTINEL = "__propagation_sentinel__"


class ReplicaTap:
    """A fake replica attached to a real redis-server with SYNC; reads its command stream."""

    def __init__(self, port: int) -> None:
        self.cli = RawClient(port)
        self.cli.send("SYNC")
        c = self.cli
        # Newlines are keepalives while the RDB is produced; then "$<len>\r\n<rdb>".
        deadline = time.monotonic() + 20
        while True:
            while not c.buf:
                c._fill()
            if c.buf[:1] == b"\n":
                c.buf = c.buf[1:]
                continue
            if b"\r\n" in c.buf:
                break
            assert time.monotonic() < deadline, "no RDB header from redis-server"
            c._fill()
        head, _, rest = c.buf.partition(b"\r\n")
        assert head.startswith(b"$") and not head.startswith(b"$EOF:"), head
        size = int(head[1:])
        while len(rest) < size:
            rest += c.sock.recv(65536)
        c.buf = rest[size:]
        self.marker = 0

    def next_commands(self, data_client: RawClient) -> list[list[bytes]]:
        """Commands propagated since the last call (ends with a sentinel write, not returned)."""
        self.marker += 1
        data_client.call("RPUSH", SENTINEL, str(self.marker))
        out: list[list[bytes]] = []
        for _ in range(10000):
            argv = parse_reply(self.cli.read_reply())
            assert isinstance(argv, list), argv
            if argv[0].upper() in (b"PING", b"SELECT"):
                continue
            if argv[0].upper() == b"RPUSH" and argv[1] == SENTINEL.encode():
                if out and out[-1] == [b"MULTI"]:
                    out.pop()
                return out
            out.append(argv)
        raise AssertionError("sentinel never propagated")

    def close(self) -> None:
        self.cli.close()


class CoreTap:
    """pyrepl's ServerCore in-process, recording what it propagates (``repl_feed``)."""

    def __init__(self) -> None:
        from pyrepl.config import Config
        from pyrepl.core import ServerCore

        self.core = ServerCore(Config(), now_ms=int(time.time() * 1000))
        self.fed: list[list[bytes]] = []
        self.core.repl_feed = lambda db, argv: self.fed.append([bytes(a) for a in argv])
        self.client = self.core.connection_made()

    def call(self, *argv: str) -> tuple[bytes, list[list[bytes]]]:
        self.core.now_ms = int(time.time() * 1000)
        self.fed = []
        self.client.receive_data(encode_command(*argv))
        return self.client.data_to_send(), self.fed


def check_propagation(redis_port: int, cases: list[tuple[str, ...]]) -> None:
    core = CoreTap()
    data = RawClient(redis_port)
    tap = ReplicaTap(redis_port)
    try:
        for argv in cases:
            expected_reply = data.call(*argv)
            expected = tap.next_commands(data)
            reply, fed = core.call(*argv)
            assert reply == expected_reply, f"{argv}: reply {reply!r} != {expected_reply!r}"
            got = [[a.upper() if i == 0 else a for i, a in enumerate(cmd)] for cmd in fed]
            want = [[a.upper() if i == 0 else a for i, a in enumerate(cmd)] for cmd in expected]
            assert got == want, f"{argv}: pyrepl propagated {got}, redis {want}"
    finally:
        tap.close()
        data.close()
