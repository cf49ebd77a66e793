"""The tests' raw RESP client (tests/support/resp.py) against a socket that answers late: a
call whose reply timed out makes the next call raise, not return that late reply as its own."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.support.resp import RawClient, RespError


def test_a_call_after_one_that_timed_out_raises_until_the_late_reply_is_read() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    release = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)                 # the first PING: answered only once released
            release.wait(10)
            conn.sendall(b"+LATE\r\n")
            conn.recv(1024)
            conn.sendall(b"+PONG\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with RawClient(listener.getsockname()[1], timeout=0.2) as c:
            with pytest.raises(TimeoutError):
                c.call("PING")
            with pytest.raises(RespError, match="never read"):
                c.call("PING")              # (nothing sent: the late reply is still owed)
            release.set()
            c.sock.settimeout(10)
            assert c.read_reply() == b"+LATE\r\n"
            assert c.call("PING") == b"+PONG\r\n"
    finally:
        release.set()
        t.join(10)
        listener.close()
