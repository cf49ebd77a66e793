"""The master side: replica links, full and partial syncs, streaming, acks, WAIT, limits (master
side). See ``side.py`` for the theory of operation: :class:`MasterSide` keeps the links and is
composed of one object per phase (``feeding``, ``snapshots``, ``acks``, ``sync``), each in its
module; ``states.py`` holds a link's states, their one table and the guards."""

from __future__ import annotations

from pyrepl.replication.master.side import MasterSide
from pyrepl.replication.master.states import (
    INFO_STATE,
    TRANSITIONS,
    LinkInput,
    LinkStateError,
    ReplicaLink,
    SlaveState,
    Snapshot,
)

__all__ = ["INFO_STATE", "TRANSITIONS", "LinkInput", "LinkStateError", "MasterSide",
           "ReplicaLink", "SlaveState", "Snapshot"]
