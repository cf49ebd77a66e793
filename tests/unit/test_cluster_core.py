"""The cluster state on a real ServerCore (pyrepl/core/cluster.py): what CONFIG SET of a
cluster-* directive does to it, as Redis's apply functions do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyrepl.core import cluster
from tests.support.cores import make_core, run


def test_config_set_of_cluster_directives_reaches_the_state_at_once(tmp_path: Path) -> None:
    """unit/cluster/announced-endpoints: CONFIG SET cluster-announce-port / -bus-port shows
    in myself's CLUSTER NODES line at once (updateClusterAnnouncedPort), 0 gives the listening
    ports back; cluster-node-timeout and the rest are read from then on (Redis's cluster tests
    set cluster-node-timeout 3000 on every node and count on it)."""
    core = make_core(("cluster-enabled", ["yes"]), ("dir", [str(tmp_path)]),
                     ("port", ["7000"]))
    st = cluster.start(core)
    c = core.connection_made()

    def myself_addr() -> str:
        nodes = run(c, "CLUSTER", "NODES").decode()
        return next(line for line in nodes.splitlines() if "myself" in line).split()[1]

    assert myself_addr() == ":7000@17000"
    assert run(c, "CONFIG", "SET", "cluster-announce-port", "7555") == b"+OK\r\n"
    assert myself_addr() == ":7555@17000"
    run(c, "CONFIG", "SET", "cluster-announce-bus-port", "27555")
    assert myself_addr() == ":7555@27555"
    run(c, "CONFIG", "SET", "cluster-announce-port", "0", "cluster-announce-bus-port", "0")
    assert myself_addr() == ":7000@17000"
    assert st.cfg.node_timeout == 15000
    run(c, "CONFIG", "SET", "cluster-node-timeout", "3000")
    assert st.cfg.node_timeout == 3000
    run(c, "CONFIG", "SET", "cluster-replica-validity-factor", "0")
    assert st.cfg.replica_validity_factor == 0


def test_nodes_conf_is_fsynced_only_when_the_state_asks(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """clusterSaveConfig(do_fsync): a save for a FAIL flag or a node learnt is written (a
    temporary file and a rename) with no fsync; an epoch's, a vote's or CLUSTER SAVECONFIG's
    is fsynced. (Every save fsynced the file and its directory: under a busy disk a 20-node
    cluster's nodes held their loops for seconds and failed each other.)"""
    core = make_core(("cluster-enabled", ["yes"]), ("dir", [str(tmp_path)]))
    st = cluster.start(core)
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    st.myself.config_epoch = 7
    st.save_config(False)
    assert synced == []
    assert "myself,master - 0 0 7 connected" in (tmp_path / "nodes.conf").read_text()
    st.save_config(True)
    assert len(synced) == 2                  # the file, then its directory
    c = core.connection_made()
    assert run(c, "CLUSTER", "SAVECONFIG") == b"+OK\r\n"
    assert len(synced) == 4


def test_a_client_postponed_by_a_pause_is_not_unblocked_when_the_master_turns_replica() -> None:
    """disconnectAllBlockedClients skips BLOCKED_POSTPONE: a write held by a manual
    failover's pause on the old master runs (or is redirected) when the pause ends, it does
    not get -UNBLOCKED (cluster/10-manual-failover wrote during CLUSTER FAILOVER and got
    'UNBLOCKED force unblock from blocking operation')."""
    core = make_core()
    admin, writer, popper = (core.connection_made() for _ in range(3))
    assert run(popper, "BLPOP", "list", "0") == b""               # blocked on a key
    assert run(admin, "CLIENT", "PAUSE", "10000", "WRITE") == b"+OK\r\n"
    assert run(writer, "SET", "k", "v") == b""                    # postponed
    core.blocking.disconnect_all()
    assert popper.data_to_send().startswith(b"-UNBLOCKED force unblock")
    assert writer.data_to_send() == b"" and not writer.close_after_reply
    assert run(admin, "CLIENT", "UNPAUSE") == b"+OK\r\n"
    assert writer.data_to_send() == b"+OK\r\n"


def test_a_script_that_may_write_is_moved_from_a_replica_to_its_master(tmp_path: Path) -> None:
    """getCommandFlags: an EVAL whose shebang has no no-writes flag is a write command
    (scriptFlagsToCmdFlags), so a READONLY client of a replica is MOVED to the master, as
    Redis does (cluster/16-transactions-on-replica); it ran on the replica and failed with
    READONLY. A no-writes script, or one without a shebang, reads there as before."""
    from pyrepl.cluster.node import MASTER, MYSELF, SLAVE, ClusterNode
    from pyrepl.cluster.state import OK

    core = make_core(("cluster-enabled", ["yes"]), ("dir", [str(tmp_path)]))
    st = cluster.start(core)
    master = ClusterNode("b" * 40, MASTER, 1)
    master.ip, master.port = "127.0.0.2", 7001
    st.add_node(master)
    for j in range(16384):
        st.add_slot(master, j)
    me = st.myself
    me.flags = MYSELF | SLAVE
    me.master = master
    master.add_replica(me)
    st.state = OK
    c = core.connection_made()
    assert run(c, "READONLY") == b"+OK\r\n"
    moved = b"-MOVED 15495 127.0.0.2:7001\r\n"                 # (the slot of "a")
    assert run(c, "EVAL", "#!lua\nreturn redis.call('del','a')", "1", "a") == moved
    assert run(c, "EVAL", "#!lua flags=no-writes\nreturn redis.call('get','a')", "1",
               "a") == b"$-1\r\n"
    assert run(c, "EVAL", "return redis.call('get','a')", "1", "a") == b"$-1\r\n"
    assert run(c, "GET", "a") == b"$-1\r\n"
    assert run(c, "DEL", "a") == moved


def test_a_replica_in_a_full_sync_reports_offset_0() -> None:
    """replicationGetSlaveOffset during a full sync: Redis drops the cached master at
    +FULLRESYNC and has no master client until the load is done, so the offset its PINGs
    carry is 0 and its master hides it from CLUSTER SLOTS (cluster/22-replica-in-sync,
    'Replica in loading state is hidden'); the cached master's offset was reported."""
    from types import SimpleNamespace

    from pyrepl.replication.replica.states import ReplState

    core = make_core()
    host = cluster.CoreClusterHost(core)
    side = SimpleNamespace(master_host="127.0.0.1", state=ReplState.CONNECT,
                           stream=SimpleNamespace(master=None,
                                                  cached=SimpleNamespace(reploff=1234)))
    core.replication = SimpleNamespace(replica=side, master_repl_offset=99)  # type: ignore[assignment]
    assert host.repl_offset() == 1234              # (link down: the cached master's)
    side.state = ReplState.TRANSFER
    assert host.repl_offset() == 0
    side.state = ReplState.CONNECTED
    core.loading = True
    assert host.repl_offset() == 0


def test_a_cluster_replica_keeps_expired_keys_when_it_loads(tmp_path: Path) -> None:
    """iAmMaster() in cluster mode is myself's role from nodes.conf: a node that restarts as
    a replica keeps keys that expired while it was down, until its master's DELs come
    (cluster/14-consistency-check, 'Slave expired keys is loaded when restarted'); a master
    drops them. pyrepl looked only at replicaof, which a cluster node never has."""
    from pyrepl.cluster.node import MASTER, MYSELF, SLAVE, ClusterNode

    t0 = 1_700_000_000_000
    core = make_core(("dir", [str(tmp_path)]), now=t0)
    c = core.connection_made()
    assert run(c, "SET", "k", "v", "PX", "1000") == b"+OK\r\n"
    assert core.persistence.save()
    for role in ("replica", "master"):
        later = make_core(("cluster-enabled", ["yes"]), ("dir", [str(tmp_path)]),
                          now=t0 + 60_000)
        st = cluster.start(later)
        if role == "replica":
            master = ClusterNode("b" * 40, MASTER, 1)
            st.add_node(master)
            st.myself.flags = MYSELF | SLAVE
            st.myself.master = master
        later.expiry_deletes = not st.myself.is_replica     # (what start saw in nodes.conf)
        for _ in later.persistence.load_steps():
            pass
        assert later.dbs[0].count_keys_in_slot(7629) == (1 if role == "replica" else 0)
        os.remove(tmp_path / "nodes.conf")


def test_a_replica_from_nodes_conf_does_not_expire_keys_until_it_is_a_master(
        tmp_path: Path) -> None:
    """iAmMaster() gates activeExpireCycle: a node that nodes.conf makes a replica keeps its
    expired keys through the cron from its start, before it follows its master (whose DELs
    remove them; cluster/14-consistency-check found the cron deleting them in the ~100 ms
    before the first cluster cron set the master); made a master (a failover, CLUSTER
    RESET), it expires them."""
    t0 = 1_700_000_000_000
    core = make_core(("dir", [str(tmp_path)]), now=t0)
    c = core.connection_made()
    assert run(c, "SET", "k", "v", "PX", "1000") == b"+OK\r\n"
    node_id = "a" * 40
    (tmp_path / "nodes.conf").write_text(
        f"{node_id} 127.0.0.1:7001@17001 myself,slave {'b' * 40} 0 0 1 connected\n"
        f"{'b' * 40} 127.0.0.1:7000@17000 master - 0 0 1 connected 0-16383\n"
        "vars currentEpoch 1 lastVoteEpoch 0\n")
    assert core.persistence.save()
    later = make_core(("cluster-enabled", ["yes"]), ("dir", [str(tmp_path)]),
                      now=t0 + 60_000)
    st = cluster.start(later)
    assert st.myself.name == node_id and st.myself.is_replica
    for _ in later.persistence.load_steps():
        pass
    for _ in range(20):
        later.cron.run(later.now_ms)
    assert later.dbs[0].count_keys_in_slot(7629) == 1
    cluster.CoreClusterHost(later).unset_master()      # (made a master)
    for _ in range(20):
        later.cron.run(later.now_ms)
    assert later.dbs[0].count_keys_in_slot(7629) == 0
