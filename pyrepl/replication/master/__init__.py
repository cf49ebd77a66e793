"""The master side: replica links, full and partial syncs, streaming, acks, WAIT, limits (master
side). See ``side.py`` for the theory of operation; the package's modules hold its parts."""

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
