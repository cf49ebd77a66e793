"""What changed in this node's own slots, as ``cluster_slots`` sync events (issue 42).

Theory of operation: every change to the slot table, to a node's slots or to the migrating /
importing marks makes ``nodes.conf`` due (``TODO_SAVE_CONFIG``), so the state's before-sleep
hands the table to :meth:`SlotWatch.look` whenever it saves: the watch compares this node's
slot bitmap and its two marks with what it saw last, and reports the difference, grouped by
the other node (the slots' previous owner for slots gained, the new one for slots lost, the
other end of a migration), as ``(result, slots, other node)``; then it keeps a copy of the
slot table (a list of 16,384 references: tens of microseconds) for the next look. Sans-io: the
state turns each change into an event through its host.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyrepl.cluster.node import ClusterNode

Change = tuple[str, str, Any]     # (result, slot ranges, the other node or None)


def ranges_text(slots: Iterable[int]) -> str:
    """Sorted slots as ranges: ``0-5460,5462``."""
    out: list[str] = []
    start = prev = -2
    for j in sorted(slots):
        if j != prev + 1:
            if start >= 0:
                out.append(str(start) if start == prev else f"{start}-{prev}")
            start = j
        prev = j
    if start >= 0:
        out.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(out)


class SlotWatch:
    """This node's slots and marks as last seen."""

    def __init__(self) -> None:
        self.mine = b""
        self.owners: list[Any] = []
        self.migrating: dict[int, Any] = {}
        self.importing: dict[int, Any] = {}
        self.primed = False

    def look(self, me: ClusterNode, owners: Sequence[ClusterNode | None],
             migrating: dict[int, ClusterNode], importing: dict[int, ClusterNode]
             ) -> list[Change]:
        """The changes since the last look; at the first (the node's start, its slots from
        nodes.conf), the slots it owns, if any, as ``owned``."""
        changes: list[Change] = []
        mine = bytes(me.slots)
        if not self.primed and me.numslots:
            changes.append(("owned", ranges_text(me.slot_list()), None))
        if self.primed:
            if mine != self.mine:
                gained: dict[Any, list[int]] = {}
                lost: dict[Any, list[int]] = {}
                for j in _differing_bits(self.mine, mine):
                    if owners[j] is me:
                        gained.setdefault(self.owners[j], []).append(j)
                    else:
                        lost.setdefault(owners[j], []).append(j)
                changes += [("gained", ranges_text(s), n) for n, s in gained.items()]
                changes += [("lost", ranges_text(s), n) for n, s in lost.items()]
            changes += _marks("migrating", self.migrating, migrating)
            changes += _marks("importing", self.importing, importing)
            stable: dict[Any, list[int]] = {}      # marks gone, neither kind left
            for j, n in (*self.migrating.items(), *self.importing.items()):
                if j not in migrating and j not in importing:
                    stable.setdefault(n, []).append(j)
            changes += [("stable", ranges_text(s), n) for n, s in stable.items()]
        self.primed = True
        self.mine = mine
        self.owners = list(owners)
        self.migrating = dict(migrating)
        self.importing = dict(importing)
        return changes


def _marks(result: str, before: dict[int, Any], now: dict[int, Any]) -> list[Change]:
    added: dict[Any, list[int]] = {}
    for j, n in now.items():
        if before.get(j) is not n:
            added.setdefault(n, []).append(j)
    return [(result, ranges_text(s), n) for n, s in added.items()]


def _differing_bits(a: bytes, b: bytes) -> Iterable[int]:
    """The slots whose bit differs (Redis's bitmap: slot j is bit j & 7 of byte j >> 3)."""
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        d = x ^ y
        while d:
            low = d & -d
            yield i * 8 + low.bit_length() - 1
            d ^= low
