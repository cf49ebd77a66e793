"""Differential tests of pub/sub: pyrepl against real redis-server 7.0.15, RESP2 and RESP3.

Three subscriber connections and a publisher on each server run the same random sequence of
(P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB introspection, PING, RESET and a
command subscribe mode refuses. After every step each subscriber is sent a PING and everything
it received up to the pong is compared byte for byte with what Redis sent. Two places where
Redis's order is its hash table's (not defined): the confirmations of an UNSUBSCRIBE without
arguments (compared as the set of names and the multiset of counts) and a message matching
several patterns (the frames of one drain compared as a multiset).

Then the things a sequence does not reach: the subscribe-mode error text and the commands it
lets through, a slow subscriber dropped at the ``pubsub`` client-output-buffer-limit (and the
server going on), CLIENT LIST's flags and counts, INFO's pubsub fields.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given

from tests.support.differential import PROTOS, SEEDS, sequence_settings
from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CHANNELS = ("news", "news.tech", "sport", "x")
PATTERNS = ("news*", "*", "s?ort", "n[ae]ws.*", "nomatch")
SUBS = ("s0", "s1", "s2")


class Side:
    """One server's connections: three subscribers and a publisher."""

    def __init__(self, port: int, proto: int) -> None:
        self.conns = {name: RawClient(port, timeout=5) for name in (*SUBS, "pub")}
        if proto == 3:
            for c in self.conns.values():
                c.call("HELLO", "3")
        self.protos = dict.fromkeys(self.conns, proto)   # (RESET goes back to RESP2)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()

    def replies(self, name: str, n: int) -> list[bytes]:
        return [self.conns[name].read_reply() for _ in range(n)]

    def drain(self, name: str, subscribed: bool) -> list[bytes]:
        """Every frame the subscriber received before the reply to a PING."""
        c = self.conns[name]
        c.send("PING")
        pong = (b"*2\r\n$4\r\npong\r\n$0\r\n\r\n" if subscribed and self.protos[name] == 2
                else b"+PONG\r\n")
        got = []
        for _ in range(200):
            frame = c.read_reply()
            if frame == pong:
                return got
            got.append(frame)
        raise AssertionError(f"{name}: no pong after 200 frames")


def frames_of(data: list[bytes]) -> list[list[object]]:
    return [parse_reply(f) for f in data]  # type: ignore[misc]


def unordered(frames: list[bytes]) -> tuple[list[object], list[object]]:
    """An UNSUBSCRIBE-all's confirmations: the names and the counts, each as a multiset."""
    parsed = frames_of(frames)
    return (sorted((repr(f[0]), repr(f[1])) for f in parsed), sorted(f[2] for f in parsed))


