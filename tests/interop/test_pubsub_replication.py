"""PUBLISH crosses replication as in Redis: a message published on the master reaches the
subscribers of its replicas, real Redis 7.0.15 and pyrepl both ways, through a chain too.

Each master (pyrepl or redis-server) has a pyrepl replica and a redis-server replica, and the
pyrepl replica has a sub-replica of its own; a subscriber (RESP2 pattern, RESP3 channel, shard
channel) on every replica must receive exactly what was published on the master, in order, and
no replica may answer its master with an error.
"""

from __future__ import annotations

import pytest
import redis

from tests.support.procs import start_pyrepl, start_redis
from tests.support.realpair import info, wait_in_sync
from tests.support.resp import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def listen(port: int) -> tuple[RawClient, RawClient]:
    """A RESP2 pattern+shard subscriber and a RESP3 channel subscriber on ``port``."""
    two, three = RawClient(port), RawClient(port)
    two.call("PSUBSCRIBE", "news.*")
    two.call("SSUBSCRIBE", "shard")
    three.call("HELLO", "3")
    three.call("SUBSCRIBE", "news.tech")
    return two, three


@pytest.mark.parametrize("master_kind", ["pyrepl", "redis"])
def test_publish_reaches_replica_subscribers(master_kind: str) -> None:
    start = start_pyrepl if master_kind == "pyrepl" else start_redis
    master = start("--repl-diskless-sync-delay", "0")
    nodes = []
    try:
        ours = start_pyrepl("--replicaof", "127.0.0.1", str(master.port))
        theirs = start_redis("--replicaof", "127.0.0.1", str(master.port))
        chained = start_pyrepl("--replicaof", "127.0.0.1", str(ours.port))
        nodes = [ours, theirs, chained]
        m = redis.Redis(port=master.port)
        upstream = {ours.port: m, theirs.port: m, chained.port: redis.Redis(port=ours.port)}
        for node in nodes:
            wait_in_sync(upstream[node.port], redis.Redis(port=node.port))
        subscribers = {node.port: listen(node.port) for node in nodes}
        with RawClient(master.port) as pub:
            for i in range(20):
                pub.call("PUBLISH", "news.tech", f"t{i}")
                pub.call("PUBLISH", "news.sport", f"s{i}")
                pub.call("SPUBLISH", "shard", f"sh{i}")
            pub.call("PUBLISH", "other", "nobody")
        for node in nodes:
            two, three = subscribers[node.port]
            for i in range(20):
                assert parse_reply(two.read_reply()) == [b"pmessage", b"news.*", b"news.tech",
                                                         f"t{i}".encode()], node
                assert parse_reply(two.read_reply()) == [b"pmessage", b"news.*", b"news.sport",
                                                         f"s{i}".encode()], node
                assert parse_reply(two.read_reply()) == [b"smessage", b"shard",
                                                         f"sh{i}".encode()], node
                assert three.read_reply() == b">3\r\n$7\r\nmessage\r\n$9\r\nnews.tech\r\n$%d" \
                    b"\r\nt%d\r\n" % (len(f"t{i}"), i), node
            two.close()
            three.close()
        for node in nodes:
            wait_in_sync(upstream[node.port], redis.Redis(port=node.port))
            assert "CRITICAL" not in node.log(), node.log()[-2000:]
        for node in (ours, chained):
            assert info(redis.Redis(port=node.port), "stats")["unexpected_error_replies"] == "0"
    finally:
        for node in nodes:
            node.stop()
        master.stop()
