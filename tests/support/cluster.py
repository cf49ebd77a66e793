"""Clusters of real processes on 127.0.0.1: pyrepl nodes, redis-server 7.0.15 nodes, or both,
each with a free client port and a free bus port (``cluster-port``: a free client port may be
too high for +10000), made into a cluster by ``redis-cli --cluster create`` or by hand (MEET,
ADDSLOTSRANGE, REPLICATE), and waited on until every node says ``cluster_state:ok`` and agrees
on who serves every slot."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import redis

from tests.support.procs import ServerProcess, free_port, start_pyrepl, start_redis
from tests.support.waits import wait_for

SLOTS = 16384


class Node:
    def __init__(self, proc: ServerProcess, kind: str, cport: int) -> None:
        self.proc = proc
        self.kind = kind          # "pyrepl" | "redis"
        self.port = proc.port
        self.cport = cport

    def __repr__(self) -> str:
        return f"<{self.kind} node :{self.port}>"

    def client(self, timeout: float = 10.0) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=timeout)

    def cmd(self, *args: str | bytes | int, timeout: float = 10.0) -> object:
        with self.client(timeout) as c:
            return c.execute_command(*args)

    def alive(self) -> bool:
        return self.proc.alive()

    def myid(self) -> str:
        return _text(self.cmd("CLUSTER", "MYID"))

    def info(self) -> dict[str, str]:
        text = _text(self.cmd("CLUSTER", "INFO"))
        return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)

    def nodes(self) -> list[list[str]]:
        return [line.split() for line in _text(self.cmd("CLUSTER", "NODES")).splitlines()
                if line.strip()]

    def role(self) -> str:
        r = self.cmd("ROLE")
        assert isinstance(r, list)
        return str(r[0])

    def owners(self) -> dict[str, list[tuple[int, int]]]:
        """name -> slot ranges, from CLUSTER NODES."""
        out: dict[str, list[tuple[int, int]]] = {}
        for f in self.nodes():
            for s in f[8:]:
                if s.startswith("["):
                    continue
                a, _, b = s.partition("-")
                out.setdefault(f[0], []).append((int(a), int(b or a)))
        return out


def _text(v: object) -> str:
    if isinstance(v, bytes):
        return v.decode()
    return str(v)


def start_node(kind: str, *extra: str, node_timeout: int = 3000) -> Node:
    cport = free_port()
    flags = ("--cluster-enabled", "yes", "--cluster-port", str(cport),
             "--cluster-node-timeout", str(node_timeout), *extra)
    tmpdir = tempfile.mkdtemp(prefix=f"cluster-{kind}-")
    proc = start_pyrepl(*flags, tmpdir=tmpdir) if kind == "pyrepl" else \
        start_redis(*flags, tmpdir=tmpdir)
    return Node(proc, kind, cport)


def agreed(nodes: Sequence[Node]) -> bool:
    """Every live node: state ok, every node known and not in handshake, the same owners."""
    live = [n for n in nodes if n.alive()]
    try:
        views = []
        for n in live:
            if n.info().get("cluster_state") != "ok":
                return False
            table = n.nodes()
            if any("handshake" in f[2] or "fail" in f[2].split(",") for f in table
                   if any(m.alive() and f[1].split("@")[0].endswith(f":{m.port}")
                          for m in live)):
                return False
            views.append(n.owners())
        return all(v == views[0] for v in views)
    except (OSError, AssertionError, redis.RedisError):
        return False


def redis_cli_create(nodes: Sequence[Node], replicas: int = 0, timeout: float = 90) -> str:
    """``redis-cli --cluster create`` over ``nodes`` (its output)."""
    argv = ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in nodes],
            "--cluster-replicas", str(replicas), "--cluster-yes"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def redis_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["redis-cli", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def build(masters: Sequence[Node], replicas: Sequence[tuple[Node, Node]] = ()) -> None:
    """By hand: every node meets the first, the masters share the slots in even ranges
    with distinct config epochs, each (replica, master) pair replicates."""
    first = masters[0]
    everyone = [*masters, *(r for r, _ in replicas)]
    for i, n in enumerate(masters):
        assert n.cmd("CLUSTER", "SET-CONFIG-EPOCH", i + 1) == "OK"
    per = SLOTS // len(masters)
    for i, n in enumerate(masters):
        end = SLOTS - 1 if i == len(masters) - 1 else (i + 1) * per - 1
        assert n.cmd("CLUSTER", "ADDSLOTSRANGE", i * per, end) == "OK"
    for n in everyone[1:]:
        assert n.cmd("CLUSTER", "MEET", "127.0.0.1", first.port, first.cport) == "OK"
    wait_for(lambda: all(len([f for f in n.nodes() if "handshake" not in f[2]])
                         == len(everyone) for n in everyone), 60,
             what="every node to know every other")
    for r, m in replicas:
        mid = m.myid()
        wait_for(lambda r=r, mid=mid: any(f[0] == mid for f in r.nodes()), 30)
        assert r.cmd("CLUSTER", "REPLICATE", mid) == "OK"


@contextmanager
def cluster(kinds: Sequence[str], *extra: str, node_timeout: int = 3000
            ) -> Iterator[list[Node]]:
    """Started nodes of the given kinds (not yet a cluster); stopped on the way out."""
    with ExitStack() as stack:
        nodes = []
        for k in kinds:
            n = start_node(k, *extra, node_timeout=node_timeout)
            stack.callback(n.proc.stop)
            nodes.append(n)
        yield nodes
