"""Differential testing against a real redis-server: same commands, compare every reply.

``Pair`` holds one raw connection to pyrepl and one to Redis (both switched to the same RESP
version). ``Pair.check(*argv)`` sends the command to both and asserts the replies are equal —
byte for byte, except for commands whose reply order is unspecified (hash/set iteration
order), which are compared after sorting. ``check_timed`` compares TTL-like replies with a
tolerance (both servers run a command a few milliseconds apart).

Random command sequences: each test file has its own generator (a hypothesis strategy of
command lists, or a function of a ``random.Random`` seeded by hypothesis); ``run_sequence``
runs one on a ``Pair`` and names the sequence when a reply differs, ``sequence_settings``
is the hypothesis configuration they share.

Propagation: ``ReplicaTap`` attaches a fake replica to a real redis-server (SYNC) and reads
the command stream Redis sends it; ``CoreTap`` drives pyrepl's ``ServerCore`` in-process and
records what it hands to replication (``repl_feed``); ``PropagationTaps`` puts the two side by
side and ``check_propagation`` replays a table of commands through both and compares replies
and propagated commands. The fixtures that start these (``pair``, ``pairs``,
``tapped_redis``) are in tests/interop/conftest.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.support.resp import RawClient, RespError, encode_command, parse_reply

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


def check_timed(p: Pair, argv: tuple[str, ...], tolerance: int) -> None:
    """TTL/PTTL/EXPIRETIME-like commands: non-negative integers may differ by ``tolerance``."""
    ra, rb = p.both(*argv)
    va, vb = parse_reply(ra), parse_reply(rb)
    if isinstance(va, int) and isinstance(vb, int) and va >= 0 and vb >= 0:
        assert abs(va - vb) <= tolerance, f"{argv}: pyrepl {va}, redis {vb}"
    else:
        assert ra == rb, f"{argv}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}"


# -- random command sequences -------------------------------------------------------------------

PROTOS = st.sampled_from([2, 3])
SEEDS = st.integers(0, 2**32 - 1)


def sequence_settings(max_examples: int) -> settings:
    """The hypothesis settings of the random-sequence tests (module-scoped ``pairs``)."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def run_sequence(p: Pair, commands: Iterable[tuple[str, ...]],
                 check: Callable[..., object] = Pair.check,
                 final: Iterable[tuple[str, ...]] = ()) -> None:
    """Flush both servers, run ``commands`` through ``check(p, *argv)`` (``Pair.check`` unless
    the test needs its own comparison), then ``p.check`` every ``final`` command; a failure
    names the RESP version and the commands sent so far."""
    p.flushall()
    history: list[tuple[str, ...]] = []
    try:
        for argv in commands:
            history.append(argv)
            check(p, *argv)
        for argv in final:
            p.check(*argv)
    except AssertionError as e:
        raise AssertionError(f"{e}\nRESP{p.proto} sequence: {history}") from None


# -- values loaded again: the encoding tests (test_diff_hash_encoding, _set_encoding) --------

def reload_command(rnd: random.Random, kind: str, key: str, keys: list[str]) -> tuple[str, ...]:
    """A command that has each server load a value again (and choose its encoding again):
    ``reload`` DEBUG RELOAD, ``restore`` DUMP then RESTORE of ``key`` (the pseudo-command
    ``__RESTORE__``, run by :func:`dump_restore`), ``copy`` COPY to one of ``keys``."""
    if kind == "reload":
        return ("DEBUG", "RELOAD")
    if kind == "restore":
        return ("__RESTORE__", key)
    return ("COPY", key, rnd.choice(keys), "REPLACE")


def dump_restore(p: Pair, key: str) -> None:
    """DUMP ``key`` on each server and RESTORE it there from its own payload (the bytes differ:
    Redis compresses with LZF); both agree on whether there was one, and on RESTORE's reply."""
    va, vb = parse_reply(p.a.call("DUMP", key)), parse_reply(p.b.call("DUMP", key))
    assert (va is None) == (vb is None), (va, vb)
    if va is None:
        return
    ra = p.a.call("RESTORE", key, "0", va, "REPLACE")
    rb = p.b.call("RESTORE", key, "0", vb, "REPLACE")
    assert ra == rb, (ra, rb)


# -- propagation: what pyrepl hands to replication vs what a real Redis sends a replica ----

SENTINEL = "__propagation_sentinel__"


