"""Differential testing against a real redis-server: same commands, compare every reply.

``Pair`` holds one raw connection to pyrepl and one to Redis (both switched to the same RESP
version). ``Pair.check(*argv)`` sends the command to both and asserts the replies are equal —
byte for byte, except for commands whose reply order is unspecified (hash/set iteration
order), which are compared after sorting.
"""

from __future__ import annotations

from support import RawClient, RespError, parse_reply

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
