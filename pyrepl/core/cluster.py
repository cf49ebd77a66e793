"""The server in cluster mode: its cluster state, what that state asks of the server, and the
redirect step of the dispatch — the core's side of pyrepl/cluster.

Theory of operation: with ``cluster-enabled yes`` the core owns a
:class:`~pyrepl.cluster.state.ClusterState` (``core.cluster``), loaded from (or created with)
``cluster-config-file`` at start; the I/O shell (pyrepl/net/cluster_io.py) runs its bus, its
cron and its before-sleep. :class:`CoreClusterHost` is the state's port onto the server: the
replication offset, the replica link's age, db 0's keys per slot, REPLICAOF's two moves,
pub/sub, the manual failover's write pause and the file. :func:`redirect` is processCommand's
cluster step: a command with keys (or an EXEC with queued ones) from a client that is not our
master either runs here or gets Redis's redirect error.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import TYPE_CHECKING, Any

from pyrepl.cluster import redirect as routing
from pyrepl.cluster.nodes_conf import NodesConfError, load
from pyrepl.cluster.ports import ClusterSettings
from pyrepl.cluster.state import ClusterState
from pyrepl.config_rewrite import write_atomically
from pyrepl.core.client import CLUSTER_ASKING as ASKING
from pyrepl.core.client import CLUSTER_READONLY as READONLY
from pyrepl.resp.types import ReplyError

if TYPE_CHECKING:
    from pyrepl.commands.table import Command
    from pyrepl.core.client import Client
    from pyrepl.core.server import ServerCore


_PUBSUBSHARD = frozenset(("ssubscribe", "sunsubscribe", "spublish"))
PORT_INCR = 10000


def settings(cfg: Any) -> ClusterSettings:
    """The cluster-* directives (and what the node announces) as the state reads them
    (deriveAnnouncedPorts: cluster-announce-*-port over the listening ports)."""
    tls = bool(cfg.tls_cluster)
    port = cfg.tls_port if tls else cfg.port
    pport = cfg.port if tls else 0
    if tls and cfg.cluster_announce_tls_port:
        port = cfg.cluster_announce_tls_port
    elif not tls and cfg.cluster_announce_port:
        port = cfg.cluster_announce_port
    if tls and cfg.cluster_announce_port:
        pport = cfg.cluster_announce_port
    cport = cfg.cluster_port or (cfg.tls_port if tls else cfg.port) + PORT_INCR
    if cfg.cluster_announce_bus_port:
        cport = cfg.cluster_announce_bus_port
    return ClusterSettings(
        node_timeout=cfg.cluster_node_timeout,
        require_full_coverage=bool(cfg.cluster_require_full_coverage),
        replica_validity_factor=cfg.cluster_replica_validity_factor,
        migration_barrier=cfg.cluster_migration_barrier,
        allow_replica_migration=bool(cfg.cluster_allow_replica_migration),
        replica_no_failover=bool(cfg.cluster_replica_no_failover),
        allow_reads_when_down=bool(cfg.cluster_allow_reads_when_down),
        allow_pubsubshard_when_down=bool(cfg.cluster_allow_pubsubshard_when_down),
        link_sendbuf_limit=cfg.cluster_link_sendbuf_limit,
        announce_ip=cfg.cluster_announce_ip,
        announce_hostname=cfg.cluster_announce_hostname,
        preferred_endpoint_type=cfg.cluster_preferred_endpoint_type,
        port=port, pport=pport, cport=cport, replica_priority=cfg.replica_priority,
        repl_ping_replica_period=cfg.repl_ping_replica_period)


# the directives besides cluster-* that settings() reads
_SETTINGS_DIRECTIVES = frozenset(("port", "tls-port", "tls-cluster", "replica-priority",
                                  "repl-ping-replica-period"))


def config_changed(core: ServerCore, name: str) -> None:
    """A CONFIG SET of a directive the cluster state reads: the state gets new settings,
    and myself's announced ports, hostname and flags follow at once, as Redis's apply
    functions do (updateClusterAnnouncedPort, clusterUpdateMyselfHostname, ...)."""
    st = core.cluster
    if st is None or not (name.startswith("cluster-") or name in _SETTINGS_DIRECTIVES):
        return
    st.cfg = settings(core.config)
    st.sync_ports()


def bus_port(cfg: Any) -> int:
    """The port the bus listens on (cluster-port, else the client port + 10000)."""
    return cfg.cluster_port or (cfg.tls_port if cfg.tls_cluster else cfg.port) + PORT_INCR


class CoreClusterHost:
    """The ``ClusterHost`` port, served by the core."""

    def __init__(self, core: ServerCore) -> None:
        self.core = core

    def log(self, level: str, message: str) -> None:
        getattr(self.core.log, level)(message)

    def event(self, name: str, **fields: Any) -> None:
        repl = self.core.replication
        if repl is not None:
            repl.events.emit(self.core.now_ms, name, fields.pop("role"), **fields)

    def repl_offset(self) -> int:
        """master_repl_offset on a master, replicationGetSlaveOffset on a replica."""
        repl = self.core.replication
        if repl is None:
            return 0
        side = repl.replica
        if side.master_host is None:
            return repl.master_repl_offset
        if self.core.loading or side.state.name == "TRANSFER":
            # a full sync under way: Redis drops the cached master at +FULLRESYNC and has no
            # master client until the load is done, so its offset is 0 and its master hides
            # it from CLUSTER SLOTS (isReplicaAvailable; cluster/22-replica-in-sync)
            return 0
        ref = side.stream.master or side.stream.cached
        return max(0, ref.reploff) if ref is not None else 0

    def replica_data_age_ms(self) -> int:
        repl = self.core.replication
        now = self.core.now_ms
        if repl is None:
            return 0
        side = repl.replica
        ms = side.stream.master
        if side.link_up() and ms is not None:
            return (now // 1000 - ms.client.last_interaction_ms // 1000) * 1000
        return (now // 1000 - side.down_since_ms // 1000) * 1000

    def following(self) -> bool:
        repl = self.core.replication
        return repl is not None and repl.replica.master_host is not None

    def count_keys_in_slot(self, slot: int) -> int:
        return self.core.dbs[0].count_keys_in_slot(slot)

    def del_keys_in_slot(self, slot: int) -> int:
        """delKeysInSlot, each deletion propagated (as Redis 7.2 does: a replica of this
        master must not keep keys of a slot its master lost)."""
        core = self.core
        db = core.dbs[0]
        keys = db.keys_in_slot(slot, db.count_keys_in_slot(slot))
        for key in keys:
            if db.delete(key):
                core.propagate_internal(0, [b"DEL", key])
        return len(keys)

    def set_master(self, ip: str, port: int) -> None:
        repl = self.core.replication
        if repl is not None:
            repl.replica.set_master(ip, port)

    def unset_master(self) -> None:
        repl = self.core.replication
        if repl is not None and repl.replica.master_host is not None:
            repl.replica.unset_master()
        else:      # (a replica from nodes.conf that never followed: a master now)
            self.core.expiry_deletes = True

    def empty_data(self) -> None:
        for db in self.core.dbs:
            db.flush()

    def pause_writes(self, until_ms: int) -> None:
        from pyrepl.core.pause import WRITE
        self.core.pause.start(WRITE, until_ms, "failover")
        self.core.refresh_gate()

    def unpause_writes(self) -> None:
        self.core.pause.stop("failover")
        self.core.refresh_gate()

    def publish(self, channel: bytes, message: bytes, sharded: bool) -> None:
        self.core.pubsub.publish(channel, message, sharded)

    def subscriptions(self, sharded: bool) -> int:
        ps = self.core.pubsub
        if sharded:
            return len(ps.shard_channels)
        return len(ps.channels) + len(ps.patterns)

    def remove_channels_in_slot(self, slot: int) -> None:
        self.core.pubsub.remove_shard_channels_in_slot(slot)

    def save_config(self, text: str, fsync: bool) -> bool:
        """clusterSaveConfigOrDie: a node that cannot keep its nodes.conf stops."""
        err = save_nodes_conf(self.core, text, fsync)
        if err:
            self.core.log.warning("Fatal: can't update cluster config file.")
            self.core.host.exit_now(1)
            return False
        return True


def use_pport(core: ServerCore, c: Any) -> bool:
    """Whether ``c`` is told the nodes' plaintext ports (``pport``): a client on the plain
    port of a tls-cluster node (Redis 7.0: "Report non-TLS ports to non-TLS client in TLS
    cluster if available")."""
    if not core.config.tls_cluster:
        return False
    t = getattr(c, "transport", None)
    return t is None or t.get_extra_info("ssl_object") is None


def config_path(core: ServerCore) -> str:
    return core.config.in_dir(core.config.cluster_config_file)


def save_nodes_conf(core: ServerCore, text: str, fsync: bool = True) -> str:
    """nodes.conf written atomically (a temporary file, then a rename), and made durable
    (fsync of the file and of its directory) only when ``fsync``: as Redis (7.2's
    clusterSaveConfig), which asks for it when an epoch, a vote, a role or a slot's owner
    changed, and not for a node's FAIL flag or a node learnt by gossip (a node of a 20-node
    cluster saves a few times a second then, and an fsync on a busy disk held the loop for
    seconds: the cluster flapped). "" or the error."""
    try:
        fd = write_atomically(config_path(core), text.encode(), fsync,
                              hold=core.cluster_conf_fd != -1)
    except OSError as e:
        return e.strerror or str(e)
    if fd != -1:      # the new file, flocked before it took the name: the old one goes
        os.close(core.cluster_conf_fd)
        core.cluster_conf_fd = fd
    return ""


def lock(core: ServerCore) -> None:
    """clusterLockConfig: nodes.conf opened (created when missing) and flocked for the
    process's life, so that a second node (pyrepl or Redis) started on the same file stops
    (NodesConfError, Redis's words). Each save then locks the new file before the rename
    (``save_nodes_conf``), so the name stays locked; a forked child closes its copy
    (``release_lock``)."""
    path = config_path(core)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise NodesConfError(f"Can't open {path} in order to acquire a lock: "
                             f"{e.strerror}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise NodesConfError(
                f"Sorry, the cluster configuration file {core.config.cluster_config_file} is "
                "already used by a different Redis Cluster node. Please make sure that "
                "different nodes use different cluster configuration files.") from e
        raise NodesConfError(f"Impossible to lock {path}: {e.strerror}") from e
    core.cluster_conf_fd = fd


def release_lock(core: ServerCore) -> None:
    """The lock's descriptor closed: in a forked child, its copy (a child that outlives a
    killed server must not keep the next one from starting); in the tests, a node's end."""
    if core.cluster_conf_fd != -1:
        os.close(core.cluster_conf_fd)
        core.cluster_conf_fd = -1


def start(core: ServerCore) -> ClusterState:
    """clusterInit: the state, from nodes.conf when there is one (a corrupt one stops the
    start: NodesConfError with Redis's words), else a new node saved at once."""
    lock(core)
    core.dbs[0].track_slots()     # (db 0's keys indexed by slot: slotToKeyInit)
    st = ClusterState(CoreClusterHost(core), settings(core.config), core.now_ms)
    path = config_path(core)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        text = ""
    if load(text, st, core.now_ms):
        st.sync_ports()
        st.served.rebuild()      # (myself is the loaded node now)
    else:
        core.log.notice(f"No cluster configuration found, I'm {st.myself.name}")
        st.save_config(True)
    core.cluster = st
    if st.myself.is_replica:
        # iAmMaster() is myself's role from nodes.conf: a replica does not expire keys
        # (not even before its master's address is known and it follows it), its master's
        # DELs do (cluster/14-consistency-check: a restarted replica's expired keys stay)
        core.expiry_deletes = False
    core.config.on_change(lambda name, _value: config_changed(core, name))
    core.refresh_gate()
    return st


def route_script_call(core: ServerCore, caller: Client, cmd: Command, argv: list[bytes],
                      allow_cross_slot: bool) -> str | None:
    """scriptVerifyClusterState's checks for a script's command (the error text, or None);
    the first key touched sets the caller's slot when its own command declared none."""
    st = core.cluster
    assert st is not None
    keys = _keys(cmd, argv) if cmd.first_key or cmd.keys_fn is not None else []
    code, node, slot = _route(core, caller, cmd, keys, cmd.write,
                              bool(caller.cluster_flags & ASKING))
    if code != routing.NONE or node is not st.myself:
        if code == routing.DOWN_RO_STATE:
            return "Script attempted to execute a write command while the cluster is down " \
                "and readonly"
        if code == routing.DOWN_STATE:
            return "Script attempted to execute a command while the cluster is down"
        return "Script attempted to access a non local key in a cluster node"
    if keys and not allow_cross_slot:
        if caller.cluster_slot == -1:
            caller.cluster_slot = slot
        elif caller.cluster_slot != slot:
            return "Script attempted to access keys that do not hash to the same slot"
    return None


def verify_config_with_data(core: ServerCore) -> None:
    """verifyClusterConfigWithData: a master's keys in a slot that is not its own make the
    slot its own (unassigned) or an importing one (someone else's)."""
    st = core.cluster
    assert st is not None
    if st.myself.is_replica:
        return
    db = core.dbs[0]
    update = False
    for j in range(len(st.slots)):
        if not db.count_keys_in_slot(j):
            continue
        if st.slots[j] is st.myself or j in st.importing:
            continue
        update = True
        owner = st.slots[j]
        if owner is None:
            core.log.warning(f"I have keys for unassigned slot {j}. Taking responsibility "
                             "for it.")
            st.add_slot(st.myself, j)
        else:
            core.log.warning(f"I have keys for slot {j}, but the slot is assigned to "
                             "another node. Setting it to importing state.")
            st.importing[j] = owner
    if update:
        st.save_config(True)


def redirect_blocked(core: ServerCore) -> None:
    """clusterRedirectBlockedClientIfNeeded, for every client blocked on keys (a list, a
    sorted set, a stream): the cluster down, or the key's slot served elsewhere (and not
    being imported here), unblocks it with the redirect it would get now."""
    from pyrepl.core.blocking import KeyWait
    from pyrepl.keyspace.hashslot import key_hash_slot

    st = core.cluster
    assert st is not None
    me = st.myself
    for c in list(core.blocking.clients):
        record = c.blocked
        if not isinstance(record, KeyWait) or not record.keys:
            continue
        if st.state != 0:
            err = routing.error_text(st, routing.DOWN_STATE, None, 0)
        else:
            slot = key_hash_slot(record.keys[0])
            node = st.slots[slot]
            cmd = c.last_cmd
            if c.cluster_flags & READONLY and cmd is not None and not cmd.write and \
                    me.is_replica and me.master is node:
                node = me
            if node is me or slot in st.importing:
                continue
            err = routing.error_text(st, routing.DOWN_UNBOUND, None, slot) if node is None \
                else routing.error_text(st, routing.MOVED, node, slot, use_pport(core, c))
        core.error_reply(c, err, None, rejected=False)
        core.unblock(c, ReplyError(err))


__all__ = ["ASKING", "READONLY", "NodesConfError", "bus_port", "redirect", "redirect_blocked",
           "route_script_call", "settings", "start", "verify_config_with_data"]


def _keys(cmd: Command, argv: list[bytes]) -> list[bytes]:
    return [argv[i] for i in cmd.key_positions(argv) if i < len(argv)]


def _route(core: ServerCore, c: Client, cmd: Command, keys: list[bytes], write: bool,
           asking: bool) -> tuple[int, Any, int]:
    """getNodeByQuery for ``keys`` on behalf of client ``c`` (its READONLY flag; db 0's
    keys, an expired one missing, as lookupKeyReadWithFlags(NOEXPIRE) sees them)."""
    st = core.cluster
    assert st is not None
    db0 = core.dbs[0]
    return routing.route(
        st, keys, write=write, asking=asking, readonly=bool(c.cluster_flags & READONLY),
        pubsubshard=cmd.name in _PUBSUBSHARD, migrate=cmd.name == "migrate",
        exists=lambda k: k in db0.data and not db0.is_expired(k))


_SCRIPT_CALLS = frozenset(("eval", "evalsha", "fcall"))


def _writes(core: ServerCore, cmd: Command, argv: list[bytes]) -> bool:
    """getCommandFlags' CMD_WRITE: the command's, or a script's or function's that declared
    its flags without no-writes (scriptFlagsToCmdFlags). Such a script sent to a replica by
    a READONLY client is MOVED to the master, as Redis does (cluster/16-transactions-on-
    replica), not run to fail on its first write."""
    return cmd.write or (cmd.name in _SCRIPT_CALLS and core.script_writes(argv))


def asking_ends(c: Client) -> None:
    """resetClient's end of ASKING for a command refused before the redirect step (unknown,
    wrong arity, NOAUTH): ASKING lasts one command, whatever became of it, but in MULTI."""
    if not c.in_multi:
        c.cluster_flags &= ~ASKING


def redirect(core: ServerCore, c: Client, cmd: Command, argv: list[bytes]) -> str | None:
    """processCommand's cluster step: None when the command runs here, else the error to
    answer with (the caller rejects the command; a refused EXEC discards the transaction)."""
    st = core.cluster
    assert st is not None
    asking = bool(c.cluster_flags & ASKING)
    if not c.in_multi and cmd.name != "asking":
        c.cluster_flags &= ~ASKING       # (resetClient: ASKING lasts one command)
    c.cluster_slot = -1                  # (c->slot: the slot of the command's keys, if any)
    if c.kind == "master" or c.must_obey():
        return None
    is_exec = cmd.name == "exec"
    if is_exec:
        if not c.in_multi:
            return None
        queued = c.multi_queue
        keys = [k for q, a in queued for k in _keys(q, a)]
        write = any(_writes(core, q, a) for q, a in queued)
    else:
        if cmd.first_key == 0 and cmd.keys_fn is None:
            return None
        keys = _keys(cmd, argv)
        write = _writes(core, cmd, argv)
    code, node, slot = _route(core, c, cmd, keys, write, asking or "asking" in cmd.flags)
    if code == routing.NONE:
        if keys:
            c.cluster_slot = slot
        return None
    if is_exec:
        c.discard_transaction()
    return routing.error_text(st, code, node, slot, use_pport(core, c))
