"""Cluster mode end to end, with real processes on loopback: clusters of pyrepl nodes made
by ``redis-cli --cluster create``, checked, resharded and rebalanced by redis-cli while
redis-py's RedisCluster writes; a master killed with SIGKILL and its replica elected, with
every WAIT-acknowledged write still there; and mixed clusters of pyrepl and redis-server
7.0.15 nodes, each kind serving slots and replicating the other kind, failing over both
ways."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster

from tests.support.cluster import Node, agreed, build, cluster, redis_cli, redis_cli_create
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

NODE_TIMEOUT = 3000


def rc_for(nodes: list[Node]) -> RedisCluster:
    live = next(n for n in nodes if n.alive())
    return RedisCluster(host="127.0.0.1", port=live.port, decode_responses=True)


def keys_per_node(nodes: list[Node]) -> dict[int, int]:
    return {n.port: int(n.cmd("DBSIZE")) for n in nodes if n.alive()}


def test_redis_cli_creates_checks_reshards_and_rebalances_a_pyrepl_cluster() -> None:
    with cluster(["pyrepl"] * 6, node_timeout=NODE_TIMEOUT) as nodes:
        out = redis_cli_create(nodes, replicas=1)
        assert "[OK] All 16384 slots covered." in out
        wait_for(lambda: agreed(nodes), 60, what="the cluster to agree")
        check = redis_cli("--cluster", "check", f"127.0.0.1:{nodes[0].port}")
        assert "[OK] All nodes agree about slots configuration." in check.stdout
        assert "[ERR]" not in check.stdout
        masters = [n for n in nodes if n.role() == "master"]
        assert len(masters) == 3
        rc = rc_for(nodes)
        for i in range(2000):
            rc.set(f"k{i}", i)
        # every key is where its slot is served, and COUNTKEYSINSLOT agrees
        for i in (0, 777, 1999):
            slot = rc.keyslot(f"k{i}")
            owner = rc.get_node_from_key(f"k{i}")
            n = next(m for m in masters if m.port == owner.port)
            assert int(n.cmd("CLUSTER", "COUNTKEYSINSLOT", slot)) >= 1
            assert f"k{i}" in n.cmd("CLUSTER", "GETKEYSINSLOT", slot, 100)
        assert sum(keys_per_node(masters).values()) == 2000
        # a reshard of 300 slots and a rebalance while a client keeps writing
        stop = threading.Event()
        written: list[int] = []
        errors: list[BaseException] = []

        def writer() -> None:
            w = rc_for(nodes)
            i = 2000
            try:
                while not stop.is_set() and i < 200_000:
                    w.set(f"k{i}", i)
                    written.append(i)
                    i += 1
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
        t = threading.Thread(target=writer)
        t.start()
        try:
            src, dst = masters[0].myid(), masters[1].myid()
            r = redis_cli("--cluster", "reshard", f"127.0.0.1:{masters[0].port}",
                          "--cluster-from", src, "--cluster-to", dst, "--cluster-slots",
                          "300", "--cluster-yes")
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr
            r = redis_cli("--cluster", "rebalance", f"127.0.0.1:{masters[0].port}",
                          "--cluster-yes")
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr
        finally:
            stop.set()
            t.join(60)
        assert not errors, errors
        assert len(written) > 100
        wait_for(lambda: agreed(nodes), 60, what="the cluster to agree after the moves")
        check = redis_cli("--cluster", "check", f"127.0.0.1:{nodes[0].port}")
        assert "[OK] All 16384 slots covered." in check.stdout
        assert "[WARNING]" not in check.stdout, check.stdout
        sizes = sorted(len(rng) for rng in [nodes[0].owners()[m.myid()] for m in masters])
        assert sizes                     # (each master still serves slots)
        rc = rc_for(nodes)
        missing = [i for i in range(2000) if rc.get(f"k{i}") != str(i)]
        missing += [i for i in written if rc.get(f"k{i}") != str(i)]
        assert not missing, missing[:10]
        assert sum(keys_per_node(masters).values()) == 2000 + len(written)


def test_kill_9_of_a_master_elects_its_replica_and_acknowledged_writes_survive() -> None:
    with cluster(["pyrepl"] * 6, node_timeout=NODE_TIMEOUT) as nodes:
        redis_cli_create(nodes, replicas=1)
        wait_for(lambda: agreed(nodes), 60, what="the cluster to agree")
        victim = next(n for n in nodes if n.role() == "master")
        vid = victim.myid()
        replica = next(n for n in nodes if n.role() == "slave" and
                       any(f[0] == n.myid() and f[3] == vid for f in n.nodes()))
        # writes to the victim's slots, each acknowledged by WAIT 1
        slots = victim.owners()[vid]
        acked = []
        with victim.client() as c:
            i = 0
            while len(acked) < 300:
                key = f"w{i}"
                i += 1
                slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
                if not any(a <= slot <= b for a, b in slots):
                    continue
                c.set(key, i)
                if c.execute_command("WAIT", 1, 2000) == 1:
                    acked.append((key, str(i)))
        t0 = time.monotonic()
        victim.proc.kill()
        wait_for(lambda: replica.role() == "master", NODE_TIMEOUT / 1000 + 10,
                 what="the replica to be elected")
        elected = time.monotonic() - t0
        rc = rc_for(nodes)
        wait_for(lambda: _writable(rc, acked[0][0]), 15, what="clients to follow")
        followed = time.monotonic() - t0
        assert followed < NODE_TIMEOUT / 1000 + 8, (elected, followed)
        with replica.client() as c:
            lost = [k for k, v in acked if c.get(k) != v]
        assert not lost, lost[:10]
        assert [f for f in replica.nodes() if f[0] == vid][0][2] == "master,fail"


def _writable(rc: RedisCluster, key: str) -> bool:
    try:
        rc.set(key + ":probe", 1)
        return True
    except redis.RedisError:
        return False


def test_a_mixed_cluster_of_pyrepl_and_redis_nodes_fails_over_both_ways() -> None:
    kinds = ["pyrepl", "redis", "pyrepl", "redis", "pyrepl", "redis"]
    with cluster(kinds, node_timeout=NODE_TIMEOUT) as nodes:
        p1, r1, p2, r2, p3, r3 = nodes
        # masters p1 (pyrepl), r1 (redis), p2 (pyrepl); each kind replicates the other kind
        build([p1, r1, p2], replicas=[(r2, p1), (p3, r1), (r3, p2)])
        wait_for(lambda: agreed(nodes), 60, what="the mixed cluster to agree")
        assert [n.role() for n in nodes] == ["master", "master", "master", "slave", "slave",
                                             "slave"]
        rc = rc_for(nodes)
        for i in range(600):
            rc.set(f"m{i}", i)
        assert sum(keys_per_node([p1, r1, p2]).values()) == 600
        wait_for(lambda: int(p3.cmd("DBSIZE")) == int(r1.cmd("DBSIZE")), 30,
                 what="the pyrepl replica of the redis master to catch up")
        wait_for(lambda: int(r2.cmd("DBSIZE")) == int(p1.cmd("DBSIZE")), 30,
                 what="the redis replica of the pyrepl master to catch up")
        # the redis master dies: its pyrepl replica is elected (votes from both kinds)
        r1.proc.kill()
        wait_for(lambda: p3.role() == "master", NODE_TIMEOUT / 1000 + 10,
                 what="the pyrepl replica to be elected")
        wait_for(lambda: agreed(nodes), 30, what="the cluster to agree on the new master")
        assert "Failover auth granted" in p1.proc.log()          # a pyrepl master voted
        # the pyrepl master dies: its redis replica is elected
        p1.proc.kill()
        wait_for(lambda: r2.role() == "master", NODE_TIMEOUT / 1000 + 10,
                 what="the redis replica to be elected")
        wait_for(lambda: agreed(nodes), 30, what="the cluster to agree again")
        rc = rc_for(nodes)
        assert [rc.get(f"m{i}") for i in range(600)] == [str(i) for i in range(600)]
        # a node of either kind answers for the slot or sends the client to the same owner
        slot = rc.keyslot("m1")
        owners = set()
        for n in (p2, r3, p3, r2):
            with n.client() as c:
                try:
                    assert c.get("m1") == "1"
                    owners.add(n.port)
                except redis.exceptions.MovedError as e:
                    assert e.slot_id == slot
                    owners.add(e.port)
        assert len(owners) == 1
        owner = next(n for n in nodes if n.port in owners)
        assert owner.role() == "master"


def test_garbage_and_mutated_frames_on_the_bus_port_never_take_a_node_down() -> None:
    """The bus port fuzzed as the request parser is: random bytes, truncated frames and
    frames with flipped bytes, from an unknown node, over many connections. The node stays
    up, answers, and its view of the cluster does not change."""
    import random
    import socket

    from pyrepl.cluster import wire

    with cluster(["pyrepl", "pyrepl"], node_timeout=NODE_TIMEOUT) as nodes:
        a, b = nodes
        build([a, b])
        wait_for(lambda: agreed(nodes), 60, what="the pair to agree")
        def view() -> list[tuple[str, str, tuple[str, ...]]]:
            # (a mutated frame may be a MEET: a node in handshake, dropped after the timeout,
            # as Redis does; the known nodes and their slots must not change)
            return sorted((f[0], f[2], tuple(f[8:])) for f in a.nodes()
                          if "handshake" not in f[2])
        before = view()
        rng = random.Random(42)
        ping = wire.encode(wire.Message(
            type=wire.PING, sender=b"f" * 40, port=1, cport=2, flags=1,
            gossip=[wire.Gossip(name=b"e" * 40, ping_sent=0, pong_received=0,
                                ip="127.0.0.1", port=3, cport=4, flags=1, pport=0)],
            myslots=wire.bitmap_of(range(0, 16384, 7))))
        deadline = time.monotonic() + 60
        for i in range(300):
            assert time.monotonic() < deadline
            kind = i % 3
            if kind == 0:
                data = rng.randbytes(rng.randrange(1, 5000))
            elif kind == 1:
                data = ping[:rng.randrange(1, len(ping))]
            else:
                buf = bytearray(ping)
                for _ in range(rng.randrange(1, 8)):
                    buf[rng.randrange(len(buf))] = rng.randrange(256)
                data = bytes(buf)
            with socket.create_connection(("127.0.0.1", a.cport), timeout=5) as s:
                try:
                    s.sendall(data)
                except OSError:
                    pass
            if i % 50 == 49:
                assert a.cmd("PING") is True
        assert a.alive() and a.cmd("PING") is True
        assert view() == before
        assert "Traceback" not in a.proc.log()
        wait_for(lambda: agreed(nodes), 30, what="the pair to still agree")


def test_a_client_blocked_on_a_slot_that_moves_away_is_redirected() -> None:
    """clusterRedirectBlockedClientIfNeeded: BLPOP on a key whose slot its node then hands to
    another master gets -MOVED to the new owner (and the cluster being down, -CLUSTERDOWN)."""
    with cluster(["pyrepl", "pyrepl", "pyrepl"], node_timeout=NODE_TIMEOUT) as nodes:
        build(nodes)
        wait_for(lambda: agreed(nodes), 60, what="the cluster to agree")
        a, b, _ = nodes
        key = next(f"q{i}" for i in range(10_000)
                   if int(a.cmd("CLUSTER", "KEYSLOT", f"q{i}")) < 16384 // 3)
        slot = int(a.cmd("CLUSTER", "KEYSLOT", key))
        replies: list[object] = []

        def blocked() -> None:
            with a.client(timeout=30) as c:
                try:
                    replies.append(c.blpop([key], timeout=20))
                except redis.RedisError as e:
                    replies.append(e)
        t = threading.Thread(target=blocked)
        t.start()
        wait_for(lambda: int(a.cmd("INFO", "clients")["blocked_clients"]) == 1, 10)
        t0 = time.monotonic()
        assert a.cmd("CLUSTER", "SETSLOT", slot, "NODE", b.myid()) == "OK"
        t.join(15)
        assert not t.is_alive()
        assert isinstance(replies[0], redis.exceptions.MovedError), replies
        assert (replies[0].slot_id, replies[0].port) == (slot, b.port)
        assert time.monotonic() - t0 < 2


def test_scripts_in_cluster_mode_answer_as_redis_nodes_do() -> None:
    """scriptVerifyClusterState and the no-cluster flag, on a pyrepl and a redis-server node
    of one cluster, each running the same scripts on keys of its own slots and of the
    other's: the same replies and the same error texts."""
    with cluster(["pyrepl", "redis"], node_timeout=NODE_TIMEOUT) as nodes:
        build(nodes)
        wait_for(lambda: agreed(nodes), 60, what="the pair to agree")

        def keys_of(n: Node, count: int, tag: bool) -> list[str]:
            """``count`` keys served by ``n``: of one slot ({tag}), or of several."""
            out: list[str] = []
            i = 0
            while len(out) < count:
                k = f"{{t{i}}}" if tag else f"k{i}"
                i += 1
                owned = n.cmd("CLUSTER", "KEYSLOT", k)
                mine = n.owners()[n.myid()]
                if any(a <= int(owned) <= b for a, b in mine):
                    out.append(k if not tag else k + "a")
                    if tag:
                        out.append(k + "b")
            return out[:count]

        def run(n: Node, script: str, keys: list[str]) -> object:
            with n.client() as c:
                try:
                    return c.eval(script, len(keys), *keys)
                except redis.ResponseError as e:     # (without the script's sha and line)
                    return f"ERR: {e}".split(" script: ")[0]

        answers = []
        for n in nodes:
            other = nodes[1] if n is nodes[0] else nodes[0]
            local = keys_of(n, 2, tag=False)           # two keys of two of n's slots
            remote = keys_of(other, 1, tag=False)
            n.cmd("SET", local[0], "v0")
            n.cmd("SET", local[1], "v1")
            answers.append([
                # no shebang: local keys of any slots
                run(n, "return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}",
                    local),                 # (declared keys of two slots: CROSSSLOT)
                run(n, f"return redis.call('get', '{local[0]}')", []),
                run(n, f"return redis.call('get', '{remote[0]}')", []),
                # a shebang: one slot only, unless allowed
                run(n, f"#!lua\nreturn {{redis.call('get', '{local[0]}'), "
                       f"redis.call('get', '{local[1]}')}}", []),
                run(n, f"#!lua flags=allow-cross-slot-keys\nreturn {{redis.call('get', "
                       f"'{local[0]}'), redis.call('get', '{local[1]}')}}", []),
                run(n, "#!lua flags=no-cluster\nreturn 1", []),
            ])
        py, rd = answers
        assert py == rd, (py, rd)
        assert py[0] == "ERR: Keys in request don't hash to the same slot"
        assert py[1] == "v0"
        assert py[2] == "ERR: Script attempted to access a non local key in a cluster node"
        assert py[3] == "ERR: Script attempted to access keys that do not hash to the same slot"
        assert py[4] == ["v0", "v1"]
        assert py[5] == "ERR: Can not run script on cluster, 'no-cluster' flag is set."
