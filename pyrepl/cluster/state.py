"""The cluster as this node sees it, and the bus protocol that keeps it (Redis 7.0's
cluster.c, its state half) — sans-io.

Theory of operation
-------------------
:class:`ClusterState` holds the node table (``nodes``, by name, ``myself`` among them), who
serves each of the 16,384 slots (``slots``), the slots being migrated or imported, the epochs
(``current_epoch``, each master's ``config_epoch``, ``last_vote_epoch``) and the cluster's
health (``ok``). It is driven by the I/O shell through three calls, the same moves as Redis's
event handlers:

- :meth:`process` for every whole frame a :class:`~pyrepl.cluster.link.Link` received
  (clusterProcessPacket: PING/PONG/MEET carry the sender's view of itself, its slots and
  epochs, and gossip about a few other nodes; FAIL, UPDATE, PUBLISH, the failover votes);
- :meth:`cron` ten times a second (clusterCron: links to open, pings to send, nodes that stopped
  answering flagged PFAIL, FAIL by a majority of masters' reports, the replica's election);
- :meth:`before_sleep` after each batch of events (clusterBeforeSleep: what those events made
  due, done once: the health re-evaluated, ``nodes.conf`` saved, an election moved on).

Links to open are in :meth:`links_to_open` (the shell connects each and calls
``link_connected`` or ``link_failed``); a link whose ``closed`` is set is closed by the shell,
which then calls :meth:`link_closed`. Time comes in as ``now`` (ms); the server is reached
through the port ``ClusterHost`` (replication, keys, pub/sub, the file). The replica's side of
a failover (election, manual failover, replica migration) and the master's (votes) live in
``failover.py``; the text forms (``CLUSTER NODES``, ``nodes.conf``) in ``nodes_conf.py``.

Invariants: ``slots[j] is n`` exactly when ``n.has_slot(j)``; a replica's ``master`` lists it
among its ``replicas``; ``myself`` is always in ``nodes``; a node's ``link`` is outbound and its
``inbound_link`` inbound.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrepl.cluster import wire
from pyrepl.cluster.link import Link
from pyrepl.cluster.node import (
    FAIL,
    HANDSHAKE,
    MASTER,
    MEET,
    MIGRATE_TO,
    MYSELF,
    NOADDR,
    NOFAILOVER,
    PFAIL,
    SLAVE,
    ClusterNode,
    random_name,
    valid_name,
)
from pyrepl.cluster.served import ServedSlots, SlotList, SlotMap
from pyrepl.cluster.watch import SlotWatch
from pyrepl.cluster.wire import BusError, Message

if TYPE_CHECKING:
    from pyrepl.cluster.ports import ClusterHost, ClusterSettings

CLUSTER_SLOTS = wire.CLUSTER_SLOTS
OK, FAIL_STATE = 0, 1

# cluster.h's multipliers and delays (ms)
FAIL_REPORT_VALIDITY_MULT = 2
FAIL_UNDO_TIME_MULT = 2
MF_TIMEOUT = 5000
MF_PAUSE_MULT = 2
REPLICA_MIGRATION_DELAY = 5000
BLACKLIST_TTL = 60_000
MAX_REJOIN_DELAY = 5000
MIN_REJOIN_DELAY = 500
WRITABLE_DELAY = 2000

# clusterBeforeSleep's todo flags
TODO_HANDLE_FAILOVER = 1
TODO_UPDATE_STATE = 2
TODO_SAVE_CONFIG = 4
TODO_FSYNC_CONFIG = 8
TODO_HANDLE_MANUALFAILOVER = 16

# clusterBroadcastPong's targets
BROADCAST_ALL = 0
BROADCAST_LOCAL_SLAVES = 1


class ClusterState:
    def __init__(self, host: ClusterHost, settings: ClusterSettings, now: int,
                 rng: random.Random | None = None) -> None:
        self.host = host
        self.cfg = settings
        self.rng = rng or random.Random()
        self.nodes: dict[str, ClusterNode] = {}
        self.myself = ClusterNode(random_name(self.rng), MYSELF | MASTER, now)
        self.nodes[self.myself.name] = self.myself
        self.current_epoch = 0
        self.last_vote_epoch = 0
        # the slots served with no look at the keys: kept by these four (pyrepl.cluster.served)
        self.served = ServedSlots(self)
        self.state = FAIL_STATE
        self.size = 1
        self.slots: list[ClusterNode | None] = SlotList([None] * CLUSTER_SLOTS,
                                                        self.served.slot_changed)
        self.migrating: dict[int, ClusterNode] = SlotMap(self.served.slot_changed)
        self.importing: dict[int, ClusterNode] = SlotMap(self.served.slot_changed)
        self.owner_not_claiming = bytearray(CLUSTER_SLOTS // 8)
        self.blacklist: dict[str, int] = {}      # name -> when it may be added again (ms)
        self.todo = 0
        self.links: set[Link] = set()
        self._to_open: list[Link] = []
        self.stats_sent = [0] * wire.TYPE_COUNT
        self.stats_received = [0] * wire.TYPE_COUNT
        self.stats_pfail_nodes = 0
        # DEBUG DROP-CLUSTER-PACKET-FILTER: messages of this type are dropped on receipt (-1:
        # none; server.cluster_drop_packet_filter)
        self.drop_packet_filter = -1
        self.links_buffer_limit_exceeded = 0
        self.pings_sent = 0
        self.iteration = 0
        self.now = now
        self.first_update_time = 0
        self.among_minority_time = 0
        # elections and manual failovers (failover.py)
        self.failover_auth_time = 0
        self.failover_auth_count = 0
        self.failover_auth_sent = False
        self.failover_auth_rank = 0
        self.failover_auth_epoch = 0
        self.cant_failover_reason = 0
        self.cant_failover_logged = 0
        self.mf_end = 0
        self.mf_replica: ClusterNode | None = None
        self.mf_master_offset = -1
        self.mf_can_start = False
        self.mf_kind = "manual"       # the last CLUSTER FAILOVER's: manual | force | takeover
        # the shell's hook: called when output or a before-sleep job is due outside the bus's
        # own events (a command sent a PUBLISH, ADDSLOTS made a save due)
        self.wake: Callable[[], None] | None = None
        self.slot_watch = SlotWatch()     # cluster_slots events (pyrepl.cluster.watch)
        self.sync_ports()

    @property
    def state(self) -> int:
        """OK or FAIL_STATE; a change copies or clears ``served``'s table."""
        return self._state

    @state.setter
    def state(self, value: int) -> None:
        self._state = value
        self.served.state_changed(value)

    # -- logging ---------------------------------------------------------------------------

    def log(self, level: str, msg: str) -> None:
        self.host.log(level, msg)

    def event(self, name: str, result: str, about: ClusterNode | None = None,
              **fields: Any) -> None:
        """A ``cluster_*`` sync event of this node's (``about``: the other node, as peer_id
        and, when it has an address, peer)."""
        me = self.myself
        fields.setdefault("role", "replica" if me.is_replica else "master")
        if about is not None:
            fields["peer_id"] = about.name
            if about.ip:
                fields["peer"] = f"{about.ip}:{about.port}"
        self.host.event(name, result=result, node_id=me.name, shard_id=me.shard_id or None,
                        **fields)

    # -- myself ----------------------------------------------------------------------------

    def sync_ports(self) -> None:
        """myself's ports, hostname and flags from the settings (deriveAnnouncedPorts,
        clusterUpdateMyself*)."""
        me = self.myself
        me.port, me.pport, me.cport = self.cfg.port, self.cfg.pport, self.cfg.cport
        if self.cfg.announce_ip:
            me.ip = self.cfg.announce_ip
        if me.hostname != self.cfg.announce_hostname:
            me.hostname = self.cfg.announce_hostname
        nofailover = NOFAILOVER if self.cfg.replica_no_failover else 0
        if me.flags & NOFAILOVER != nofailover:
            me.flags = (me.flags & ~NOFAILOVER) | nofailover
            self.do_before_sleep(TODO_SAVE_CONFIG)

    def do_before_sleep(self, flags: int) -> None:
        self.todo |= flags
        if self.wake is not None:
            self.wake()

    # -- the node table --------------------------------------------------------------------

    def lookup(self, name: str | bytes) -> ClusterNode | None:
        if isinstance(name, bytes):
            if not valid_name(name):
                return None
            name = name.decode()
        return self.nodes.get(name)

    def add_node(self, node: ClusterNode) -> None:
        assert node.name not in self.nodes
        self.nodes[node.name] = node

    def del_node(self, node: ClusterNode) -> None:
        """clusterDelNode: its slots unassigned, its failure reports gone, unlinked."""
        for j, n in list(self.importing.items()):
            if n is node:
                del self.importing[j]
        for j, n in list(self.migrating.items()):
            if n is node:
                del self.migrating[j]
        if node.numslots:
            for j in list(node.slot_list()):
                if self.slots[j] is node:
                    self.del_slot(j)
        for other in self.nodes.values():
            if other is not node:
                other.del_failure_report(node, self.now, self.fail_report_validity())
        # freeClusterNode
        for r in node.replicas:
            r.master = None
        if node.is_replica and node.master is not None:
            node.master.remove_replica(node)
        del self.nodes[node.name]
        if node.link is not None:
            self.free_link(node.link)
        if node.inbound_link is not None:
            self.free_link(node.inbound_link)

    def rename(self, node: ClusterNode, name: str) -> None:
        self.log("debug", f"Renaming node {node.name} into {name}")
        del self.nodes[node.name]
        node.name = name
        self.nodes[name] = node

    def fail_report_validity(self) -> int:
        return self.cfg.node_timeout * FAIL_REPORT_VALIDITY_MULT

    def blacklist_add(self, node: ClusterNode) -> None:
        self._blacklist_cleanup()
        self.blacklist[node.name] = self.now + BLACKLIST_TTL

    def blacklisted(self, name: str) -> bool:
        self._blacklist_cleanup()
        return name in self.blacklist

    def _blacklist_cleanup(self) -> None:
        for name, until in list(self.blacklist.items()):
            if until < self.now:
                del self.blacklist[name]

    # -- slots -----------------------------------------------------------------------------

    def add_slot(self, node: ClusterNode, slot: int) -> bool:
        """clusterAddSlot: False when the slot is someone's already."""
        if self.slots[slot] is not None:
            return False
        self.set_slot_bit(node, slot)
        self.slots[slot] = node
        return True

    def set_slot_bit(self, node: ClusterNode, slot: int) -> bool:
        """clusterNodeSetSlotBit (a master's first slot makes it a migration target when
        other masters have replicas)."""
        old = node.set_slot_bit(slot)
        if not old and node.numslots == 1 and self.masters_have_replicas():
            node.flags |= MIGRATE_TO
        return old

    def del_slot(self, slot: int) -> bool:
        """clusterDelSlot: False when the slot was unassigned."""
        n = self.slots[slot]
        if n is None:
            return False
        mine = n.master if n.is_replica and n.master is not None else n
        if self.myself is mine or self.myself in mine.replicas:
            self.host.remove_channels_in_slot(slot)
        n.clear_slot_bit(slot)
        self.slots[slot] = None
        return True

    def del_node_slots(self, node: ClusterNode) -> int:
        deleted = 0
        for j in list(node.slot_list()):
            self.del_slot(j)
            deleted += 1
        return deleted

    def close_all_slots(self) -> None:
        self.migrating.clear()
        self.importing.clear()

    def masters_have_replicas(self) -> bool:
        return any(n.replicas for n in self.nodes.values() if not n.is_replica)

    def slot_unclaimed(self, slot: int) -> bool:
        """isSlotUnclaimed: nobody serves it, or its owner stopped claiming it
        (mid-migration)."""
        return self.slots[slot] is None or \
            bool(self.owner_not_claiming[slot >> 3] & (1 << (slot & 7)))

    def _set_not_claiming(self, slot: int, on: bool) -> None:
        if on:
            self.owner_not_claiming[slot >> 3] |= 1 << (slot & 7)
        else:
            self.owner_not_claiming[slot >> 3] &= ~(1 << (slot & 7))

    def serving_master(self) -> ClusterNode:
        """myself, or our master when we are a replica of a known one."""
        me = self.myself
        return me.master if me.is_replica and me.master is not None else me

    # -- epochs ----------------------------------------------------------------------------

    def max_epoch(self) -> int:
        return max(max(n.config_epoch for n in self.nodes.values()), self.current_epoch)

    def bump_epoch_without_consensus(self) -> bool:
        """clusterBumpConfigEpochWithoutConsensus."""
        me = self.myself
        if me.config_epoch == 0 or me.config_epoch != self.max_epoch():
            self.current_epoch += 1
            me.config_epoch = self.current_epoch
            self.do_before_sleep(TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG)
            self.log("warning", f"New configEpoch set to {me.config_epoch}")
            return True
        return False

    def handle_epoch_collision(self, sender: ClusterNode) -> None:
        """clusterHandleConfigEpochCollision: of two masters with one config epoch, the one
        with the smaller name takes a new one."""
        me = self.myself
        if sender.config_epoch != me.config_epoch or not sender.is_master or \
                not me.is_master:
            return
        if sender.name <= me.name:
            return
        self.current_epoch += 1
        me.config_epoch = self.current_epoch
        self.save_config(True)
        self.log("verbose", f"WARNING: configEpoch collision with node {sender.name}. "
                 f"configEpoch set to {me.config_epoch}")

    # -- links -----------------------------------------------------------------------------

    def accept(self, peer_ip: str, local_ip: str) -> Link:
        """An inbound bus connection (its node learnt from its messages)."""
        link = Link(None, self.now)
        link.peer_ip, link.local_ip = peer_ip, local_ip
        self.links.add(link)
        return link

    def links_to_open(self) -> list[Link]:
        """The outbound links the shell must connect (to ``link.node``'s ip and cport)."""
        out, self._to_open = self._to_open, []
        return [lk for lk in out if not lk.closed]

    def link_connected(self, link: Link, local_ip: str) -> None:
        """clusterLinkConnectHandler: the first message is a PING (a MEET while the node
        has to learn of us)."""
        link.connected = True
        link.local_ip = local_ip
        link.peer_ip = link.node.ip if link.node is not None else ""
        node = link.node
        if node is None:
            return
        old_ping_sent = node.ping_sent
        self.send_ping(link, wire.MEET if node.flags & MEET else wire.PING)
        if old_ping_sent:
            node.ping_sent = old_ping_sent
        node.flags &= ~MEET
        self.log("debug", f"Connecting with Node {node.name} at {node.ip}:{node.cport}")

    def link_failed(self, link: Link, error: str) -> None:
        node = link.node
        if node is not None:
            self.log("verbose", f"Connection with Node {node.name} at {node.ip}:{node.cport} "
                     f"failed: {error}")
        self.free_link(link)

    def link_closed(self, link: Link) -> None:
        """The shell closed the socket (an I/O error, EOF, or ``closed`` set here)."""
        self.free_link(link)

    def free_link(self, link: Link) -> None:
        """freeClusterLink: the node no longer references it; the shell closes the socket."""
        link.close()
        self.links.discard(link)
        node = link.node
        if node is not None:
            if node.link is link:
                node.link = None
            elif node.inbound_link is link:
                node.inbound_link = None

    def kill_links(self, node: ClusterNode, direction: str) -> None:
        """DEBUG CLUSTERLINK KILL: the node's outbound link (``to``), inbound link
        (``from``) or both (``all``) freed; the cron reconnects."""
        for link in ((node.link,) if direction == "to" else (node.inbound_link,)
                     if direction == "from" else (node.link, node.inbound_link)):
            if link is not None:
                self.free_link(link)
        self.do_before_sleep(0)      # (the shell closes the sockets at its next pump)

    def _new_outbound(self, node: ClusterNode) -> Link:
        link = Link(node, self.now)
        node.link = link
        self.links.add(link)
        self._to_open.append(link)
        return link

    def _set_inbound(self, node: ClusterNode, link: Link) -> None:
        """setClusterNodeToInboundClusterLink (an older inbound link of the node closed)."""
        if node.inbound_link is not None and node.inbound_link is not link:
            self.log("debug", f"Replacing inbound link {node.inbound_link.id} from node "
                     f"{node.name} with {link.id}")
            self.free_link(node.inbound_link)
        node.inbound_link = link
        link.node = node

    def send(self, link: Link | None, frame: bytes, mtype: int) -> None:
        """clusterSendMessage."""
        if link is None or link.closed:
            return
        link.send(frame)
        if mtype < wire.TYPE_COUNT:
            self.stats_sent[mtype] += 1
        if self.wake is not None:
            self.wake()

    def broadcast(self, frame: bytes, mtype: int) -> None:
        """clusterBroadcastMessage: every node's link but ours and those in handshake."""
        for node in list(self.nodes.values()):
            if node.flags & (MYSELF | HANDSHAKE):
                continue
            self.send(node.link, frame, mtype)

    # -- messages out ----------------------------------------------------------------------

    def header(self, mtype: int) -> Message:
        """clusterBuildMessageHdr: who we are, our slots (our master's when a replica), the
        epochs and our replication offset."""
        me = self.myself
        master = self.serving_master()
        m = Message(type=mtype, sender=me.name.encode())
        m.myip = self.cfg.announce_ip
        m.myslots = bytes(master.slots)
        if me.master is not None:
            m.slaveof = me.master.name.encode()
        m.port, m.pport, m.cport = me.port, me.pport, me.cport
        m.flags = me.flags
        m.state = self.state
        m.current_epoch = self.current_epoch
        m.config_epoch = master.config_epoch
        m.offset = self.host.repl_offset()
        if me.is_master and self.mf_end:
            m.mflags = bytes([wire.FLAG0_PAUSED, 0, 0])
        return m

    def gossip_entry(self, n: ClusterNode) -> wire.Gossip:
        return wire.Gossip(name=n.name.encode(), ping_sent=n.ping_sent // 1000,
                           pong_received=n.pong_received // 1000, ip=n.ip, port=n.port,
                           cport=n.cport, flags=n.flags, pport=n.pport)

    def send_ping(self, link: Link, mtype: int) -> None:
        """clusterSendPing: a PING, PONG or MEET with gossip about a tenth of the nodes
        (3 at least) picked at random, and every node in PFAIL."""
        self.pings_sent += 1
        mark = self.pings_sent
        freshnodes = len(self.nodes) - 2
        wanted = max(len(self.nodes) // 10, 3)
        wanted = min(wanted, freshnodes)
        if not link.inbound and mtype == wire.PING and link.node is not None:
            link.node.ping_sent = self.now
        m = self.header(mtype)
        gossip: list[wire.Gossip] = []
        values = list(self.nodes.values())
        maxiterations = wanted * 3
        while freshnodes > 0 and len(gossip) < wanted and maxiterations > 0:
            maxiterations -= 1
            this = values[self.rng.randrange(len(values))]
            if this is self.myself or this.flags & PFAIL:
                continue
            if this.flags & (HANDSHAKE | NOADDR) or (this.link is None and
                                                      this.numslots == 0):
                freshnodes -= 1
                continue
            if this.last_in_ping_gossip == mark:
                continue
            gossip.append(self.gossip_entry(this))
            this.last_in_ping_gossip = mark
            freshnodes -= 1
        pfail_wanted = self.stats_pfail_nodes
        if pfail_wanted:
            for node in values:
                if pfail_wanted <= 0:
                    break
                if node.flags & (HANDSHAKE | NOADDR) or not node.flags & PFAIL:
                    continue
                gossip.append(self.gossip_entry(node))
                pfail_wanted -= 1
        m.gossip = gossip
        if self.myself.hostname:
            m.exts = [wire.Ext.hostname(self.myself.hostname)]
        self.send(link, wire.encode(m), mtype)

    def broadcast_pong(self, target: int) -> None:
        me = self.myself
        for node in list(self.nodes.values()):
            if node.link is None or node is me or node.in_handshake:
                continue
            if target == BROADCAST_LOCAL_SLAVES:
                if not (node.is_replica and node.master is not None and
                        (node.master is me or node.master is me.master)):
                    continue
            self.send_ping(node.link, wire.PONG)

    def send_fail(self, name: str) -> None:
        m = self.header(wire.FAIL)
        m.about = name.encode()
        self.broadcast(wire.encode(m), wire.FAIL)

    def send_update(self, link: Link | None, node: ClusterNode) -> None:
        """clusterSendUpdate: ``node``'s slots and epoch, without the slots it stopped
        claiming."""
        if link is None:
            return
        m = self.header(wire.UPDATE)
        m.update_name = node.name.encode()
        m.update_epoch = node.config_epoch
        m.update_slots = bytes(a & ~b & 0xFF for a, b in zip(node.slots,
                                                             self.owner_not_claiming,
                                                             strict=True))
        self.send(link, wire.encode(m), wire.UPDATE)

    def propagate_publish(self, channel: bytes, message: bytes, sharded: bool) -> None:
        """clusterPropagatePublish: PUBLISH to every node; SPUBLISH to our shard's."""
        if not sharded:
            m = self.header(wire.PUBLISH)
            m.channel, m.message = channel, message
            self.broadcast(wire.encode(m), wire.PUBLISH)
            return
        m = self.header(wire.PUBLISHSHARD)
        m.channel, m.message = channel, message
        frame = wire.encode(m)
        master = self.serving_master()
        for node in [master, *master.replicas]:
            if node.flags & (MYSELF | HANDSHAKE):
                continue
            self.send(node.link, frame, wire.PUBLISHSHARD)

    # -- messages in -----------------------------------------------------------------------

    def receive(self, link: Link, data: bytes) -> None:
        """Bytes read from ``link``: every whole message processed (clusterReadHandler)."""
        link.receive_data(data)
        while not link.closed:
            frame = link.next_frame()
            if frame is None:
                break
            self.process(link, frame)
        if link.closed:
            if link.error:
                self.log("warning", link.error)
            self.free_link(link)

    def process(self, link: Link, frame: bytes) -> bool:
        """clusterProcessPacket; False when the link was freed on the way."""
        if len(frame) >= 14:
            mtype = int.from_bytes(frame[12:14], "big")
            if mtype < wire.TYPE_COUNT:
                self.stats_received[mtype] += 1
            if mtype == self.drop_packet_filter:
                self.log("warning", "Dropping packet that matches debug drop filter")
                return True
        try:
            msg = wire.decode(frame)
        except BusError as e:
            self.log("warning", str(e))
            return True
        if msg is None:
            return True
        now = self.now
        sender = self._sender_of(link, msg)
        if sender is not None:
            sender.data_received = now
        sender_config_epoch = 0
        if sender is not None and not sender.in_handshake:
            if msg.current_epoch > self.current_epoch:
                self.current_epoch = msg.current_epoch
            sender_config_epoch = msg.config_epoch
            if sender_config_epoch > sender.config_epoch:
                sender.config_epoch = sender_config_epoch
                self.do_before_sleep(TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG)
            sender.repl_offset = msg.offset
            sender.repl_offset_time = now
            me = self.myself
            if self.mf_end and me.is_replica and me.master is sender and \
                    msg.mflags[0] & wire.FLAG0_PAUSED and self.mf_master_offset == -1:
                self.mf_master_offset = sender.repl_offset
                self.do_before_sleep(TODO_HANDLE_MANUALFAILOVER)
                self.log("warning", "Received replication offset for paused master manual "
                         f"failover: {self.mf_master_offset}")
        t = msg.type
        if t in (wire.PING, wire.MEET):
            self._on_ping_or_meet(link, msg, sender)
        if t in (wire.PING, wire.PONG, wire.MEET):
            return self._on_config(link, msg, sender, sender_config_epoch)
        if t == wire.FAIL:
            self._on_fail(msg, sender)
        elif t in (wire.PUBLISH, wire.PUBLISHSHARD):
            if sender is not None:
                sharded = t == wire.PUBLISHSHARD
                if self.host.subscriptions(sharded) > 0:
                    self.host.publish(msg.channel, msg.message, sharded)
        elif t == wire.FAILOVER_AUTH_REQUEST:
            if sender is not None:
                failover.vote_if_needed(self, sender, msg)
        elif t == wire.FAILOVER_AUTH_ACK:
            if sender is not None and sender.is_master and sender.numslots > 0 and \
                    msg.current_epoch >= self.failover_auth_epoch:
                self.failover_auth_count += 1
                self.do_before_sleep(TODO_HANDLE_FAILOVER)
        elif t == wire.MFSTART:
            if sender is not None and sender.master is self.myself:
                failover.master_start_manual(self, sender)
                self.send_ping(link, wire.PING)
        elif t == wire.UPDATE:
            self._on_update(msg, sender)
        elif t == wire.MODULE:
            pass        # no modules: a module message has no receiver here
        else:
            self.log("warning", f"Received unknown packet type: {t}")
        return True

    def _sender_of(self, link: Link, msg: Message) -> ClusterNode | None:
        """getNodeFromLinkAndMsg."""
        if link.node is not None and not link.node.in_handshake:
            return link.node
        sender = self.lookup(msg.sender)
        if sender is not None and link.node is None:
            self._set_inbound(sender, link)
        return sender

    def _on_ping_or_meet(self, link: Link, msg: Message, sender: ClusterNode | None) -> None:
        me = self.myself
        if (msg.type == wire.MEET or not me.ip) and not self.cfg.announce_ip:
            ip = link.local_ip
            if ip and ip != me.ip:
                me.ip = ip
                self.log("warning", f"IP address for this node updated to {me.ip}")
                self.do_before_sleep(TODO_SAVE_CONFIG)
        if sender is None and msg.type == wire.MEET:
            node = ClusterNode(random_name(self.rng), HANDSHAKE, self.now)
            node.ip = msg.myip or link.peer_ip
            node.port, node.pport, node.cport = msg.port, msg.pport, msg.cport
            self.add_node(node)
            self.do_before_sleep(TODO_SAVE_CONFIG)
            self._process_gossip(link, msg)
        self.send_ping(link, wire.PONG)

    def _on_config(self, link: Link, msg: Message, sender: ClusterNode | None,
                   sender_config_epoch: int) -> bool:
        now = self.now
        node = link.node
        if not link.inbound and node is not None:
            if node.in_handshake:
                if sender is not None:
                    self.log("verbose", f"Handshake: we already know node {sender.name}, "
                             "updating the address if needed.")
                    if self._update_address(sender, link, msg):
                        self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)
                    self.del_node(node)
                    return False
                name = msg.sender.decode("latin-1")
                self.rename(node, name)
                self.log("debug", f"Handshake with node {name} completed.")
                node.flags &= ~HANDSHAKE
                node.flags |= msg.flags & (MASTER | SLAVE)
                self.do_before_sleep(TODO_SAVE_CONFIG)
            elif node.name.encode() != msg.sender:
                self.log("debug", f"PONG contains mismatching sender ID. About node "
                         f"{node.name} added {now - node.ctime} ms ago, having flags "
                         f"{node.flags}")
                node.flags |= NOADDR
                node.ip = ""
                node.port = node.pport = node.cport = 0
                self.free_link(link)
                self.do_before_sleep(TODO_SAVE_CONFIG)
                return False
        if sender is not None:
            sender.flags = (sender.flags & ~NOFAILOVER) | (msg.flags & NOFAILOVER)
        if sender is not None and msg.type == wire.PING and not sender.in_handshake and \
                self._update_address(sender, link, msg):
            self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)
        if not link.inbound and msg.type == wire.PONG and node is not None:
            node.pong_received = now
            node.ping_sent = 0
            if node.timed_out:
                node.flags &= ~PFAIL
                self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)
            elif node.failed:
                self.clear_failure_if_needed(node)
        if sender is not None:
            if msg.slaveof == wire.NULL_NAME:
                self.set_node_as_master(sender)
            else:
                master = self.lookup(msg.slaveof)
                if sender.is_master:
                    self.del_node_slots(sender)
                    sender.flags &= ~(MASTER | MIGRATE_TO)
                    sender.flags |= SLAVE
                    self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)
                if master is not None and sender.master is not master:
                    if sender.master is not None:
                        sender.master.remove_replica(sender)
                    master.add_replica(sender)
                    sender.master = master
                    self.do_before_sleep(TODO_SAVE_CONFIG)
        sender_master = None
        dirty_slots = False
        if sender is not None:
            sender_master = sender if sender.is_master else sender.master
            if sender_master is not None:
                dirty_slots = bytes(sender_master.slots) != msg.myslots
        if sender is not None and sender.is_master and dirty_slots:
            self.update_slots_config_with(sender, sender_config_epoch, msg.myslots)
        if sender is not None and dirty_slots:
            for j in bitmap_slots(msg.myslots):
                owner = self.slots[j]
                if owner is None or owner is sender or self.slot_unclaimed(j):
                    continue
                if owner.config_epoch > sender_config_epoch:
                    self.log("verbose", f"Node {sender.name} has old slots configuration, "
                             f"sending an UPDATE message about {owner.name}")
                    self.send_update(sender.link, owner)
                    break
        me = self.myself
        if sender is not None and me.is_master and sender.is_master and \
                sender_config_epoch == me.config_epoch:
            self.handle_epoch_collision(sender)
        if sender is not None:
            self._process_gossip(link, msg)
            self._process_exts(link, msg)
        return True

    def _on_fail(self, msg: Message, sender: ClusterNode | None) -> None:
        about = msg.about.decode("latin-1")
        if sender is None:
            self.log("notice", f"Ignoring FAIL message from unknown node "
                     f"{msg.sender.decode('latin-1')} about {about}")
            return
        failing = self.lookup(msg.about)
        if failing is not None and not failing.flags & (FAIL | MYSELF):
            self.log("notice", f"FAIL message received from {sender.name} about {about}")
            failing.flags |= FAIL
            failing.fail_time = self.now
            failing.flags &= ~PFAIL
            self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)

    def _on_update(self, msg: Message, sender: ClusterNode | None) -> None:
        if sender is None:
            return
        n = self.lookup(msg.update_name)
        if n is None or n.config_epoch >= msg.update_epoch:
            return
        if n.is_replica:
            self.set_node_as_master(n)
        n.config_epoch = msg.update_epoch
        self.do_before_sleep(TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG)
        self.update_slots_config_with(n, msg.update_epoch, msg.update_slots)

    def _process_gossip(self, link: Link, msg: Message) -> None:
        """clusterProcessGossipSection."""
        sender = link.node if link.node is not None else self.lookup(msg.sender)
        now = self.now
        validity = self.fail_report_validity()
        for g in msg.gossip:
            flags = g.flags
            node = self.lookup(g.name)
            if node is not None:
                if sender is not None and sender.is_master and node is not self.myself:
                    if flags & (FAIL | PFAIL):
                        if node.add_failure_report(sender, now):
                            self.log("verbose", f"Node {sender.name} reported node "
                                     f"{node.name} as not reachable.")
                        self.mark_failing_if_needed(node)
                    elif node.del_failure_report(sender, now, validity):
                        self.log("verbose", f"Node {sender.name} reported node {node.name} "
                                 "is back online.")
                if not flags & (FAIL | PFAIL) and node.ping_sent == 0 and \
                        node.failure_reports_count(now, validity) == 0:
                    pongtime = g.pong_received * 1000
                    if pongtime <= now + 500 and pongtime > node.pong_received:
                        node.pong_received = pongtime
                if node.flags & (FAIL | PFAIL) and not flags & NOADDR and \
                        not flags & (FAIL | PFAIL) and \
                        (node.ip.lower() != g.ip.lower() or node.port != g.port or
                         node.cport != g.cport):
                    if node.link is not None:
                        self.free_link(node.link)
                    node.ip, node.port, node.pport, node.cport = g.ip, g.port, g.pport, \
                        g.cport
                    node.flags &= ~NOADDR
            else:
                name = g.name.decode("latin-1")
                if sender is not None and not flags & NOADDR and valid_name(name) and \
                        not self.blacklisted(name):
                    node = ClusterNode(name, flags, now)
                    node.ip, node.port, node.pport, node.cport = g.ip, g.port, g.pport, \
                        g.cport
                    self.add_node(node)

    def _process_exts(self, link: Link, msg: Message) -> None:
        """clusterProcessPingExtensions: the sender's hostname (none sent: none)."""
        sender = link.node if link.node is not None else self.lookup(msg.sender)
        if sender is None:
            return
        hostname = ""
        for ext in msg.exts:
            if ext.type == wire.EXT_HOSTNAME:
                hostname = ext.text()
            elif ext.type == wire.EXT_SHARDID:
                sender.shard_id = ext.data[:wire.NAMELEN].decode("latin-1")
            elif ext.type not in (wire.EXT_HUMAN_NODENAME, wire.EXT_FORGOTTEN_NODE):
                self.log("warning", f"Received unknown extension type {ext.type}")
        if sender.hostname != hostname:
            sender.hostname = hostname
            self.do_before_sleep(TODO_SAVE_CONFIG)

    def _update_address(self, node: ClusterNode, link: Link, msg: Message) -> bool:
        """nodeUpdateAddressIfNeeded: the address the node's own messages come from (or
        announce), its old link dropped when it moved."""
        if link is node.link:
            return False
        ip = msg.myip or link.peer_ip
        if not ip:
            return False
        if node.port == msg.port and node.cport == msg.cport and node.pport == msg.pport \
                and node.ip == ip:
            return False
        node.ip, node.port, node.pport, node.cport = ip, msg.port, msg.pport, msg.cport
        if node.link is not None:
            self.free_link(node.link)
        node.flags &= ~NOADDR
        self.log("warning", f"Address updated for node {node.name}, now {node.ip}:"
                 f"{node.port}")
        me = self.myself
        if me.is_replica and me.master is node:
            self.host.set_master(node.ip, node.port)
        return True

    # -- roles and slots from the bus ------------------------------------------------------

    def set_node_as_master(self, n: ClusterNode) -> None:
        """clusterSetNodeAsMaster."""
        if n.is_master:
            return
        if n.master is not None:
            n.master.remove_replica(n)
            if n is not self.myself:
                n.flags |= MIGRATE_TO
        n.flags &= ~SLAVE
        n.flags |= MASTER
        n.master = None
        self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE)

    def update_slots_config_with(self, sender: ClusterNode, sender_epoch: int,
                                 slots: bytes) -> None:
        """clusterUpdateSlotsConfigWith: the slots ``sender`` claims with a newer epoch
        become its; a master left without slots follows the new owner, a replica whose
        master lost them too; keys of slots lost otherwise are deleted."""
        me = self.myself
        curmaster = me if me.is_master else me.master
        if sender is me:
            self.log("warning", "Discarding UPDATE message about myself.")
            return
        dirty: list[int] = []
        newmaster = None
        migrated_our_slots = 0
        # Redis walks all 16,384 slots; only those where the claim and the table differ do
        # anything, so they are found with bitmap arithmetic (the sender's bitmap is its
        # slots in the table): a slot claimed and the sender's already only loses its
        # not-claiming mark; one the sender has and no longer claims gets it (in bulk, here);
        # a claimed slot someone else has is judged one by one, in slot order, below.
        # (A migration moves slots one at a time, and each node of a 20-node cluster ran
        # the walk in Python at each move: the harness's rebalances ran out of time.)
        claimed = int.from_bytes(slots, "little")
        owned = int.from_bytes(sender.slots, "little")
        sender_slots = claimed.bit_count()
        marks = int.from_bytes(self.owner_not_claiming, "little")
        marks = (marks & ~(claimed & owned)) | (owned & ~claimed)
        self.owner_not_claiming[:] = marks.to_bytes(CLUSTER_SLOTS // 8, "little")
        for j in bitmap_slots((claimed & ~owned).to_bytes(CLUSTER_SLOTS // 8, "little")):
            owner = self.slots[j]
            if j in self.importing:
                continue
            if owner is None or self.slot_unclaimed(j) or owner.config_epoch < sender_epoch:
                if owner is me and self.host.count_keys_in_slot(j) and sender is not me:
                    dirty.append(j)
                if owner is curmaster and owner is not None:
                    newmaster = sender
                    migrated_our_slots += 1
                self.del_slot(j)
                self.add_slot(sender, j)
                self._set_not_claiming(j, False)
                self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE |
                                     TODO_FSYNC_CONFIG)
        if newmaster is not None and curmaster is not None and curmaster.numslots == 0 and \
                (self.cfg.allow_replica_migration or sender_slots == migrated_our_slots):
            self.log("warning", "Configuration change detected. Reconfiguring myself as a "
                     f"replica of {sender.name}")
            self.set_master(sender)
            self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG)
        elif me.master is not None and me.master.master is not None and \
                me.master.master is not me:
            self.log("warning", "I'm a sub-replica! Reconfiguring myself as a replica of "
                     f"grandmaster {me.master.master.name}")
            self.set_master(me.master.master)
            self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG)
        elif dirty:
            for j in dirty:
                self.host.del_keys_in_slot(j)

    def set_master(self, n: ClusterNode) -> None:
        """clusterSetMaster: this node becomes a replica of ``n``."""
        me = self.myself
        assert n is not me and me.numslots == 0
        if me.is_master:
            me.flags &= ~(MASTER | MIGRATE_TO)
            me.flags |= SLAVE
            self.close_all_slots()
        elif me.master is not None:
            me.master.remove_replica(me)
        me.master = n
        n.add_replica(me)
        self.host.set_master(n.ip, n.port)
        failover.reset_manual(self)

    # -- failure detection -----------------------------------------------------------------

    def mark_failing_if_needed(self, node: ClusterNode) -> None:
        """markNodeAsFailingIfNeeded: PFAIL here and reported by a majority of masters."""
        needed = self.size // 2 + 1
        if not node.timed_out or node.failed:
            return
        failures = node.failure_reports_count(self.now, self.fail_report_validity())
        if self.myself.is_master:
            failures += 1
        if failures < needed:
            return
        self.log("notice", f"Marking node {node.name} as failing (quorum reached).")
        self.event("cluster_node_fail", "fail", node, reason="quorum")
        node.flags &= ~PFAIL
        node.flags |= FAIL
        node.fail_time = self.now
        self.send_fail(node.name)
        self.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)

    def clear_failure_if_needed(self, node: ClusterNode) -> None:
        """clearNodeFailureIfNeeded: a replica or slotless master reachable again, or a
        master nobody took over from after a while."""
        if node.is_replica or node.numslots == 0:
            what = "replica" if node.is_replica else "master without slots"
            self.log("notice", f"Clear FAIL state for node {node.name}: {what} is reachable "
                     "again.")
            self.event("cluster_node_fail", "cleared", node,
                       reason="reachable" if node.is_replica else "no-slots")
            node.flags &= ~FAIL
            self.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)
        if node.is_master and node.numslots > 0 and \
                self.now - node.fail_time > self.cfg.node_timeout * FAIL_UNDO_TIME_MULT:
            self.log("notice", f"Clear FAIL state for node {node.name}: is reachable again "
                     "and nobody is serving its slots after some time.")
            self.event("cluster_node_fail", "cleared", node, reason="timeout")
            node.flags &= ~FAIL
            self.do_before_sleep(TODO_UPDATE_STATE | TODO_SAVE_CONFIG)

    # -- handshakes ------------------------------------------------------------------------

    def handshake_in_progress(self, ip: str, port: int, cport: int) -> bool:
        return any(n.in_handshake and n.ip.lower() == ip.lower() and n.port == port and
                   n.cport == cport for n in self.nodes.values())

    def start_handshake(self, ip: str, port: int, cport: int) -> str:
        """clusterStartHandshake: "" when started, else "EINVAL" or "EAGAIN". ``ip`` must be
        the normalised text of an address (the caller parses it)."""
        if not (0 < port <= 65535 and 0 < cport <= 65535):
            return "EINVAL"
        if self.handshake_in_progress(ip, port, cport):
            return "EAGAIN"
        n = ClusterNode(random_name(self.rng), HANDSHAKE | MEET, self.now)
        n.ip, n.port, n.cport = ip, port, cport
        self.add_node(n)
        return ""

    # -- the cron --------------------------------------------------------------------------

    def cron(self, now: int) -> None:
        """clusterCron, 10 times a second."""
        self.now = now
        self.iteration += 1
        self.sync_ports()
        timeout = self.cfg.node_timeout
        handshake_timeout = max(timeout, 1000)
        self.stats_pfail_nodes = 0
        for node in list(self.nodes.values()):
            if node.name not in self.nodes:
                continue
            self._free_link_over_limit(node.link)
            self._free_link_over_limit(node.inbound_link)
            if node.flags & (MYSELF | NOADDR):
                continue
            if node.flags & PFAIL:
                self.stats_pfail_nodes += 1
            if node.in_handshake and now - node.ctime > handshake_timeout:
                self.del_node(node)
                continue
            if node.link is None:
                self._new_outbound(node)
        if self.iteration % 10 == 0:
            values = list(self.nodes.values())
            best: ClusterNode | None = None
            for _ in range(5):
                this = values[self.rng.randrange(len(values))]
                if this.link is None or this.ping_sent != 0:
                    continue
                if this.flags & (MYSELF | HANDSHAKE):
                    continue
                if best is None or best.pong_received > this.pong_received:
                    best = this
            if best is not None:
                self.log("debug", f"Pinging node {best.name}")
                self.send_ping(best.link, wire.PING)
        orphaned = max_replicas = this_replicas = 0
        update_state = False
        me = self.myself
        for node in list(self.nodes.values()):
            if node.flags & (MYSELF | NOADDR | HANDSHAKE):
                continue
            if me.is_replica and node.is_master and not node.failed:
                ok = node.non_failing_replicas()
                if ok == 0 and node.numslots > 0 and node.flags & MIGRATE_TO:
                    orphaned += 1
                max_replicas = max(max_replicas, ok)
                if me.master is node:
                    this_replicas = ok
            ping_delay = now - node.ping_sent
            data_delay = now - node.data_received
            if node.link is not None and now - node.link.ctime > timeout and \
                    node.ping_sent and ping_delay > timeout // 2 and \
                    data_delay > timeout // 2:
                self.free_link(node.link)
            if node.link is not None and node.ping_sent == 0 and \
                    now - node.pong_received > timeout // 2:
                self.send_ping(node.link, wire.PING)
                continue
            if self.mf_end and me.is_master and self.mf_replica is node and \
                    node.link is not None:
                self.send_ping(node.link, wire.PING)
                continue
            if node.ping_sent == 0:
                continue
            if min(ping_delay, data_delay) > timeout and not node.flags & (PFAIL | FAIL):
                self.log("debug", f"*** NODE {node.name} possibly failing")
                node.flags |= PFAIL
                update_state = True
        if me.is_replica and me.master is not None and me.master.has_addr and \
                not self.host.following():
            self.host.set_master(me.master.ip, me.master.port)
        failover.manual_check_timeout(self)
        if me.is_replica:
            failover.handle_manual(self)
            failover.handle_replica_failover(self)
            if orphaned and max_replicas >= 2 and this_replicas == max_replicas and \
                    self.cfg.allow_replica_migration:
                failover.handle_replica_migration(self, max_replicas)
        if update_state or self.state == FAIL_STATE:
            self.update_state()

    def _free_link_over_limit(self, link: Link | None) -> None:
        limit = self.cfg.link_sendbuf_limit
        if link is None or limit == 0 or link.pending_bytes <= limit:
            return
        who = link.node.name if link.node is not None else ""
        self.log("warning", f"Freeing cluster link({'from' if link.inbound else 'to'} node "
                 f"{who}, used memory: {link.pending_bytes}) due to exceeding send buffer "
                 "memory limit.")
        self.free_link(link)
        self.links_buffer_limit_exceeded += 1

    def before_sleep(self, now: int) -> None:
        """clusterBeforeSleep: what the events since the last call made due."""
        self.now = now
        flags, self.todo = self.todo, 0
        if flags & TODO_HANDLE_MANUALFAILOVER:
            if self.myself.is_replica:
                failover.handle_manual(self)
                failover.handle_replica_failover(self)
        elif flags & TODO_HANDLE_FAILOVER:
            failover.handle_replica_failover(self)
        if flags & TODO_UPDATE_STATE:
            self.update_state()
        if flags & TODO_SAVE_CONFIG:
            self.save_config(bool(flags & TODO_FSYNC_CONFIG))

    # -- the cluster's health --------------------------------------------------------------

    def update_state(self) -> None:
        """clusterUpdateState: OK when every slot is served by a non-failed master (with
        cluster-require-full-coverage) and a majority of the masters with slots is
        reachable; a master that was in the minority waits a rejoin delay first."""
        now = self.now
        self.todo &= ~TODO_UPDATE_STATE
        if self.first_update_time == 0:
            self.first_update_time = now
        me = self.myself
        if me.is_master and self.state == FAIL_STATE and \
                now - self.first_update_time < WRITABLE_DELAY:
            return
        new_state = OK
        if self.cfg.require_full_coverage:
            for n in self.slots:
                if n is None or n.flags & FAIL:
                    new_state = FAIL_STATE
                    break
        size = reachable = 0
        for node in self.nodes.values():
            if node.is_master and node.numslots:
                size += 1
                if not node.flags & (FAIL | PFAIL):
                    reachable += 1
        self.size = size
        if reachable < size // 2 + 1:
            new_state = FAIL_STATE
            self.among_minority_time = now
        if new_state != self.state:
            rejoin = min(max(self.cfg.node_timeout, MIN_REJOIN_DELAY), MAX_REJOIN_DELAY)
            if new_state == OK and me.is_master and now - self.among_minority_time < rejoin:
                return
            self.log("warning", f"Cluster state changed: {'ok' if new_state == OK else 'fail'}")
            self.event("cluster_state", "ok" if new_state == OK else "fail")
            self.state = new_state

    # -- persistence -----------------------------------------------------------------------

    def save_config(self, fsync: bool) -> None:
        """clusterSaveConfigOrDie: nodes.conf written (the host stops the server when it
        cannot be)."""
        from pyrepl.cluster import nodes_conf
        self.todo &= ~TODO_SAVE_CONFIG
        if fsync:
            self.todo &= ~TODO_FSYNC_CONFIG
        self.host.save_config(nodes_conf.render(self), fsync)
        for result, slots, other in self.slot_watch.look(self.myself, self.slots,
                                                         self.migrating, self.importing):
            self.event("cluster_slots", result, other, slots=slots,
                       config_epoch=self.myself.config_epoch)

    # -- reset -----------------------------------------------------------------------------

    def reset(self, hard: bool) -> None:
        """clusterReset: every other node forgotten, every slot released, a replica turned
        master (its data flushed); hard: a new name and epochs back to 0."""
        me = self.myself
        if me.is_replica:
            self.set_node_as_master(me)
            self.host.unset_master()
            self.host.empty_data()
        self.close_all_slots()
        failover.reset_manual(self)
        for j in range(CLUSTER_SLOTS):
            self.del_slot(j)
        for node in list(self.nodes.values()):
            if node is not me:
                self.del_node(node)
        if hard:
            self.current_epoch = 0
            self.last_vote_epoch = 0
            me.config_epoch = 0
            self.log("warning", "configEpoch set to 0 via CLUSTER RESET HARD")
            del self.nodes[me.name]
            me.name = random_name(self.rng)
            self.nodes[me.name] = me
            self.log("notice", f"Node hard reset, now I'm {me.name}")
        self.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG)


def bitmap_slots(bitmap: bytes) -> list[int]:
    """The set bits of a slot bitmap, ascending (a byte at a time: most bytes are 0 or
    0xff)."""
    out: list[int] = []
    for i, b in enumerate(bitmap):
        if b == 0:
            continue
        base = i << 3
        if b == 0xFF:
            out.extend(range(base, base + 8))
        else:
            out.extend(base + j for j in range(8) if b & (1 << j))
    return out


# (the failover half reads this module's names: imported once they exist)
from pyrepl.cluster import failover  # noqa: E402
