"""Fixtures of the differential tests (pyrepl against a real redis-server 7.0.15).

``pair``: a ``differential.Pair`` on flushed servers, closed after the test; RESP2 unless the
test parametrizes ``proto`` (``@pytest.mark.parametrize("proto", [2, 3])``). ``pairs``: one
``Pair`` per RESP version for a whole module (hypothesis tests flush between examples).
``tapped_redis``: a redis-server of the module's own, with disk-based replication so that a
``ReplicaTap`` (SYNC) receives a plain RDB then the command stream.
"""

from __future__ import annotations

from contextlib import closing

import pytest

from tests.support.differential import Pair
from tests.support.procs import side_by_side, start_pyrepl, start_redis


@pytest.fixture
def proto() -> int:
    return 2


@pytest.fixture
def pair(pyrepl_server, redis_server, proto):
    with closing(Pair(pyrepl_server.port, redis_server.port, proto)) as p:
        p.flushall()
        yield p


@pytest.fixture(scope="module")
def pairs(pyrepl_server, redis_server):
    made = {proto: Pair(pyrepl_server.port, redis_server.port, proto) for proto in (2, 3)}
    try:
        yield made
    finally:
        for p in made.values():
            p.close()


@pytest.fixture(scope="module")
def servers():
    """A module's own pyrepl and redis-server (DEBUG enabled) as ``(pyrepl port, redis
    port)``."""
    with side_by_side("--enable-debug-command", "yes") as (a, b):
        yield a.port, b.port


@pytest.fixture(scope="module")
def tapped_redis():
    with start_redis("--repl-diskless-sync", "no") as srv:
        yield srv


@pytest.fixture(params=["pyrepl", "redis"])
def each_server(request: pytest.FixtureRequest):  # noqa: ANN201
    """One test run against a fresh pyrepl, then a fresh redis-server (their defaults as the
    procs helpers start them)."""
    srv = (start_pyrepl if request.param == "pyrepl" else start_redis)()
    try:
        yield srv
    finally:
        srv.stop()
