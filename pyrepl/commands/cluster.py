"""CLUSTER and its subcommands, READONLY, READWRITE and ASKING (Redis 7.0.15's
clusterCommand, readonlyCommand, readwriteCommand, askingCommand).

Theory of operation: with ``cluster-enabled no`` every one of them answers ``ERR This instance
has cluster support disabled`` (they stay known commands: COMMAND lists them, ACL rules name
them, arity and unknown subcommands are checked first). With it on, each checks its arguments
exactly as Redis does, in Redis's order and words, and acts on the node's cluster state
(``core.cluster``, pyrepl/cluster/state.py); the keys of a slot come from the keyspace's
per-slot index (``Database.count_keys_in_slot`` / ``keys_in_slot``).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pyrepl.cluster import failover, wire
from pyrepl.cluster.node import describe
from pyrepl.cluster.nodes_conf import describe_all, slot_runs
from pyrepl.cluster.state import (
    BROADCAST_ALL,
    TODO_FSYNC_CONFIG,
    TODO_SAVE_CONFIG,
    TODO_UPDATE_STATE,
)
from pyrepl.commands.table import command, container
from pyrepl.commands.util import help_reply, subcommand_error
from pyrepl.core.cluster import ASKING, READONLY, use_pport
from pyrepl.errors import SYNTAX
from pyrepl.intparse import parse_int
from pyrepl.keyspace.hashslot import key_hash_slot
from pyrepl.resp.types import OK, Map, ReplyError, Status, Verbatim

DISABLED = "ERR This instance has cluster support disabled"
SLOTS = wire.CLUSTER_SLOTS
PORT_INCR = 10000


def cluster_disabled(c: Any, argv: list[bytes]) -> object:
    raise ReplyError(DISABLED)


def _state(c: Any) -> Any:
    st = c.core.cluster
    if st is None:
        raise ReplyError(DISABLED)
    return st


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _node(st: Any, name: bytes, unknown: str = "Unknown node") -> Any:
    n = st.lookup(name)
    if n is None:
        raise ReplyError(f"ERR {unknown} {_text(name)}")
    return n


def _slot(b: bytes) -> int:
    """getSlotOrReply."""
    try:
        v = parse_int(b)
    except ReplyError:
        v = -1
    if not 0 <= v < SLOTS:
        raise ReplyError("ERR Invalid or out of range slot")
    return v


def _db0_size(c: Any) -> int:
    return len(c.core.dbs[0])


HELP = (
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current "
    "node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes "
    "of a link",
)


# -- the handlers (cluster enabled) -----------------------------------------------------------

def c_help(c: Any, argv: list[bytes]) -> object:
    _state(c)
    return help_reply("CLUSTER", HELP)


def c_meet(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    if len(argv) not in (4, 5):
        raise subcommand_error(argv)
    try:
        port = parse_int(argv[3])
    except ReplyError:
        raise ReplyError(f"ERR Invalid TCP base port specified: {_text(argv[3])}") from None
    if len(argv) == 5:
        try:
            cport = parse_int(argv[4])
        except ReplyError:
            raise ReplyError(f"ERR Invalid TCP bus port specified: {_text(argv[4])}") \
                from None
    else:
        cport = port + PORT_INCR
    try:
        ip = str(ipaddress.ip_address(_text(argv[2])))
    except ValueError:
        ip = ""
    err = "EINVAL" if not ip else st.start_handshake(ip, port, cport)
    if err == "EINVAL":
        raise ReplyError(f"ERR Invalid node address specified: {_text(argv[2])}:"
                         f"{_text(argv[3])}")
    return OK


def c_nodes(c: Any, argv: list[bytes]) -> object:
    return Verbatim(describe_all(_state(c), use_pport=use_pport(c.core, c)).encode())


def c_myid(c: Any, argv: list[bytes]) -> object:
    return _state(c).myself.name.encode()


def _endpoint_reply(st: Any, node: Any, pport: bool = False) -> list[object]:
    """addNodeToNodeReply (``pport``: a plain client of a tls-cluster node, told the
    plaintext ports)."""
    kind = st.cfg.preferred_endpoint_type
    if kind == "ip":
        first: object = node.ip.encode()
    elif kind == "hostname":
        first = node.hostname.encode() if node.hostname else b"?"
    else:
        first = None
    extra: list[tuple[object, object]] = []
    if kind != "ip":
        extra.append((b"ip", node.ip.encode()))
    if kind != "hostname" and node.hostname:
        extra.append((b"hostname", node.hostname.encode()))
    return [first, node.pport if pport and node.pport else node.port, node.name.encode(),
            Map(extra)]


def _replica_available(st: Any, node: Any) -> bool:
    if node.failed:
        return False
    off = st.host.repl_offset() if node is st.myself else node.repl_offset
    return off != 0


def c_slots(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    out: list[object] = []
    runs = sorted((a, b, name) for name, rs in slot_runs(st).items() for a, b in rs)
    pport = use_pport(c.core, c)
    for a, b, name in runs:
        n = st.nodes[name]
        entry: list[object] = [a, b, _endpoint_reply(st, n, pport)]
        entry.extend(_endpoint_reply(st, r, pport) for r in n.replicas
                     if _replica_available(st, r))
        out.append(entry)
    return out


def _shard_node(st: Any, node: Any, tls: bool) -> Map:
    """addNodeDetailsToShardReply."""
    items: list[tuple[object, object]] = [(b"id", node.name.encode())]
    # (tls-cluster: the port is the TLS one, pport the plaintext one)
    plain, tls_port = (node.pport, node.port) if tls else (node.port, 0)
    if plain:
        items.append((b"port", plain))
    if tls_port:
        items.append((b"tls-port", tls_port))
    items.append((b"ip", node.ip.encode()))
    kind = st.cfg.preferred_endpoint_type
    endpoint = node.ip if kind == "ip" else (node.hostname or "?") if kind == "hostname" else ""
    items.append((b"endpoint", endpoint.encode()))
    if node.hostname:
        items.append((b"hostname", node.hostname.encode()))
    if node is st.myself:
        offset = st.host.repl_offset()
    else:
        offset = node.repl_offset
    items.append((b"role", b"replica" if node.is_replica else b"master"))
    items.append((b"replication-offset", offset))
    health = b"fail" if node.failed else b"loading" if node.is_replica and offset == 0 \
        else b"online"
    items.append((b"health", health))
    return Map(items)


def c_shards(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    runs = slot_runs(st)
    out = []
    for n in st.nodes.values():
        if not n.is_master:
            continue
        flat: list[object] = [x for a, b in runs.get(n.name, []) for x in (a, b)]
        nodes = [_shard_node(st, x, c.core.config.tls_cluster) for x in [n, *n.replicas]]
        out.append(Map([(b"slots", flat), (b"nodes", nodes)]))
    return out


def c_flushslots(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    if _db0_size(c) != 0:
        raise ReplyError("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.")
    st.del_node_slots(st.myself)
    st.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)
    return OK


def _check_assign(st: Any, chosen: bytearray, delete: bool, a: int, b: int) -> None:
    """checkSlotAssignmentsOrReply."""
    for slot in range(a, b + 1):
        if delete and st.slots[slot] is None:
            raise ReplyError(f"ERR Slot {slot} is already unassigned")
        if not delete and st.slots[slot] is not None:
            raise ReplyError(f"ERR Slot {slot} is already busy")
        chosen[slot] += 1
        if chosen[slot] == 2:
            raise ReplyError(f"ERR Slot {slot} specified multiple times")


def _update_slots(st: Any, chosen: bytearray, delete: bool) -> None:
    """clusterUpdateSlots."""
    for j in range(SLOTS):
        if chosen[j]:
            st.importing.pop(j, None)
            if delete:
                st.del_slot(j)
            else:
                st.add_slot(st.myself, j)
    st.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)


def c_addslots(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    delete = argv[1].lower() == b"delslots"
    slots = [_slot(a) for a in argv[2:]]
    chosen = bytearray(SLOTS)
    for s in slots:
        _check_assign(st, chosen, delete, s, s)
    _update_slots(st, chosen, delete)
    return OK


def c_addslotsrange(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    if len(argv) % 2 == 1:
        raise ReplyError(f"ERR wrong number of arguments for 'cluster|"
                         f"{_text(argv[1]).lower()}' command")
    delete = argv[1].lower() == b"delslotsrange"
    chosen = bytearray(SLOTS)
    for i in range(2, len(argv), 2):
        a, b = _slot(argv[i]), _slot(argv[i + 1])
        if a > b:
            raise ReplyError(f"ERR start slot number {a} is greater than end slot number {b}")
        _check_assign(st, chosen, delete, a, b)
    _update_slots(st, chosen, delete)
    return OK


def c_setslot(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    me = st.myself
    if me.is_replica:
        raise ReplyError("ERR Please use SETSLOT only with masters.")
    slot = _slot(argv[2])
    action = argv[3].lower()
    db = c.core.dbs[0]
    if action == b"migrating" and len(argv) == 5:
        if st.slots[slot] is not me:
            raise ReplyError(f"ERR I'm not the owner of hash slot {slot}")
        n = _node(st, argv[4], "I don't know about node")
        if n.is_replica:
            raise ReplyError("ERR Target node is not a master")
        st.migrating[slot] = n
    elif action == b"importing" and len(argv) == 5:
        if st.slots[slot] is me:
            raise ReplyError(f"ERR I'm already the owner of hash slot {slot}")
        n = _node(st, argv[4], "I don't know about node")
        if n.is_replica:
            raise ReplyError("ERR Target node is not a master")
        st.importing[slot] = n
    elif action == b"stable" and len(argv) == 4:
        st.importing.pop(slot, None)
        st.migrating.pop(slot, None)
    elif action == b"node" and len(argv) == 5:
        n = _node(st, argv[4])
        if n.is_replica:
            raise ReplyError("ERR Target node is not a master")
        if st.slots[slot] is me and n is not me and db.count_keys_in_slot(slot) != 0:
            raise ReplyError(f"ERR Can't assign hashslot {slot} to a different node while I "
                             "still hold keys for this hash slot.")
        if db.count_keys_in_slot(slot) == 0 and slot in st.migrating:
            del st.migrating[slot]
        was_mine = st.slots[slot] is me
        st.del_slot(slot)
        st.add_slot(n, slot)
        if was_mine and n is not me and me.numslots == 0 and \
                st.cfg.allow_replica_migration:
            st.log("warning", "Configuration change detected. Reconfiguring myself as a "
                   f"replica of {n.name}")
            st.set_master(n)
            st.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG)
        if n is me and slot in st.importing:
            if st.bump_epoch_without_consensus():
                st.log("warning", f"configEpoch updated after importing slot {slot}")
            del st.importing[slot]
            st.broadcast_pong(BROADCAST_ALL)
    else:
        raise ReplyError("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try "
                         "CLUSTER HELP")
    st.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)
    return OK


def c_bumpepoch(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    bumped = st.bump_epoch_without_consensus()
    return Status(f"{'BUMPED' if bumped else 'STILL'} {st.myself.config_epoch}")


def info_text(st: Any) -> str:
    """CLUSTER INFO's text."""
    assigned = ok = pfail = fail = 0
    for n in st.slots:
        if n is None:
            continue
        assigned += 1
        if n.failed:
            fail += 1
        elif n.timed_out:
            pfail += 1
        else:
            ok += 1
    me = st.myself
    myepoch = me.master.config_epoch if me.is_replica and me.master is not None else \
        me.config_epoch
    lines = [f"cluster_state:{'ok' if st.state == 0 else 'fail'}",
             f"cluster_slots_assigned:{assigned}", f"cluster_slots_ok:{ok}",
             f"cluster_slots_pfail:{pfail}", f"cluster_slots_fail:{fail}",
             f"cluster_known_nodes:{len(st.nodes)}", f"cluster_size:{st.size}",
             f"cluster_current_epoch:{st.current_epoch}", f"cluster_my_epoch:{myepoch}"]
    for counts, what in ((st.stats_sent, "sent"), (st.stats_received, "received")):
        for t, n in enumerate(counts):
            if n:
                lines.append(f"cluster_stats_messages_{wire.type_name(t)}_{what}:{n}")
        lines.append(f"cluster_stats_messages_{what}:{sum(counts)}")
    lines.append(f"total_cluster_links_buffer_limit_exceeded:{st.links_buffer_limit_exceeded}")
    return "".join(x + "\r\n" for x in lines)


