"""What the cluster state reads and asks of the server around it (one typed port), and its
settings — shared.

The cluster state never touches the keyspace, replication or pub/sub directly: it asks
through :class:`ClusterHost`, which the server core implements and the tests fake
(``tests/support/fakes.py``'s ``FakeClusterHost``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class ClusterSettings:
    """The cluster-* directives the state reads (config.py holds their names and defaults);
    the server hands a new one over on CONFIG SET."""

    node_timeout: int = 15000
    require_full_coverage: bool = True
    replica_validity_factor: int = 10
    migration_barrier: int = 1
    allow_replica_migration: bool = True
    replica_no_failover: bool = False
    allow_reads_when_down: bool = False
    allow_pubsubshard_when_down: bool = True
    link_sendbuf_limit: int = 0
    announce_ip: str = ""
    announce_hostname: str = ""
    preferred_endpoint_type: str = "ip"
    port: int = 6379             # the announced client port
    pport: int = 0               # the plaintext port when the client port is TLS
    cport: int = 16379           # the announced bus port
    replica_priority: int = 100
    repl_ping_replica_period: int = 10   # seconds


class ClusterHost(Protocol):
    """The server as the cluster state sees it."""

    def log(self, level: str, message: str) -> None:
        """``level``: debug, verbose, notice or warning (Redis's)."""

    def event(self, name: str, **fields: Any) -> None:
        """A ``cluster_*`` sync event (pyrepl.events) of this node's."""

    def repl_offset(self) -> int:
        """A master's master_repl_offset, a replica's processed offset."""

    def replica_data_age_ms(self) -> int:
        """A replica's data age: ms since the last interaction with its master while the
        link is up, since the link went down otherwise (whether it may fail over)."""

    def following(self) -> bool:
        """Whether the server follows a master (server.masterhost is set)."""

    def count_keys_in_slot(self, slot: int) -> int: ...

    def del_keys_in_slot(self, slot: int) -> int:
        """Every key of ``slot`` deleted (propagated as DELs); how many."""

    def set_master(self, ip: str, port: int) -> None:
        """Follow the master at ``ip:port`` (replicationSetMaster)."""

    def unset_master(self) -> None:
        """Stop following: this node is a master now (replicationUnsetMaster)."""

    def empty_data(self) -> None:
        """Every key of every database gone (a CLUSTER RESET of a replica)."""

    def pause_writes(self, until_ms: int) -> None:
        """Writes paused until ``until_ms`` (a manual failover's master)."""

    def unpause_writes(self) -> None: ...

    def publish(self, channel: bytes, message: bytes, sharded: bool) -> None:
        """Deliver to this node's subscribers (a message another node sent)."""

    def subscriptions(self, sharded: bool) -> int:
        """How many (shard) channel subscriptions this node has."""

    def remove_channels_in_slot(self, slot: int) -> None:
        """The shard channels of ``slot`` unsubscribed (the slot left this shard)."""

    def save_config(self, text: str, fsync: bool) -> bool:
        """``nodes.conf`` written whole (atomically); False when it could not be."""
