"""``nodes.conf`` and ``CLUSTER NODES``: the node table as text, and back — shared.

Theory of operation: both are Redis 7.0's clusterGenNodesDescription, one line a node (its
name, ``ip:port@cport[,hostname]``, flags, master or ``-``, ping sent, pong received, config
epoch, link state, slots; ``myself``'s line also lists its open slots as
``[slot->-node]`` / ``[slot-<-node]``); the file adds ``vars currentEpoch N lastVoteEpoch
N`` and leaves out nodes still in handshake. :func:`load` reads a file back into a fresh
state exactly as clusterLoadConfig does, refusing anything it cannot read with Redis's own
words (:class:`NodesConfError`); writing the file atomically is the shell's (the host's
``save_config``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from pyrepl.cluster.node import FLAGS_BY_NAME, HANDSHAKE, MYSELF, ClusterNode, describe, valid_name
from pyrepl.cluster.wire import CLUSTER_SLOTS

if TYPE_CHECKING:
    from pyrepl.cluster.state import ClusterState

CORRUPTED = "Unrecoverable error: corrupted cluster config file."
UNKNOWN_FLAG = "Unknown flag in redis cluster config file"
PORT_INCR = 10000


class NodesConfError(Exception):
    """A nodes.conf the server must not start with (Redis logs it and exits)."""


class _Runs:
    """The slot table's runs per node, as of one table (``key``: its owners' ids; ``table``
    holds the owners, so that no id is reused while the entry lives) and their text."""

    __slots__ = ("key", "table", "runs", "texts")

    def __init__(self, key: list[int], table: tuple[ClusterNode | None, ...]) -> None:
        self.key = key
        self.table = table
        self.runs: dict[ClusterNode, list[tuple[int, int]]] = {}
        self.texts: dict[ClusterNode, str] = {}

    def text(self, node: ClusterNode) -> str:
        """The node's runs as CLUSTER NODES writes them (``0-5 7 ...``)."""
        t = self.texts.get(node)
        if t is None:
            t = self.texts[node] = " ".join(str(a) if a == b else f"{a}-{b}"
                                            for a, b in self.runs.get(node, ()))
        return t


_CACHE: weakref.WeakKeyDictionary[ClusterState, _Runs] = weakref.WeakKeyDictionary()


def _runs(st: ClusterState) -> _Runs:
    """Every node's slot runs from the slot table in one pass (clusterGenNodesSlotsInfo),
    kept until the table changes: a 20-node cluster asks for nodes.conf and CLUSTER NODES
    many times a second, and a table of single-slot runs (Redis's cluster tests allocate
    slots at random) takes milliseconds to walk and write in Python."""
    key = list(map(id, st.slots))
    hit = _CACHE.get(st)
    if hit is not None and hit.key == key:
        return hit
    out = _CACHE[st] = _Runs(key, tuple(st.slots))
    runs = out.runs
    start = 0
    owner = st.slots[0]
    for j in range(1, CLUSTER_SLOTS + 1):
        n = st.slots[j] if j < CLUSTER_SLOTS else None
        if j == CLUSTER_SLOTS or n is not owner:
            if owner is not None:
                runs.setdefault(owner, []).append((start, j - 1))
            owner, start = n, j
    return out


def slot_runs(st: ClusterState) -> dict[str, list[tuple[int, int]]]:
    """Every node's slot runs, by name."""
    return {node.name: list(rs) for node, rs in _runs(st).runs.items()}


def open_slots(st: ClusterState) -> str:
    out = []
    for j in sorted(set(st.migrating) | set(st.importing)):
        if j in st.migrating:
            out.append(f" [{j}->-{st.migrating[j].name}]")
        else:
            out.append(f" [{j}-<-{st.importing[j].name}]")
    return "".join(out)


def describe_all(st: ClusterState, filter_flags: int = 0, use_pport: bool = False) -> str:
    """clusterGenNodesDescription: the lines of every node without any of ``filter_flags``,
    each ending with a newline."""
    runs = _runs(st)
    lines = []
    for node in st.nodes.values():
        if node.flags & filter_flags:
            continue
        extra = open_slots(st) if node.flags & MYSELF else ""
        slots = runs.text(node)
        lines.append(describe(node, [], use_pport) + (" " + slots if slots else "") +
                     extra + "\n")
    return "".join(lines)


def render(st: ClusterState) -> str:
    """The whole nodes.conf (clusterSaveConfig's content)."""
    return describe_all(st, HANDSHAKE) + \
        f"vars currentEpoch {st.current_epoch} lastVoteEpoch {st.last_vote_epoch}\n"


