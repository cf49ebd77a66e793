"""One node of the cluster as this node sees it (Redis's clusterNode), its flags and its
text form — shared by every part of the cluster state.

Theory of operation: a :class:`ClusterNode` is what this node knows of another (or of itself,
``MYSELF``): its 40-hex-character name, address, flags, the slots it serves (a bitmap, as on
the wire, plus a count), its master or replicas, the epochs and times the failure detector
reads, and the failure reports other masters sent about it. The links to it belong to the
state (``state.py``); the node keeps a reference to each (``link``: the one we opened,
``inbound_link``: the one it opened). :func:`flags_text` and :func:`describe` give the line
``CLUSTER NODES`` prints and ``nodes.conf`` stores, byte for byte as Redis 7.0's
clusterGenNodeDescription writes it.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from pyrepl.cluster.wire import CLUSTER_SLOTS, NAMELEN

if TYPE_CHECKING:
    from collections.abc import Iterator

# cluster.h's CLUSTER_NODE_* flags (the bus carries them as they are)
MASTER = 1
SLAVE = 2
PFAIL = 4
FAIL = 8
MYSELF = 16
HANDSHAKE = 32
NOADDR = 64
MEET = 128
MIGRATE_TO = 256
NOFAILOVER = 512

#: representClusterNodeFlags's table, in its order
FLAG_NAMES = ((MYSELF, "myself"), (MASTER, "master"), (SLAVE, "slave"), (PFAIL, "fail?"),
              (FAIL, "fail"), (HANDSHAKE, "handshake"), (NOADDR, "noaddr"),
              (NOFAILOVER, "nofailover"))
#: clusterLoadConfig's flag words (``noflags``: none)
FLAGS_BY_NAME = {name: flag for flag, name in FLAG_NAMES}

_HEX = "0123456789abcdef"


def random_name(rng: random.Random | None = None) -> str:
    """A new node name: 40 random lowercase hex digits (getRandomHexChars)."""
    r = rng or random
    return "".join(_HEX[r.getrandbits(4)] for _ in range(NAMELEN))


def valid_name(name: str | bytes) -> bool:
    """verifyClusterNodeId: 40 characters, each a-z or 0-9."""
    if isinstance(name, bytes):
        try:
            name = name.decode("ascii")
        except UnicodeDecodeError:
            return False
    return len(name) == NAMELEN and all("a" <= c <= "z" or "0" <= c <= "9" for c in name)


def flags_text(flags: int) -> str:
    """representClusterNodeFlags: the flag words joined by commas, ``noflags`` for none."""
    words = [name for flag, name in FLAG_NAMES if flags & flag]
    return ",".join(words) if words else "noflags"


class FailReport:
    __slots__ = ("node", "time")

    def __init__(self, node: ClusterNode, time: int) -> None:
        self.node = node
        self.time = time


class ClusterNode:
    """clusterNode. ``slots`` is the bitmap (slot j: bit j % 8 of byte j // 8)."""

    __slots__ = ("name", "ctime", "flags", "config_epoch", "slots", "numslots", "replicas",
                 "master", "last_in_ping_gossip", "ping_sent", "pong_received",
                 "data_received", "fail_time", "voted_time", "repl_offset_time",
                 "orphaned_time", "repl_offset", "ip", "hostname", "port", "pport", "cport",
                 "link", "inbound_link", "fail_reports", "shard_id")

    def __init__(self, name: str, flags: int, now: int) -> None:
        self.name = name
        self.ctime = now
        self.flags = flags
        self.config_epoch = 0
        self.slots = bytearray(CLUSTER_SLOTS // 8)
        self.numslots = 0
        self.replicas: list[ClusterNode] = []
        self.master: ClusterNode | None = None
        self.last_in_ping_gossip = 0
        self.ping_sent = 0
        self.pong_received = 0
        self.data_received = 0
        self.fail_time = 0
        self.voted_time = 0
        self.repl_offset_time = 0
        self.orphaned_time = 0
        self.repl_offset = 0
        self.ip = ""
        self.hostname = ""
        self.port = 0
        self.pport = 0
        self.cport = 0
        self.link: Any = None           # the link we opened to it (state.Link)
        self.inbound_link: Any = None   # the link it opened to us
        self.fail_reports: list[FailReport] = []
        self.shard_id = ""

    def __repr__(self) -> str:
        return f"<ClusterNode {self.name[:8]} {flags_text(self.flags)} {self.ip}:{self.port}>"

    # -- flags ---------------------------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return bool(self.flags & MASTER)

    @property
    def is_replica(self) -> bool:
        return bool(self.flags & SLAVE)

    @property
    def in_handshake(self) -> bool:
        return bool(self.flags & HANDSHAKE)

    @property
    def has_addr(self) -> bool:
        return not self.flags & NOADDR

    @property
    def timed_out(self) -> bool:
        return bool(self.flags & PFAIL)

    @property
    def failed(self) -> bool:
        return bool(self.flags & FAIL)

    @property
    def cant_failover(self) -> bool:
        return bool(self.flags & NOFAILOVER)

    # -- slots ---------------------------------------------------------------------------

    def has_slot(self, slot: int) -> bool:
        return bool(self.slots[slot >> 3] & (1 << (slot & 7)))

    def set_slot_bit(self, slot: int) -> bool:
        """The bit set; its old value."""
        i, bit = slot >> 3, 1 << (slot & 7)
        old = bool(self.slots[i] & bit)
        if not old:
            self.slots[i] |= bit
            self.numslots += 1
        return old

    def clear_slot_bit(self, slot: int) -> bool:
        i, bit = slot >> 3, 1 << (slot & 7)
        old = bool(self.slots[i] & bit)
        if old:
            self.slots[i] &= ~bit
            self.numslots -= 1
        return old

    def slot_list(self) -> Iterator[int]:
        """The slots it serves, ascending (read from the bitmap a byte at a time)."""
        for i, b in enumerate(self.slots):
            if b:
                for j in range(8):
                    if b & (1 << j):
                        yield i * 8 + j

    def slot_ranges(self) -> list[tuple[int, int]]:
        """Its slots as (start, end) runs, ascending."""
        out: list[tuple[int, int]] = []
        for s in self.slot_list():
            if out and out[-1][1] == s - 1:
                out[-1] = (out[-1][0], s)
            else:
                out.append((s, s))
        return out

    # -- replicas ------------------------------------------------------------------------

    def add_replica(self, replica: ClusterNode) -> bool:
        """clusterNodeAddSlave (the master becomes a replica migration target)."""
        if replica in self.replicas:
            return False
        self.replicas.append(replica)
        self.flags |= MIGRATE_TO
        return True

    def remove_replica(self, replica: ClusterNode) -> bool:
        """clusterNodeRemoveSlave."""
        try:
            self.replicas.remove(replica)
        except ValueError:
            return False
        if not self.replicas:
            self.flags &= ~MIGRATE_TO
        return True

    def non_failing_replicas(self) -> int:
        return sum(1 for r in self.replicas if not r.failed)

    # -- failure reports -----------------------------------------------------------------

    def add_failure_report(self, sender: ClusterNode, now: int) -> bool:
        """A report from ``sender`` (its time refreshed if there is one); True if new."""
        for fr in self.fail_reports:
            if fr.node is sender:
                fr.time = now
                return False
        self.fail_reports.append(FailReport(sender, now))
        return True

    def cleanup_failure_reports(self, now: int, max_age: int) -> None:
        self.fail_reports = [fr for fr in self.fail_reports if now - fr.time <= max_age]

    def del_failure_report(self, sender: ClusterNode, now: int, max_age: int) -> bool:
        for i, fr in enumerate(self.fail_reports):
            if fr.node is sender:
                del self.fail_reports[i]
                self.cleanup_failure_reports(now, max_age)
                return True
        return False

    def failure_reports_count(self, now: int, max_age: int) -> int:
        self.cleanup_failure_reports(now, max_age)
        return len(self.fail_reports)


def describe(node: ClusterNode, ranges: list[tuple[int, int]] | None = None,
             use_pport: bool = False, open_slots: str = "") -> str:
    """clusterGenNodeDescription: one ``CLUSTER NODES`` line, without its newline.
    ``ranges``: the node's slot runs when the caller has them already (from the slot
    table), else read from its bitmap; ``open_slots``: the migrating/importing part
    (``myself`` only)."""
    port = node.pport if use_pport and node.pport else node.port
    addr = f"{node.ip}:{port}@{node.cport}"
    if node.hostname:
        addr += "," + node.hostname
    master = node.master.name if node.master is not None else "-"
    epoch = node.config_epoch
    if node.is_replica and node.master is not None:
        epoch = node.master.config_epoch
    connected = "connected" if node.link is not None or node.flags & MYSELF else \
        "disconnected"
    parts = [node.name, addr, flags_text(node.flags), master, str(node.ping_sent),
             str(node.pong_received), str(epoch), connected]
    if ranges is None:
        ranges = node.slot_ranges() if node.numslots else []
    parts.extend(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
    line = " ".join(parts)
    return line + open_slots if open_slots else line