class ReplicaTap:
    """A fake replica attached to a real redis-server with SYNC; reads its command stream."""

    def __init__(self, port: int) -> None:
        self.cli = RawClient(port)
        self.cli.send("SYNC")
        c = self.cli
        deadline = time.monotonic() + 20
        while True:  # "\n" keepalives while the RDB is produced, then "$<len>\r\n<rdb>"
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
        """Commands propagated since the last call (up to a sentinel write, not returned)."""
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
    """pyrepl's ServerCore in-process, recording what it propagates (``repl_feed``).

    The clock follows the real one (to compare with a real Redis) unless ``now_ms`` fixes it.
    """

    def __init__(self, now_ms: int | None = None) -> None:
        import pyrepl.commands  # noqa: F401  (fills the command table)
        from pyrepl.config import Config
        from pyrepl.core.server import ServerCore

        self.fixed_ms = now_ms
        self.core = ServerCore(Config.load(None, [("save", [""])]), now_ms=self._now())
        self.fed: list[list[bytes]] = []
        self.core.repl_feed = lambda db, argv, data=None: self.fed.append([bytes(a) for a in argv])
        self.core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
        self.client = self.core.connection_made()

    def _now(self) -> int:
        return self.fixed_ms if self.fixed_ms is not None else int(time.time() * 1000)

    def call(self, *argv: str) -> tuple[bytes, list[list[bytes]]]:
        """The raw reply and the commands propagated."""
        self.core.now_ms = self._now()
        self.fed = []
        self.client.receive_data(encode_command(*argv))
        return self.client.data_to_send(), self.fed

    def parsed(self, *argv: str) -> tuple[object, list[list[bytes]]]:
        """The parsed reply and the commands propagated."""
        reply, fed = self.call(*argv)
        return parse_reply(reply), fed


class PropagationTaps:
    """A flushed real redis-server with a ``ReplicaTap`` attached, next to a fresh ``CoreTap``.

    ``redis(*argv)`` runs a command on Redis and returns (reply, commands Redis propagated);
    ``pyrepl(*argv)`` does the same on the in-process core. Use as a context manager.
    """

    def __init__(self, redis_port: int) -> None:
        self.core = CoreTap()
        self.data = RawClient(redis_port)
        self.data.call("FLUSHALL")
        self.tap = ReplicaTap(redis_port)

    def redis(self, *argv: str) -> tuple[bytes, list[list[bytes]]]:
        reply = self.data.call(*argv)
        return reply, self.tap.next_commands(self.data)

    def pyrepl(self, *argv: str) -> tuple[bytes, list[list[bytes]]]:
        return self.core.call(*argv)

    def close(self) -> None:
        self.tap.close()
        self.data.close()

    def __enter__(self) -> PropagationTaps:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def same_propagation(got: list[list[bytes]], want: list[list[bytes]]) -> bool:
    """Equal command streams; absolute ms times (after PXAT, PEXPIREAT's, HPEXPIREAT's and
    RESTORE's TTL argument, XCLAIM's TIME) may differ by 2 s."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        g = [g[0].upper(), *g[1:]]
        w = [w[0].upper(), *w[1:]]
        if len(g) != len(w):
            return False
        for i, (x, y) in enumerate(zip(g, w, strict=True)):
            timed = i > 0 and (g[i - 1].upper() == b"PXAT" or
                               (g[0] in (b"PEXPIREAT", b"HPEXPIREAT", b"RESTORE") and i == 2) or
                               (g[0] == b"XCLAIM" and g[i - 1].upper() == b"TIME"))
            if timed and x.lstrip(b"-").isdigit() and y.lstrip(b"-").isdigit():
                if abs(int(x) - int(y)) > 2000:
                    return False
            elif x != y:
                return False
    return True


def check_propagation(redis_port: int, cases: list[tuple[str, ...]],
                      timed_replies: frozenset[str] = frozenset()) -> None:
    """Every case's reply and propagated commands equal Redis's (replies of the commands in
    ``timed_replies`` within a second)."""
    with PropagationTaps(redis_port) as taps:
        for argv in cases:
            expected_reply, expected = taps.redis(*argv)
            reply, fed = taps.pyrepl(*argv)
            if argv[0] in timed_replies:
                a, b = parse_reply(reply), parse_reply(expected_reply)
                assert abs(a - b) <= 1000, f"{argv}: reply {reply!r} != {expected_reply!r}"
            else:
                assert reply == expected_reply, f"{argv}: reply {reply!r} != {expected_reply!r}"
            assert same_propagation(fed, expected), \
                f"{argv}: pyrepl propagated {fed}, redis {expected}"
