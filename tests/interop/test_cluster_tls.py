"""tls-cluster: the cluster bus over TLS, in a cluster of pyrepl and redis-server 7.0.15 nodes
(each with a plain port, a TLS port and ``tls-cluster yes``; Redis then speaks only TLS on
the bus, so the cluster forms only if pyrepl's bus does both ways). A client is told the ports
of its own kind, as Redis tells them: the TLS ports over TLS, the plaintext ones (``pport``)
over the plain port (CLUSTER SLOTS, NODES, SHARDS and MOVED), and RedisCluster over TLS
writes and reads keys of every node."""

from __future__ import annotations

import shutil
import socket
import ssl
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from tests.support.cluster import Node, agreed, build
from tests.support.procs import free_port, start_pyrepl, start_redis
from tests.support.tlscerts import make_certs
from tests.support.tlscerts import server_args as tls_args
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is missing (the test command installs it)")
    return make_certs(tmp_path_factory.mktemp("tls"))


def tls_client(d: Path, port: int) -> redis.Redis:
    return redis.Redis(port=port, ssl=True, ssl_ca_certs=str(d / "ca.crt"),
                       ssl_certfile=str(d / "redis.crt"), ssl_keyfile=str(d / "redis.key"),
                       ssl_check_hostname=False, socket_timeout=20, decode_responses=True)


def start(kind: str, certs: Path) -> tuple[Node, int]:
    tls_port, cport = free_port(), free_port()
    flags = (*tls_args(certs, tls_port), "--tls-cluster", "yes", "--tls-replication", "yes",
             "--cluster-enabled", "yes", "--cluster-port", str(cport),
             "--cluster-node-timeout", "3000")
    proc = start_pyrepl(*flags) if kind == "pyrepl" else start_redis(*flags)
    return Node(proc, kind, cport), tls_port


def test_a_mixed_cluster_over_a_tls_bus(certs: Path) -> None:
    with ExitStack() as stack:
        started = [start(k, certs) for k in ("pyrepl", "redis", "pyrepl", "redis")]
        for n, _ in started:
            stack.callback(n.proc.stop)
        nodes = [n for n, _ in started]
        tls_port = {n.port: t for n, t in started}
        p1, r1, p2, r2 = nodes
        build([p1, r1, p2], replicas=[(r2, p1)])      # a Redis replica of a pyrepl master
        wait_for(lambda: agreed(nodes), 60, what="the TLS cluster to agree")

        # pyrepl's bus port speaks TLS: a handshake with the CA's certificate succeeds
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        ctx.check_hostname = False
        ctx.load_cert_chain(str(certs / "redis.crt"), str(certs / "redis.key"))
        with socket.create_connection(("127.0.0.1", p1.cport), timeout=10) as raw, \
                ctx.wrap_socket(raw) as tls_sock:
            assert tls_sock.version() in ("TLSv1.2", "TLSv1.3")

        # the replica follows over TLS (tls-replication) and the data arrives
        wait_for(lambda: r2.cmd("ROLE")[0] == "slave", 30)   # type: ignore[index]

        # the ports a client is told: its own kind's, the same from a pyrepl and a Redis node
        def slots_ports(n: Node, over_tls: bool) -> list[list[int]]:
            c = tls_client(certs, tls_port[n.port]) if over_tls else n.client()
            with c:
                reply = c.execute_command("CLUSTER", "SLOTS")
            return sorted([e[0], e[1], *[x[1] for x in e[2:]]] for e in reply)
        for over_tls in (False, True):
            want = slots_ports(r1, over_tls)
            assert slots_ports(p1, over_tls) == want == slots_ports(p2, over_tls)
        plain = {n.port for n in nodes}
        assert {p for e in slots_ports(p1, False) for p in e[2:]} <= plain
        assert {p for e in slots_ports(p1, True) for p in e[2:]} <= set(tls_port.values())

        def shard_ports(n: Node) -> list[tuple[int, int]]:
            with n.client() as c:
                shards = c.execute_command("CLUSTER", "SHARDS")
            out = []
            for sh in shards:           # (redis-py makes each shard and node a dict)
                for nd in sh["nodes"]:
                    out.append((int(nd["port"]), int(nd["tls-port"])))
            return sorted(out)
        assert shard_ports(p1) == shard_ports(r1) == sorted(
            (n.port, tls_port[n.port]) for n in nodes)

        def node_ports(n: Node, over_tls: bool) -> list[str]:
            c = tls_client(certs, tls_port[n.port]) if over_tls else n.client()
            with c:
                text = c.execute_command("CLUSTER", "NODES")
            return sorted(line.split()[1] for line in str(text).splitlines())
        for over_tls in (False, True):
            assert node_ports(p1, over_tls) == node_ports(r1, over_tls)

        # MOVED names the plaintext port to a plain client, the TLS port over TLS
        key = next(f"k{i}" for i in range(10_000)
                   if p1.cmd("CLUSTER", "KEYSLOT", f"k{i}") in
                   range(16384 // 3, 2 * (16384 // 3)))     # one of r1's slots
        for over_tls in (False, True):
            errs = []
            for n in (p1, p2):
                c = tls_client(certs, tls_port[n.port]) if over_tls else n.client()
                with c, pytest.raises(redis.exceptions.MovedError) as e:
                    c.get(key)
                errs.append((e.value.host, e.value.port))
            want = tls_port[r1.port] if over_tls else r1.port
            assert errs == [("127.0.0.1", want)] * 2

        # RedisCluster over TLS: keys on every master, read back
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", tls_port[p1.port])],
                          ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                          ssl_certfile=str(certs / "redis.crt"),
                          ssl_keyfile=str(certs / "redis.key"), ssl_check_hostname=False,
                          decode_responses=True)
        with rc:
            for i in range(300):
                rc.set(f"t{i}", i)
            assert [rc.get(f"t{i}") for i in range(300)] == [str(i) for i in range(300)]
        assert all(int(n.cmd("DBSIZE")) > 0 for n in (p1, r1, p2))     # type: ignore[arg-type]
        wait_for(lambda: r2.cmd("DBSIZE") == p1.cmd("DBSIZE"), 30,
                 what="the Redis replica over TLS to catch up")


def _tls_handshake(certs: Path, port: int) -> bool:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(certs / "redis.crt"), str(certs / "redis.key"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw, \
                ctx.wrap_socket(raw):
            return True
    except (ssl.SSLError, OSError):
        return False


def test_config_set_tls_cluster_switches_the_bus_listener(certs: Path) -> None:
    """As Redis's accept handler decides at each accept: connections accepted after CONFIG
    SET tls-cluster are TLS or plain as it says; the node keeps serving."""
    tls_port, cport = free_port(), free_port()
    proc = start_pyrepl(*tls_args(certs, tls_port), "--cluster-enabled", "yes",
                        "--cluster-port", str(cport))
    try:
        n = Node(proc, "pyrepl", cport)
        assert not _tls_handshake(certs, cport)
        assert n.cmd("CONFIG", "SET", "tls-cluster", "yes") == "OK"
        wait_for(lambda: _tls_handshake(certs, cport), 10, what="a TLS bus listener")
        assert n.cmd("CONFIG", "SET", "tls-cluster", "no") == "OK"
        wait_for(lambda: not _tls_handshake(certs, cport), 10, what="a plain bus listener")
        assert n.cmd("PING") is True or n.cmd("PING") == "PONG"
    finally:
        proc.stop()
