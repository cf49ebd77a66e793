"""The cluster state on a real ServerCore (pyrepl/core/cluster.py): what CONFIG SET of a
cluster-* directive does to it, as Redis's apply functions do."""

from __future__ import annotations

from pathlib import Path

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
