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


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN201
    """Under ``make test``'s workers (pytest-xdist, ``--dist loadgroup``) the Spark tests
    (tests/analytics) run on one worker, one after another, and every other test is given to
    the next worker done with its own. One JVM beside the other workers' servers, not one a
    worker: their contention on two cores drove a Spark job past the 300 s timeout, and a py4j
    gateway cut mid-call fails every later Spark test of its worker. (xdist's own loadgroup
    reads an xdist_group mark into the node id, which pytest 9.2's node ids no longer take.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler.loadscope import LoadScopeScheduling

    class SparkOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "spark" if nodeid.startswith("tests/analytics/") else nodeid

    return SparkOnOneWorker(config, log)
