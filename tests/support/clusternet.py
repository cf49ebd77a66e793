"""Cluster states wired together in memory, on a fake clock: the bus without sockets.

``ClusterNet`` holds several :class:`~pyrepl.cluster.state.ClusterState`, each at an address
(127.0.0.<i>, client port 7000+i, bus port 17000+i), and plays the I/O shell's part: it opens
the links a state asks for (to the state at that address, if it is up and reachable), moves
the bytes both ways, closes what either side closes, and runs each state's cron 10 times a
simulated second and its before_sleep after each delivery. ``partition`` / ``heal`` cut and
restore reachability; ``kill`` / ``revive`` stop a node answering. ``FakeClusterHost`` is the
one fake of the ``ClusterHost`` port: it records what the state asked of the server.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pyrepl.cluster.link import Link
from pyrepl.cluster.ports import ClusterSettings
from pyrepl.cluster.state import ClusterState
from pyrepl.events import SyncEventLog


@dataclass
class FakeClusterHost:
    offset: int = 0
    data_age_ms: int = 0
    keys: dict[int, int] = field(default_factory=dict)        # slot -> key count
    master: tuple[str, int] | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)
    paused_until: int = 0
    published: list[tuple[bytes, bytes, bool]] = field(default_factory=list)
    subs: int = 1
    saved: list[str] = field(default_factory=list)
    emptied: int = 0

    events: SyncEventLog = field(default_factory=SyncEventLog)
    now_ms: int = 0

    def log(self, level: str, message: str) -> None:
        self.logs.append((level, message))

    def event(self, name: str, **fields: Any) -> None:
        """Checked against the schema as the server's event log checks it."""
        self.events.emit(self.now_ms, name, fields.pop("role"), **fields)

    def emitted(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events.recent if e["event"] == name]

    def repl_offset(self) -> int:
        return self.offset

    def replica_data_age_ms(self) -> int:
        return self.data_age_ms

    def following(self) -> bool:
        return self.master is not None

    def count_keys_in_slot(self, slot: int) -> int:
        return self.keys.get(slot, 0)

    def del_keys_in_slot(self, slot: int) -> int:
        return self.keys.pop(slot, 0)

    def set_master(self, ip: str, port: int) -> None:
        self.master = (ip, port)

    def unset_master(self) -> None:
        self.master = None

    def empty_data(self) -> None:
        self.emptied += 1
        self.keys.clear()

    def pause_writes(self, until_ms: int) -> None:
        self.paused_until = until_ms

    def unpause_writes(self) -> None:
        self.paused_until = 0

    def publish(self, channel: bytes, message: bytes, sharded: bool) -> None:
        self.published.append((channel, message, sharded))

    def subscriptions(self, sharded: bool) -> int:
        return self.subs

    def remove_channels_in_slot(self, slot: int) -> None:
        pass

    def save_config(self, text: str, fsync: bool) -> bool:
        self.saved.append(text)
        return True

    def logged(self, text: str) -> bool:
        return any(text in m for _, m in self.logs)


class ClusterNet:
    def __init__(self, n: int, node_timeout: int = 2000, seed: int = 1) -> None:
        self.now = 1_700_000_000_000
        self.hosts = [FakeClusterHost() for _ in range(n)]
        self.states: list[ClusterState] = []
        for i in range(n):
            cfg = ClusterSettings(node_timeout=node_timeout, port=7000 + i, cport=17000 + i)
            st = ClusterState(self.hosts[i], cfg, self.now, random.Random(seed * 1000 + i))
            self.states.append(st)
        self.down: set[int] = set()
        self.groups: list[set[int]] | None = None        # a partition: who reaches whom
        self.pairs: dict[Link, tuple[int, Link]] = {}     # link -> (its peer's index, peer link)
        self.owner: dict[Link, int] = {}

    def ip(self, i: int) -> str:
        return f"127.0.0.{i + 1}"

    def index_of(self, ip: str, cport: int) -> int | None:
        for i in range(len(self.states)):
            if self.ip(i) == ip and 17000 + i == cport:
                return i
        return None

    def reachable(self, a: int, b: int) -> bool:
        if a in self.down or b in self.down:
            return False
        if self.groups is None:
            return True
        return any(a in g and b in g for g in self.groups)

    def meet(self, a: int, b: int) -> None:
        """CLUSTER MEET on node a about node b."""
        assert self.states[a].start_handshake(self.ip(b), 7000 + b, 17000 + b) == ""

    # -- the shell's moves -----------------------------------------------------------------

    def _open_links(self) -> None:
        for i, st in enumerate(self.states):
            if i in self.down:
                continue
            for link in st.links_to_open():
                node = link.node
                j = self.index_of(node.ip, node.cport) if node is not None else None
                if j is None or not self.reachable(i, j):
                    st.link_failed(link, "Connection refused")
                    continue
                peer = self.states[j].accept(self.ip(i), self.ip(j))
                self.pairs[link] = (j, peer)
                self.pairs[peer] = (i, link)
                self.owner[link], self.owner[peer] = i, j
                st.link_connected(link, self.ip(i))

    def _close(self, i: int, link: Link) -> None:
        peer = self.pairs.pop(link, None)
        self.owner.pop(link, None)
        if not link.closed or link in self.states[i].links:
            self.states[i].link_closed(link)
        if peer is not None:
            j, plink = peer
            self.pairs.pop(plink, None)
            self.owner.pop(plink, None)
            self.states[j].link_closed(plink)

    def _deliver(self) -> bool:
        moved = False
        for link, (j, peer) in list(self.pairs.items()):
            i = self.owner.get(link)
            if i is None:
                continue
            if link.closed or link not in self.states[i].links:
                self._close(i, link)
                moved = True
                continue
            data = link.data_to_send()
            if not data:
                continue
            moved = True
            if not self.reachable(i, j):
                continue        # lost in the partition (the link stays up, like TCP)
            if peer.closed:
                continue
            self.states[j].receive(peer, data)
            self.states[j].before_sleep(self.now)
        return moved

    def settle(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            self._open_links()
            if not self._deliver():
                break

    def step(self, ms: int = 100) -> None:
        """``ms`` of time: each state's cron every 100 ms, the bytes delivered."""
        for _ in range(max(1, ms // 100)):
            self.now += 100
            for h in self.hosts:
                h.now_ms = self.now
            for i, st in enumerate(self.states):
                if i not in self.down:
                    st.cron(self.now)
                    st.before_sleep(self.now)
            self.settle()

    def run_until(self, cond, limit_ms: int = 60_000) -> int:  # type: ignore[no-untyped-def]
        """Step until ``cond()``; the simulated ms it took (AssertionError past the limit)."""
        t0 = self.now
        while not cond():
            assert self.now - t0 < limit_ms, "condition not reached in simulated time"
            self.step()
        return self.now - t0

    # -- faults ----------------------------------------------------------------------------

    def kill(self, i: int) -> None:
        self.down.add(i)
        for link, (j, _peer) in list(self.pairs.items()):
            if self.owner.get(link) == i or j == i:
                owner = self.owner.get(link)
                if owner is not None and owner != i:
                    self._close(owner, link)

    def revive(self, i: int) -> None:
        self.down.discard(i)

    def partition(self, *groups: set[int]) -> None:
        self.groups = [set(g) for g in groups]

    def heal(self) -> None:
        self.groups = None
