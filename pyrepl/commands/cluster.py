"""The cluster commands of a server with cluster support disabled (Redis 7.0.15's standalone
answers): CLUSTER and each of its subcommands, READONLY, READWRITE and ASKING are known
commands (COMMAND lists them, ACL rules can name them, arity and unknown subcommands are
checked first) that answer ``ERR This instance has cluster support disabled``, as
clusterCommand, readonlyCommand, readwriteCommand and askingCommand do while
``server.cluster_enabled`` is 0. pyrepl has no cluster mode (``cluster-enabled yes`` is refused
at startup)."""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command, container
from pyrepl.resp.types import ReplyError

DISABLED = "ERR This instance has cluster support disabled"


def cluster_disabled(c: Any, argv: list[bytes]) -> object:
    raise ReplyError(DISABLED)


container("cluster", group="cluster", summary="A container for cluster commands",
          since="3.0.0")

# (name, arity, flags, since, summary) as Redis 7.0.15's commands/*.json declare them
_CLUSTER = (
    ("addslots", -3, "no-async-loading admin stale", "3.0.0",
     "Assign new hash slots to receiving node"),
    ("addslotsrange", -4, "no-async-loading admin stale", "7.0.0",
     "Assign new hash slots to receiving node"),
    ("bumpepoch", 2, "no-async-loading admin stale", "3.0.0",
     "Advance the cluster config epoch"),
    ("count-failure-reports", 3, "admin stale", "3.0.0",
     "Return the number of failure reports active for a given node"),
    ("countkeysinslot", 3, "stale", "3.0.0",
     "Return the number of local keys in the specified hash slot"),
    ("delslots", -3, "no-async-loading admin stale", "3.0.0",
     "Set hash slots as unbound in receiving node"),
    ("delslotsrange", -4, "no-async-loading admin stale", "7.0.0",
     "Set hash slots as unbound in receiving node"),
    ("failover", -2, "no-async-loading admin stale", "3.0.0",
     "Forces a replica to perform a manual failover of its master."),
    ("flushslots", 2, "no-async-loading admin stale", "3.0.0",
     "Delete a node's own slots information"),
    ("forget", 3, "no-async-loading admin stale", "3.0.0", "Remove a node from the nodes table"),
    ("getkeysinslot", 4, "stale", "3.0.0", "Return local key names in the specified hash slot"),
    ("help", 2, "loading stale", "5.0.0", "Show helpful text about the different subcommands"),
    ("info", 2, "stale", "3.0.0", "Provides info about Redis Cluster node state"),
    ("keyslot", 3, "stale", "3.0.0", "Returns the hash slot of the specified key"),
    ("links", 2, "stale", "7.0.0",
     "Returns a list of all TCP links to and from peer nodes in cluster"),
    ("meet", -4, "no-async-loading admin stale", "3.0.0",
     "Force a node cluster to handshake with another node"),
    ("myid", 2, "stale", "3.0.0", "Return the node id"),
    ("nodes", 2, "stale", "3.0.0", "Get Cluster config for the node"),
    ("replicas", 3, "admin stale", "5.0.0", "List replica nodes of the specified master node"),
    ("replicate", 3, "no-async-loading admin stale", "3.0.0",
     "Reconfigure a node as a replica of the specified master node"),
    ("reset", -2, "admin stale noscript", "3.0.0", "Reset a Redis Cluster node"),
    ("saveconfig", 2, "no-async-loading admin stale", "3.0.0",
     "Forces the node to save cluster state on disk"),
    ("set-config-epoch", 3, "no-async-loading admin stale", "3.0.0",
     "Set the configuration epoch in a new node"),
    ("setslot", -4, "no-async-loading admin stale", "3.0.0", "Bind a hash slot to a specific node"),
    ("shards", 2, "stale", "7.0.0", "Get array of cluster slots to node mappings"),
    ("slaves", 3, "admin stale", "3.0.0", "List replica nodes of the specified master node"),
    ("slots", 2, "stale", "3.0.0", "Get array of Cluster slot to node mappings"),
)
for _name, _arity, _flags, _since, _summary in _CLUSTER:
    command("cluster|" + _name, _arity, _flags, group="cluster", since=_since,
            summary=_summary)(cluster_disabled)

command("readonly", 1, "fast loading stale", group="cluster", acl="connection", since="3.0.0",
        summary="Enables read queries for a connection to a cluster replica node")(
    cluster_disabled)
command("readwrite", 1, "fast loading stale", group="cluster", acl="connection", since="3.0.0",
        summary="Disables read queries for a connection to a cluster replica node")(
    cluster_disabled)
command("asking", 1, "fast", group="cluster", acl="connection", since="3.0.0",
        summary="Sent by cluster clients after an -ASK redirect")(cluster_disabled)
