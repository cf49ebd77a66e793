"""The replica side: follow a master (replica side). See ``side.py`` for the theory of operation;
the package's modules hold its phases."""

from __future__ import annotations

from pyrepl.replication.replica.side import ReplicaSide
from pyrepl.replication.replica.states import (
    TRANSITIONS,
    Input,
    ReplProtocolError,
    ReplState,
)
from pyrepl.replication.replica.stream import MasterState

__all__ = ["TRANSITIONS", "Input", "MasterState", "ReplProtocolError", "ReplState", "ReplicaSide"]
