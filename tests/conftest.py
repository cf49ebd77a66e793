"""Shared fixtures: a pyrepl server process and a real redis-server, started once per session."""

from __future__ import annotations

import pytest

from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import RawClient


@pytest.fixture(scope="session")
def pyrepl_server():
    srv = start_pyrepl()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def redis_server():
    srv = start_redis()
    yield srv
    srv.stop()


@pytest.fixture
def pyrepl_servers():
    """A factory of pyrepl processes (``start(*flags)``); every one started is stopped after."""
    started = []

    def start(*extra: str):  # noqa: ANN202
        srv = start_pyrepl(*extra)
        started.append(srv)
        return srv

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def r(pyrepl_server):
    """A redis-py client (default settings: RESP3 with redis-py 8) on a flushed pyrepl."""
    import redis

    client = redis.Redis(port=pyrepl_server.port)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def r2(pyrepl_server):
    """A redis-py client speaking RESP2 on a flushed pyrepl."""
    import redis

    client = redis.Redis(port=pyrepl_server.port, protocol=2)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def raw(pyrepl_server):
    with RawClient(pyrepl_server.port) as c:
        c.call("FLUSHALL")
        yield c
