"""The slots this node serves without a look at its keys: the table the core's fast paths read
(shared helper: the cluster state keeps it, pyrepl/core reads it).

Theory of operation: getNodeByQuery (pyrepl/cluster/redirect.py) answers "run it here" with
no other side effect for a command whose keys all hash to one slot S when the cluster is OK,
S is myself's and S is neither migrating nor importing (those two ask whether the keys
exist: the Python decides them). ``ServedSlots.table`` is a 16,384-byte bytearray whose byte
S is 1 exactly then: a C fast path (pyrepl/_dispatch.c, pyrepl/_plainrun.c, through
``core.served_slots``) hashes the keys, reads one byte and runs the command, and leaves every
other case (a 0, keys of two slots, a client with ASKING or READONLY) to the Python redirect.

The table must never say 1 where the redirect would not answer "here", from the moment the
state changes: so it is not rebuilt from time to time but kept by the writes themselves. The
state's three slot structures are the tracked containers below (``slots`` a list whose item
assignment, ``migrating`` and ``importing`` dicts whose every mutation, updates the slot's
byte), and ``state`` a property whose setter copies or clears the whole table. ``myself``
changes identity only when nodes.conf is loaded (pyrepl/cluster/nodes_conf.py), before the core
reads the table; ``rebuild`` recomputes it all after that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pyrepl.cluster.wire import CLUSTER_SLOTS

if TYPE_CHECKING:
    from pyrepl.cluster.node import ClusterNode
    from pyrepl.cluster.state import ClusterState

_OK = 0   # (pyrepl.cluster.state.OK)
_NONE = bytes(CLUSTER_SLOTS)


class ServedSlots:
    """``table``: byte S is 1 iff the cluster is OK, S is myself's and not migrating or
    importing. ``mine``: the same without the cluster's state."""

    def __init__(self, st: ClusterState) -> None:
        self.st = st
        self.table = bytearray(CLUSTER_SLOTS)
        self.mine = bytearray(CLUSTER_SLOTS)

    def slot_changed(self, slot: int) -> None:
        st = self.st
        here = st.slots[slot] is st.myself and slot not in st.migrating and \
            slot not in st.importing
        self.mine[slot] = here
        if st.state == _OK:
            self.table[slot] = here

    def state_changed(self, state: int) -> None:
        self.table[:] = self.mine if state == _OK else _NONE

    def rebuild(self) -> None:
        """Every slot recomputed (after ``myself`` changed: nodes.conf loaded)."""
        st = self.st
        me, migrating, importing = st.myself, st.migrating, st.importing
        self.mine[:] = bytes(n is me and j not in migrating and j not in importing
                             for j, n in enumerate(st.slots))
        self.state_changed(st.state)


class SlotList(list["ClusterNode | None"]):
    """The slot -> owner table: an item assignment updates the slot's byte."""

    __slots__ = ("_changed",)

    def __init__(self, items: Iterable[ClusterNode | None], changed: Callable[[int], None]
                 ) -> None:
        super().__init__(items)
        self._changed = changed

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        if isinstance(index, slice):
            for j in range(*index.indices(len(self))):
                self._changed(j)
        else:
            self._changed(index if index >= 0 else index + len(self))

    def __delitem__(self, index: Any) -> None:
        raise TypeError("the slot table has a fixed length")


class SlotMap(dict[int, "ClusterNode"]):
    """migrating / importing (slot -> the other node): every mutation updates the slot's
    byte."""

    __slots__ = ("_changed",)

    def __init__(self, changed: Callable[[int], None]) -> None:
        super().__init__()
        self._changed = changed

    def __setitem__(self, slot: int, node: ClusterNode) -> None:
        super().__setitem__(slot, node)
        self._changed(slot)

    def __delitem__(self, slot: int) -> None:
        super().__delitem__(slot)
        self._changed(slot)

    def pop(self, slot: int, *default: Any) -> Any:   # type: ignore[override]
        had = slot in self
        value = super().pop(slot, *default)
        if had:
            self._changed(slot)
        return value

    def popitem(self) -> tuple[int, ClusterNode]:
        slot, node = super().popitem()
        self._changed(slot)
        return slot, node

    def setdefault(self, slot: int, node: ClusterNode) -> ClusterNode:  # type: ignore[override]
        if slot not in self:
            self[slot] = node
        return self[slot]

    def clear(self) -> None:
        slots = list(self)
        super().clear()
        for j in slots:
            self._changed(j)

    def update(self, *args: Any, **kw: Any) -> None:
        for slot, node in dict(*args, **kw).items():
            self[slot] = node

    def __ior__(self, other: Any) -> SlotMap:   # type: ignore[override,misc]
        self.update(other)
        return self


__all__ = ["ServedSlots", "SlotList", "SlotMap"]
