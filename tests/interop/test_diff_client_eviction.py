"""maxmemory-clients (client eviction), the same clients on pyrepl and on redis-server 7.0.15 side
by side, after Redis's tests/unit/client-eviction.tcl: a client with a big query buffer, one
that does not read its output (a subscriber sent big messages, a client sending GETs of a big
value), are evicted on both, never one with CLIENT NO-EVICT on (flag ``e``, its ``tot-mem``
past the limit), and INFO's ``evicted_clients`` counts them. The unit tests of the same:
tests/unit/test_client_eviction.py."""

from __future__ import annotations

import socket
import time

import pytest
import redis

from tests.support.procs import start_pyrepl, start_redis
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

MB = 1 << 20
LIMIT = MB


def client(proc) -> redis.Redis:
    return redis.Redis(port=proc.port, socket_timeout=20)


@pytest.fixture
def pair():
    flags = ("--enable-debug-command", "yes")
    with start_pyrepl(*flags) as ours, start_redis(*flags) as theirs:
        yield [(proc, client(proc)) for proc in (ours, theirs)]


def raw(port: int, name: str, rcvbuf: int = 0) -> socket.socket:
    """A connection named ``name`` (its CLIENT SETNAME answered); a small receive buffer
    keeps what it does not read in the server."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$%d\r\n%s\r\n" % (len(name), name.encode()))
    assert s.recv(100) == b"+OK\r\n"
    return s


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def named(r: redis.Redis, name: str) -> dict | None:
    for c in r.client_list():
        if c["name"] == name:
            return c
    return None


def gone(r: redis.Redis, name: str, timeout: float = 10) -> bool:
    try:
        wait_for(lambda: named(r, name) is None, timeout)
    except AssertionError:
        return False
    return True


def setup(r: redis.Redis, limit: int = LIMIT) -> None:
    r.client_setname("control")
    r.execute_command("CLIENT", "NO-EVICT", "on")     # (the test's own connection stays)
    r.config_set("maxmemory-clients", str(limit))


def evicted(r: redis.Redis) -> int:
    return int(r.info("stats")["evicted_clients"])


def test_client_evicted_due_to_large_query_buffer(pair) -> None:
    """Half the limit in a request still arriving stays (tot-mem counts it); the limit's worth
    goes. (Redis sizes its query buffer for a big argument by the length announced, so each
    request announces what it sends, as Redis's test does.)"""
    for proc, r in pair:
        setup(r)
        assert evicted(r) == 0
        half = raw(proc.port, "half")
        half.sendall(b"*1\r\n$%d\r\n" % (LIMIT // 2) + b"v" * (LIMIT // 2))
        wait_for(lambda: int(named(r, "half")["qbuf"]) >= LIMIT // 2)   # noqa: B023
        assert LIMIT // 2 <= int(named(r, "half")["tot-mem"]) < LIMIT
        s = raw(proc.port, "qbuf")
        try:
            s.sendall(b"*1\r\n$%d\r\n" % LIMIT + b"v" * LIMIT)
        except OSError:
            pass
        assert gone(r, "qbuf"), proc
        assert evicted(r) == 1
        assert named(r, "control") is not None
        s.close()
        half.close()


def test_client_evicted_due_to_output_of_big_gets_not_read(pair) -> None:
    for proc, r in pair:
        setup(r, 3 * LIMIT)
        r.setrange("k", 200_000, "v")
        s = raw(proc.port, "reader", rcvbuf=16 * 1024)
        deadline = time.monotonic() + 30
        for _ in range(200):               # (bounded: ~15 replies fill 3 MB, plus the kernel's)
            if time.monotonic() > deadline or named(r, "reader") is None:
                break
            mem = int(named(r, "reader")["tot-mem"])
            assert mem < 3 * LIMIT + 300_000, (proc, mem)
            try:
                s.sendall(enc(b"GET", b"k"))
            except OSError:
                break
            time.sleep(0.01)
        assert gone(r, "reader"), proc
        assert evicted(r) == 1
        s.close()


@pytest.mark.parametrize("no_evict", [True, False])
def test_subscriber_not_reading_big_messages(pair, no_evict: bool) -> None:
    for proc, r in pair:
        setup(r)
        s = raw(proc.port, "sub", rcvbuf=16 * 1024)
        if no_evict:
            s.sendall(enc(b"CLIENT", b"NO-EVICT", b"on"))
            assert s.recv(100) == b"+OK\r\n"
        s.sendall(enc(b"SUBSCRIBE", b"ch"))
        assert s.recv(100).startswith(b"*3\r\n")
        message = b"m" * 200_000
        for _ in range(60):    # 12 MB of messages, the subscriber reads none (the kernel's
            # buffers take ~4 MB of them on loopback)
            assert r.publish("ch", message) in (0, 1)
            info = named(r, "sub")
            if info is None or int(info["tot-mem"]) > 2 * LIMIT:
                break
        if no_evict:
            info = named(r, "sub")
            assert info is not None, proc
            assert "e" in info["flags"] and "P" in info["flags"]
            assert int(info["tot-mem"]) > LIMIT, (proc, info["tot-mem"])
            assert evicted(r) == 0
            # (CLIENT NO-EVICT off from its own connection would wait behind the output)
        else:
            assert gone(r, "sub"), proc
            assert evicted(r) == 1
        s.close()


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def test_client_info_flags_and_no_evict_errors(pair) -> None:
    lines = []
    for _proc, r in pair:
        r.execute_command("CLIENT", "NO-EVICT", "on")
        lines.append(_text(r.execute_command("CLIENT", "INFO")))
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("CLIENT", "NO-EVICT", "maybe")
        lines.append(str(e.value))
        r.execute_command("CLIENT", "NO-EVICT", "off")
        lines.append(_text(r.execute_command("CLIENT", "INFO")))
    ours, theirs = lines[:3], lines[3:]
    for got in (ours, theirs):
        assert " flags=e " in got[0] and " flags=N " in got[2]
    assert ours[1] == theirs[1]


def test_announced_big_argument_counts_from_its_header(pair) -> None:
    """Redis makes room for a bulk of 32 KiB or more as soon as its header is read: a client
    announcing an argument past the limit is evicted before it has sent it (Redis's "client
    evicted due to large argv"); CLIENT LIST shows what arrived (qbuf: the argument's bytes,
    header parsed) and what is announced (qbuf-free), the earlier arguments in argv-mem."""
    for proc, r in pair:
        setup(r, 3 * MB)
        s = raw(proc.port, "part")
        s.sendall(b"*3\r\n$4\r\nMSET\r\n$1\r\nk\r\n$100000\r\n" + b"v" * 60_000)
        wait_for(lambda: int(named(r, "part")["qbuf"]) == 60_000, 10)  # noqa: B023
        row = named(r, "part")
        # (qbuf-free: the announced rest, 40,002; Redis's allocator rounds its room up)
        assert int(row["qbuf-free"]) >= 40_002 and int(row["argv-mem"]) == 5, (proc, row)
        assert int(row["tot-mem"]) >= 100_000, (proc, row)
        s.sendall(b"v" * 40_000 + b"\r\n")
        assert s.recv(100) == b"+OK\r\n"
        big = raw(proc.port, "big")
        big.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (3 * MB) + b"v" * 1000)
        assert gone(r, "big"), proc
        assert evicted(r) == 1 and named(r, "part") is not None
        big.close()
        s.close()


def test_equal_clients_evicted_only_until_below_the_limit(pair) -> None:
    """Redis's "evict clients only until below limit": ten equal clients, a limit for half of
    them plus the control client's tot-mem as it reads it (counting the CLIENT LIST it
    runs): five stay, on both."""
    for proc, r in pair:
        r.client_setname("control")
        r.execute_command("CLIENT", "NO-EVICT", "on")
        assert r.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "0") == b"OK"
        socks = []
        for j in range(10):
            s = raw(proc.port, f"client{j}")
            s.sendall(b"*2\r\n$%d\r\n" % MB + b"v" * MB)
            socks.append(s)
        for j in range(10):
            wait_for(lambda j=j, r=r: int(named(r, f"client{j}")["tot-mem"]) >= MB, 10)
        rows = {c["name"]: int(c["tot-mem"]) for c in r.client_list()}
        mems = {rows[f"client{j}"] for j in range(10)}
        assert len(mems) == 1, (proc, mems)     # equal clients (both servers' allocations)
        r.config_set("maxmemory-clients", mems.pop() * 5 + rows["control"])
        left = [c["name"] for c in r.client_list() if c["name"].startswith("client")]
        assert len(left) == 5, (proc, left)
        assert r.execute_command("DEBUG", "REPLYBUFFER", "RESIZING", "1") == b"OK"
        for s in socks:
            s.close()


def test_debug_replybuffer_arguments(pair) -> None:
    for _proc, r in pair:
        for args in (("PEAK-RESET-TIME", "never"), ("PEAK-RESET-TIME", "reset"),
                     ("PEAK-RESET-TIME", "100"), ("RESIZING", "0"), ("resizing", "1")):
            assert r.execute_command("DEBUG", "REPLYBUFFER", *args) == b"OK"
        errors = []
        for args in (("PEAK-RESET-TIME", "x"), ("NOPE", "1"), ("RESIZING",)):
            try:
                r.execute_command("DEBUG", "REPLYBUFFER", *args)
            except redis.ResponseError as e:
                errors.append(str(e))
        assert len(errors) == 3
    got = []
    for _proc, r in pair:
        one = []
        for args in (("PEAK-RESET-TIME", "x"), ("NOPE", "1")):
            try:
                r.execute_command("DEBUG", "REPLYBUFFER", *args)
            except redis.ResponseError as e:
                one.append(str(e))
        got.append(one)
    assert got[0] == got[1], got