def _split(line: str) -> list[str]:
    """sdssplitargs for nodes.conf's words (nothing there is quoted)."""
    if '"' in line or "'" in line:
        raise NodesConfError(CORRUPTED)
    return line.split()


def load(text: str, st: ClusterState, now: int) -> bool:
    """clusterLoadConfig into ``st`` (whose node table holds only its provisional
    ``myself``): False for an empty file (a new node), True once loaded."""
    if not text:
        return False
    provisional = st.myself
    del st.nodes[provisional.name]
    myself: ClusterNode | None = None

    def node_named(name: str) -> ClusterNode:
        if not valid_name(name):
            raise NodesConfError(CORRUPTED)
        n = st.nodes.get(name)
        if n is None:
            n = ClusterNode(name, 0, now)
            st.nodes[name] = n
        return n

    for raw in text.split("\n"):
        if not raw or raw == "\r":
            continue
        argv = _split(raw)
        if not argv:
            continue
        if argv[0].lower() == "vars":
            if len(argv) % 2 == 0:
                raise NodesConfError(CORRUPTED)
            for k, v in zip(argv[1::2], argv[2::2], strict=True):
                if k.lower() == "currentepoch":
                    st.current_epoch = _ull(v)
                elif k.lower() == "lastvoteepoch":
                    st.last_vote_epoch = _ull(v)
                else:
                    st.log("warning", f"Skipping unknown cluster config variable '{k}'")
            continue
        if len(argv) < 8:
            raise NodesConfError(CORRUPTED)
        n = node_named(argv[0])
        addr, _, hostname = argv[1].partition(",")
        n.hostname = hostname
        ip, sep, ports = addr.rpartition(":")
        if not sep:
            raise NodesConfError(CORRUPTED)
        n.ip = ip
        port, _, busport = ports.partition("@")
        n.port = _atoi(port)
        n.cport = _atoi(busport) if busport else n.port + PORT_INCR
        for word in argv[2].split(","):
            w = word.lower()
            if w == "myself":
                if myself is not None:
                    raise NodesConfError(CORRUPTED)
                myself = n
                n.flags |= MYSELF
            elif w == "fail":
                n.flags |= FLAGS_BY_NAME["fail"]
                n.fail_time = now
            elif w in FLAGS_BY_NAME:
                n.flags |= FLAGS_BY_NAME[w]
            elif w != "noflags":
                raise NodesConfError(UNKNOWN_FLAG)
        if argv[3][0] != "-":
            master = node_named(argv[3])
            n.master = master
            master.add_replica(n)
        if _atoi(argv[4]):
            n.ping_sent = now
        if _atoi(argv[5]):
            n.pong_received = now
        n.config_epoch = 0 if n.is_replica and n.master is not None else _ull(argv[6])
        for word in argv[8:]:
            if word.startswith("["):
                slot_s, dash, rest = word[1:].partition("-")
                if not dash or len(rest) < 2:
                    raise NodesConfError(CORRUPTED)
                direction = rest[0]
                slot = _atoi(slot_s)
                if not 0 <= slot < CLUSTER_SLOTS:
                    raise NodesConfError(CORRUPTED)
                name, close, _ = rest[2:].partition("]")
                if not close:
                    raise NodesConfError(CORRUPTED)
                other = node_named(name)
                if direction == ">":
                    st.migrating[slot] = other
                else:
                    st.importing[slot] = other
                continue
            a, dash, b = word.partition("-")
            start = _atoi(a)
            stop = _atoi(b) if dash else start
            if not (0 <= start < CLUSTER_SLOTS and 0 <= stop < CLUSTER_SLOTS):
                raise NodesConfError(CORRUPTED)
            for j in range(start, stop + 1):
                st.add_slot(n, j)
    if myself is None:
        raise NodesConfError(CORRUPTED)
    st.myself = myself
    st.log("notice", f"Node configuration loaded, I'm {myself.name}")
    if st.max_epoch() > st.current_epoch:
        st.current_epoch = st.max_epoch()
    return True


def _atoi(s: str) -> int:
    """C's atoi: leading digits (with a sign), 0 when there are none."""
    i = 0
    if s[:1] in ("-", "+"):
        i = 1
    j = i
    while j < len(s) and s[j].isdigit():
        j += 1
    if j == i:
        return 0
    return int(s[:j])


def _ull(s: str) -> int:
    """strtoull(s, NULL, 10): leading digits, 0 when none."""
    v = _atoi(s.lstrip())
    return v % (1 << 64)
