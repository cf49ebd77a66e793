"""Redis's ``redisLrand48`` / ``redisSrand48`` (rand.c), the generator behind Lua's math.random.

Theory of operation: the 48-bit linear congruential generator of lrand48 (``X = a*X + c mod
2^48``, 31 bits out), written once in Redis so every platform gives the same sequence for a
seed. Its state is process-wide and outlives SCRIPT FLUSH, as Redis's static variables do; in
Redis 7.0 it is not reseeded per script (effects replication made that unnecessary).
"""

from __future__ import annotations

_A = 0x5DEECE66D
_C = 0xB
_MASK = (1 << 48) - 1
REDIS_LRAND48_MAX = 2**31 - 1   # INT32_MAX


class Lrand48:
    __slots__ = ("x",)

    def __init__(self) -> None:
        self.x = (0x1234 << 32) | (0xABCD << 16) | 0x330E   # X2 X1 X0, the static initial state

    def seed(self, seedval: int) -> None:
        """redisSrand48: X0 = 0x330E, X1/X2 = the low/high 16 bits of the 32-bit seed."""
        s = seedval & 0xFFFFFFFF
        self.x = ((s >> 16) << 32) | ((s & 0xFFFF) << 16) | 0x330E

    def next(self) -> int:
        self.x = (_A * self.x + _C) & _MASK
        return self.x >> 17

    def random(self) -> float:
        """math.random()'s r: ``(lrand48() % REDIS_LRAND48_MAX) / REDIS_LRAND48_MAX``."""
        return (self.next() % REDIS_LRAND48_MAX) / REDIS_LRAND48_MAX