def c_info(c: Any, argv: list[bytes]) -> object:
    return Verbatim(info_text(_state(c)).encode())


def c_saveconfig(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    from pyrepl.cluster.nodes_conf import render
    from pyrepl.core.cluster import save_nodes_conf
    st.todo &= ~TODO_SAVE_CONFIG
    err = save_nodes_conf(c.core, render(st))
    if err:
        raise ReplyError(f"ERR error saving the cluster node config: {err}")
    return OK


def c_keyslot(c: Any, argv: list[bytes]) -> object:
    _state(c)
    return key_hash_slot(argv[2])


def c_countkeysinslot(c: Any, argv: list[bytes]) -> object:
    _state(c)
    slot = parse_int(argv[2])
    if not 0 <= slot < SLOTS:
        raise ReplyError("ERR Invalid slot")
    return c.core.dbs[0].count_keys_in_slot(slot)


def c_getkeysinslot(c: Any, argv: list[bytes]) -> object:
    _state(c)
    slot = parse_int(argv[2])
    maxkeys = parse_int(argv[3])
    if not 0 <= slot < SLOTS or maxkeys < 0:
        raise ReplyError("ERR Invalid slot or number of keys")
    return c.core.dbs[0].keys_in_slot(slot, maxkeys)


def c_forget(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    n = _node(st, argv[2])
    if n is st.myself:
        raise ReplyError("ERR I tried hard but I can't forget myself...")
    if st.myself.is_replica and st.myself.master is n:
        raise ReplyError("ERR Can't forget my master!")
    st.blacklist_add(n)
    st.del_node(n)
    st.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)
    return OK


def c_replicate(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    n = _node(st, argv[2])
    me = st.myself
    if n is me:
        raise ReplyError("ERR Can't replicate myself")
    if n.is_replica:
        raise ReplyError("ERR I can only replicate a master, not a replica.")
    if me.is_master and (me.numslots != 0 or _db0_size(c) != 0):
        raise ReplyError("ERR To set a master the node must be empty and without assigned "
                         "slots.")
    st.set_master(n)
    st.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)
    return OK


def c_replicas(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    n = _node(st, argv[2])
    if n.is_replica:
        raise ReplyError("ERR The specified node is not a master")
    return [describe(r).encode() for r in n.replicas]


def c_count_failure_reports(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    n = _node(st, argv[2])
    return n.failure_reports_count(st.now, st.fail_report_validity())


def c_failover(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    force = takeover = False
    if len(argv) == 3:
        opt = argv[2].lower()
        if opt == b"force":
            force = True
        elif opt == b"takeover":
            takeover = force = True
        else:
            raise ReplyError(SYNTAX)
    me = st.myself
    if me.is_master:
        raise ReplyError("ERR You should send CLUSTER FAILOVER to a replica")
    if me.master is None:
        raise ReplyError("ERR I'm a replica but my master is unknown to me")
    if not force and (me.master.failed or me.master.link is None):
        raise ReplyError("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")
    failover.start_manual(st, force, takeover)
    return OK


def c_set_config_epoch(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    epoch = parse_int(argv[2])
    if epoch < 0:
        raise ReplyError(f"ERR Invalid config epoch specified: {epoch}")
    if len(st.nodes) > 1:
        raise ReplyError("ERR The user can assign a config epoch only when the node does not "
                         "know any other node.")
    if st.myself.config_epoch != 0:
        raise ReplyError("ERR Node config epoch is already non-zero")
    st.myself.config_epoch = epoch
    st.log("warning", f"configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH")
    st.current_epoch = max(st.current_epoch, epoch)
    st.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)
    return OK


def c_reset(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    hard = False
    if len(argv) == 3:
        opt = argv[2].lower()
        if opt == b"hard":
            hard = True
        elif opt != b"soft":
            raise ReplyError(SYNTAX)
    if st.myself.is_master and len(c.db) != 0:
        raise ReplyError("ERR CLUSTER RESET can't be called with master nodes containing keys")
    st.reset(hard)
    return OK


def c_links(c: Any, argv: list[bytes]) -> object:
    st = _state(c)
    out = []
    for n in st.nodes.values():
        for link in (n.link, n.inbound_link):
            if link is None:
                continue
            used = link.pending_bytes
            events = "r" + ("w" if used else "")
            out.append(Map([(b"direction", b"from" if link.inbound else b"to"),
                            (b"node", n.name.encode()), (b"create-time", link.ctime),
                            (b"events", events.encode()),
                            (b"send-buffer-allocated", used),
                            (b"send-buffer-used", used)]))
    return out


_HANDLERS = {
    "addslots": c_addslots, "addslotsrange": c_addslotsrange, "bumpepoch": c_bumpepoch,
    "count-failure-reports": c_count_failure_reports, "countkeysinslot": c_countkeysinslot,
    "delslots": c_addslots, "delslotsrange": c_addslotsrange, "failover": c_failover,
    "flushslots": c_flushslots, "forget": c_forget, "getkeysinslot": c_getkeysinslot,
    "help": c_help, "info": c_info, "keyslot": c_keyslot, "links": c_links, "meet": c_meet,
    "myid": c_myid, "nodes": c_nodes, "replicas": c_replicas, "replicate": c_replicate,
    "reset": c_reset, "saveconfig": c_saveconfig, "set-config-epoch": c_set_config_epoch,
    "setslot": c_setslot, "shards": c_shards, "slaves": c_replicas, "slots": c_slots,
}


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
            summary=_summary)(_HANDLERS[_name])



@command("readonly", 1, "fast loading stale", group="cluster", acl="connection",
         since="3.0.0", summary="Enables read queries for a connection to a cluster replica node")
def readonly(c: Any, argv: list[bytes]) -> object:
    _state(c)
    c.cluster_flags |= READONLY
    return OK


@command("readwrite", 1, "fast loading stale", group="cluster", acl="connection",
         since="3.0.0",
         summary="Disables read queries for a connection to a cluster replica node")
def readwrite(c: Any, argv: list[bytes]) -> object:
    _state(c)
    c.cluster_flags &= ~READONLY
    return OK


@command("asking", 1, "fast", group="cluster", acl="connection", since="3.0.0",
         summary="Sent by cluster clients after an -ASK redirect")
def asking(c: Any, argv: list[bytes]) -> object:
    _state(c)
    c.cluster_flags |= ASKING
    return OK