def step_commands(rnd) -> list[tuple[str, tuple[str, ...]]]:
    """A random sequence of (connection, argv)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for _ in range(rnd.randint(5, 30)):
        who = rnd.choice(SUBS)
        some = tuple(rnd.sample(CHANNELS, rnd.randint(1, 3)))
        pats = tuple(rnd.sample(PATTERNS, rnd.randint(1, 2)))
        r = rnd.random()
        if r < 0.18:
            out.append((who, ("SUBSCRIBE", *some)))
        elif r < 0.28:
            out.append((who, ("PSUBSCRIBE", *pats)))
        elif r < 0.34:
            out.append((who, ("SSUBSCRIBE", *some)))
        elif r < 0.42:
            out.append((who, ("UNSUBSCRIBE", *some[: rnd.randint(0, len(some))])))
        elif r < 0.47:
            out.append((who, ("PUNSUBSCRIBE", *pats[: rnd.randint(0, len(pats))])))
        elif r < 0.50:
            out.append((who, ("SUNSUBSCRIBE", *some[: rnd.randint(0, len(some))])))
        elif r < 0.72:
            out.append(("pub", ("PUBLISH", rnd.choice(CHANNELS), f"m{len(out)}")))
        elif r < 0.77:
            out.append(("pub", ("SPUBLISH", rnd.choice(CHANNELS), f"s{len(out)}")))
        elif r < 0.85:
            out.append(("pub", rnd.choice([
                ("PUBSUB", "NUMSUB", *some), ("PUBSUB", "NUMPAT"),
                ("PUBSUB", "SHARDNUMSUB", *some), ("PUBSUB", "CHANNELS", rnd.choice(PATTERNS)),
                ("PUBSUB", "SHARDCHANNELS"), ("PUBSUB", "CHANNELS")])))
        elif r < 0.90:
            out.append((who, ("GET", "k")))        # refused in RESP2 subscribe mode
        elif r < 0.93:
            out.append((who, ("RESET",)))
        else:
            out.append((who, ("PING", "hi")))
    return out


def confirmations(argv: tuple[str, ...], subscribed_before: set[str]) -> int | None:
    """How many frames a (un)subscribe command answers with (None: not such a command)."""
    name = argv[0].upper()
    if name in ("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"):
        return len(argv) - 1
    if name in ("UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"):
        return len(argv) - 1 or max(1, len(subscribed_before))
    return None


class Model:
    """What each subscriber is subscribed to (to know how many frames an answer has)."""

    def __init__(self) -> None:
        self.kinds = {s: {"c": set(), "p": set(), "s": set()} for s in SUBS}

    def subscribed(self, who: str) -> bool:
        return any(self.kinds[who].values())

    def apply(self, who: str, argv: tuple[str, ...]) -> set[str]:
        """Apply; return the set an argument-less unsubscribe empties (before)."""
        name = argv[0].upper()
        key = {"SUBSCRIBE": "c", "UNSUBSCRIBE": "c", "PSUBSCRIBE": "p", "PUNSUBSCRIBE": "p",
               "SSUBSCRIBE": "s", "SUNSUBSCRIBE": "s"}.get(name)
        if name == "RESET":
            before = set()
            for k in self.kinds[who].values():
                k.clear()
            return before
        if key is None:
            return set()
        mine = self.kinds[who][key]
        before = set(mine)
        if name.endswith("UNSUBSCRIBE"):
            if len(argv) == 1:
                mine.clear()
            else:
                mine.difference_update(argv[1:])
        else:
            mine.update(argv[1:])
        return before


@pytest.fixture(scope="module")
def servers():
    ours = start_pyrepl()
    theirs = start_redis()
    try:
        yield ours.port, theirs.port
    finally:
        ours.stop()
        theirs.stop()


@given(proto=PROTOS, seed=SEEDS)
@sequence_settings(40)
def test_random_pubsub_sequences(servers, proto: int, seed: int) -> None:
    import random
    rnd = random.Random(seed)
    a, b = Side(servers[0], proto), Side(servers[1], proto)
    model = Model()
    history: list[tuple[str, tuple[str, ...]]] = []
    try:
        for who, argv in step_commands(rnd):
            history.append((who, argv))
            before = model.apply(who, argv) if who != "pub" else set()
            n = confirmations(argv, before) or 1
            for s in (a, b):
                s.conns[who].send(*argv)
                if argv[0] == "RESET":
                    s.protos[who] = 2
            ra, rb = a.replies(who, n), b.replies(who, n)
            if argv[0].endswith("UNSUBSCRIBE") and len(argv) == 1:
                assert unordered(ra) == unordered(rb), (history, ra, rb)
            elif argv[0] == "PUBSUB" and argv[1] in ("CHANNELS", "SHARDCHANNELS"):
                assert sorted(parse_reply(ra[0])) == sorted(parse_reply(rb[0])), (history, ra, rb)
            else:
                assert ra == rb, (history, ra, rb)
            if who == "pub" and argv[0] in ("PUBLISH", "SPUBLISH"):
                for sub in SUBS:
                    da = a.drain(sub, model.subscribed(sub))
                    db = b.drain(sub, model.subscribed(sub))
                    assert sorted(da) == sorted(db), (history, sub, da, db)
        for side in (a, b):        # leave both servers without subscriptions
            for sub in SUBS:
                side.conns[sub].send("RESET")
                assert side.conns[sub].read_reply() == b"+RESET\r\n"
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("proto", [2, 3])
def test_subscribe_mode_rules(servers, proto: int) -> None:
    a, b = Side(servers[0], proto), Side(servers[1], proto)
    try:
        def same(who: str, *argv: str, n: int = 1) -> list[bytes]:
            for s in (a, b):
                s.conns[who].send(*argv)
            ra, rb = a.replies(who, n), b.replies(who, n)
            assert ra == rb, (argv, ra, rb)
            return ra

        same("s0", "SUBSCRIBE", "c1", "c2", n=2)
        same("s0", "PSUBSCRIBE", "p*", n=1)
        got = same("s0", "SET", "k", "v")
        if proto == 2:
            assert got[0].startswith(b"-ERR Can't execute 'set': only (P|S)SUBSCRIBE")
        same("s0", "CONFIG", "GET", "maxmemory")
        same("s0", "PING")
        same("s0", "PING", "msg")
        same("s0", "MULTI")
        same("s0", "SUBSCRIBE", "c3")
        same("s0", "EXEC")
        same("s0", "UNSUBSCRIBE", "nope")
        same("s0", "PUBLISH", "c1", "from-self")
        same("s0", "PING")
        same("s0", "RESET")
        same("s0", "GET", "k")
        same("s0", "UNSUBSCRIBE")
        same("s0", "PUNSUBSCRIBE")
        same("s0", "SUNSUBSCRIBE")
        same("s1", "PUBSUB", "HELP")
        same("s1", "PUBSUB", "NUMPAT", "x")
        same("s1", "PUBSUB", "CHANNELS", "a", "b")
        same("s1", "PUBSUB", "NOPE")
        same("s1", "PUBLISH", "c1")
        same("s1", "SUBSCRIBE")
    finally:
        a.close()
        b.close()


def test_client_list_and_info(servers) -> None:
    views = []
    for port in servers:
        with RawClient(port) as sub, RawClient(port) as ctl:
            sub.call("CLIENT", "SETNAME", "listener")
            sub.send("SUBSCRIBE", "a", "b")
            sub.send("PSUBSCRIBE", "x*")
            sub.send("SSUBSCRIBE", "s")
            for _ in range(4):
                sub.read_reply()
            text = parse_reply(ctl.call("CLIENT", "LIST", "TYPE", "pubsub"))
            line = next(x for x in text.decode().splitlines() if "name=listener" in x)
            fields = dict(kv.split("=", 1) for kv in line.split(" "))
            stats = parse_reply(ctl.call("INFO", "stats")).decode()
            info = {k: v for k, v in (x.split(":", 1) for x in stats.splitlines() if ":" in x)}
            views.append(({k: fields[k] for k in ("flags", "sub", "psub", "ssub", "cmd")},
                          {k: info[k] for k in ("pubsub_channels", "pubsub_patterns",
                                                "pubsubshard_channels")}))
    assert views[0] == views[1]
    assert views[0][0] == {"flags": "P", "sub": "2", "psub": "1", "ssub": "1",
                           "cmd": "ssubscribe"}


def test_slow_subscriber_dropped_at_the_pubsub_limit() -> None:
    """A subscriber that never reads is closed at the hard limit; the server goes on and the
    disconnection is counted, on both servers."""
    for start in (start_pyrepl, start_redis):
        srv = start("--client-output-buffer-limit", "pubsub 256kb 128kb 60")
        try:
            with RawClient(srv.port) as sub, RawClient(srv.port) as pub:
                sub.sock.setsockopt(__import__("socket").SOL_SOCKET,
                                    __import__("socket").SO_RCVBUF, 4096)
                sub.call("SUBSCRIBE", "flood")
                payload = "x" * 4096
                deadline = time.monotonic() + 30
                receivers = 1
                sent = 0
                while receivers and time.monotonic() < deadline and sent < 50_000:
                    receivers = parse_reply(pub.call("PUBLISH", "flood", payload))
                    sent += 1
                assert receivers == 0, f"{srv}: subscriber still there after {sent} messages"
                assert sent * 4096 < 64 * 2**20   # closed long before the messages ran away
                assert "scheduled to be closed ASAP for overcoming of output buffer limits" \
                    in srv.log()
                if start is start_pyrepl:   # (a Redis 7.2 field: 7.0.15 has no such counter)
                    stats = parse_reply(pub.call("INFO", "stats")).decode()
                    assert "client_output_buffer_limit_disconnections:1" in stats, stats
                assert pub.call("PING") == b"+PONG\r\n"
                wait_for(lambda p=pub: b"pubsub_channels:0" in p.call("INFO", "stats"),
                         timeout=5, what="the channel forgotten")
        finally:
            srv.stop()
