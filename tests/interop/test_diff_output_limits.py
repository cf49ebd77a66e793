"""client-output-buffer-limit for normal clients and the soft limit's seconds, on pyrepl and on
redis-server side by side: a reply over the hard limit closes the client with nothing sent and
stops its pipeline there; a transaction still runs whole; a reply of a huge random count is
stopped mid-run (the server neither builds it nor dies); a subscriber over its soft limit is
closed once the seconds are up even though no more traffic comes (the cron's check)."""

from __future__ import annotations

import re
import socket
import time

import pytest

from tests.support.procs import ServerProcess
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for


def _closed_without_reply(cl: RawClient, timeout: float = 10.0) -> bytes:
    """What the server sent before closing the connection (b"" when nothing)."""
    cl.sock.settimeout(timeout)
    got = b""
    while True:
        chunk = cl.sock.recv(65536)
        if not chunk:
            return got
        got += chunk


def _names(admin: RawClient) -> list[str]:
    return re.findall(r"name=(\S*)", parse_reply(admin.call("CLIENT", "LIST")).decode())


def test_a_reply_over_the_hard_limit_closes_the_client_and_its_pipeline(
        each_server: ServerProcess) -> None:
    with RawClient(each_server.port) as admin:
        admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 100000 0 0")
        for _ in range(150):
            admin.call("RPUSH", "big", "x" * 1000)
        with RawClient(each_server.port) as cl:
            assert cl.call("CLIENT", "SETNAME", "bigreader") == b"+OK\r\n"
            # one write: the LRANGE's reply passes the limit, the SET behind it never runs
            cl.send_raw(b"*4\r\n$6\r\nLRANGE\r\n$3\r\nbig\r\n$1\r\n0\r\n$2\r\n-1\r\n"
                        b"*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n1\r\n")
            assert _closed_without_reply(cl) == b""
        assert "bigreader" not in _names(admin)
        assert admin.call("EXISTS", "after") == b":0\r\n"
        # under the limit: served as usual
        with RawClient(each_server.port) as cl:
            assert cl.call("LLEN", "big") == b":150\r\n"
            assert len(cl.call("LRANGE", "big", "0", "49")) > 50_000
        assert "for overcoming of output buffer limits" in each_server.log()


def test_a_transaction_runs_whole_though_its_reply_is_dropped(each_server: ServerProcess) -> None:
    with RawClient(each_server.port) as admin:
        admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 100000 0 0")
        for _ in range(150):
            admin.call("RPUSH", "big2", "y" * 1000)
        with RawClient(each_server.port) as cl:
            for argv in (("MULTI",), ("SET", "k2", "v2"), ("LRANGE", "big2", "0", "-1"),
                         ("SET", "k3", "v3")):
                assert cl.call(*argv) in (b"+OK\r\n", b"+QUEUED\r\n")
            cl.send("EXEC")
            assert _closed_without_reply(cl) == b""
        assert admin.call("MGET", "k2", "k3") == b"*2\r\n$2\r\nv2\r\n$2\r\nv3\r\n"


@pytest.mark.parametrize("argv", [("HRANDFIELD", "h", "-999999999"),
                                  ("HRANDFIELD", "h", "-499999999", "WITHVALUES"),
                                  ("SRANDMEMBER", "s", "-999999999"),
                                  ("ZRANDMEMBER", "z", "-999999999", "WITHSCORES")])
def test_a_huge_random_count_is_stopped_mid_run(each_server: ServerProcess,
                                                argv: tuple[str, ...]) -> None:
    with RawClient(each_server.port) as admin:
        admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1000000 0 0")
        admin.call("HSET", "h", "a", "b")
        admin.call("SADD", "s", "m")
        admin.call("ZADD", "z", "1", "m")
        t0 = time.monotonic()
        with RawClient(each_server.port) as cl:
            cl.send(*argv)
            assert _closed_without_reply(cl, timeout=30) == b""
        assert time.monotonic() - t0 < 20
        assert admin.call("PING") == b"+PONG\r\n"
        # a count the limit allows is answered whole
        assert parse_reply(admin.call(*argv[:2], "-5000"))[0] in (b"a", b"m")


def test_the_soft_limit_closes_a_subscriber_once_its_seconds_are_up_without_traffic(
        each_server: ServerProcess) -> None:
    with RawClient(each_server.port) as admin, RawClient(each_server.port) as sub:
        admin.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 100000 2")
        sub.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sub.call("CLIENT", "SETNAME", "slowsub")
        sub.call("SUBSCRIBE", "foo")
        omem = 0
        deadline = time.monotonic() + 20
        while omem <= 100_000 and time.monotonic() < deadline:
            admin.call("PUBLISH", "foo", "x" * 1000)
            line = [ln for ln in parse_reply(admin.call("CLIENT", "LIST")).decode().splitlines()
                    if "name=slowsub" in ln]
            assert line, "closed before its soft limit's seconds"
            omem = int(re.search(r"omem=(\d+)", line[0]).group(1))  # type: ignore[union-attr]
        assert omem > 100_000
        over_at = time.monotonic()
        # no more traffic: the cron closes it once its 2 seconds are up, not before
        wait_for(lambda: "slowsub" not in _names(admin), timeout=10,
                 what="the subscriber closed at its soft limit")
        assert time.monotonic() - over_at >= 1.0
        assert "closed for overcoming of output buffer limits" in each_server.log()
