"""The master's PSYNC decision: a pure function from the request and the master's state to
the answer and a reason code (master side).

Theory of operation (Redis's ``masterTryPartialResynchronization``): a partial resync needs

1. an id the master knows: its ``replid``, or its ``replid2`` with
   ``offset <= second_repl_offset``;
2. a backlog holding the requested offset: ``first_byte_offset <= offset <=
   master_repl_offset + 1``.

Every full sync carries one reason code (the sync-event schema and the analytics use them):

==========================  =======================================================
reason                      when
==========================  =======================================================
``no-history``              ``PSYNC ? -1``: the replica has no data to continue from
``replica-requested``       ``PSYNC ? <n>`` with n != -1, or the old ``SYNC`` command
``replid-mismatch``         the id is neither replid nor (valid) replid2
``backlog-inactive``        the id matches but the master has no backlog
``offset-before-backlog``   the offset was already dropped (``gap`` = bytes missing)
``offset-ahead``            the offset is past ``master_repl_offset + 1``
==========================  =======================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from pyrepl.replication.backlog import Backlog
from pyrepl.replication.ids import ReplIds

CONTINUE = "continue"
NO_HISTORY = "no-history"
REPLICA_REQUESTED = "replica-requested"
REPLID_MISMATCH = "replid-mismatch"
BACKLOG_INACTIVE = "backlog-inactive"
OFFSET_BEFORE_BACKLOG = "offset-before-backlog"
OFFSET_AHEAD = "offset-ahead"
# A full sync forced by a limit or an error after the decision (the sync-event schema uses
# these too, for the analytics' "full syncs by reason").
OUTPUT_BUFFER_LIMIT = "output-buffer-limit"

FULL_REASONS = (NO_HISTORY, REPLICA_REQUESTED, REPLID_MISMATCH, BACKLOG_INACTIVE,
                OFFSET_BEFORE_BACKLOG, OFFSET_AHEAD)


@dataclass(frozen=True)
class PsyncDecision:
    partial: bool
    reason: str
    gap: int = 0  # offset-before-backlog: how many bytes were missing
    detail: str = ""

    @property
    def full(self) -> bool:
        return not self.partial


def decide(replid: str, offset: int, ids: ReplIds, backlog: Backlog | None,
           master_repl_offset: int) -> PsyncDecision:
    """Decide ``PSYNC <replid> <offset>`` (offset = the first byte the replica needs)."""
    if replid == "?":
        if offset == -1:
            return PsyncDecision(False, NO_HISTORY, detail="replica has no history")
        return PsyncDecision(False, REPLICA_REQUESTED, detail="full resync requested")
    rid = replid.lower()
    if rid != ids.replid:
        if rid == ids.replid2 and ids.replid2 != "0" * 40:
            if offset > ids.second_repl_offset:
                return PsyncDecision(
                    False, REPLID_MISMATCH,
                    detail=f"requested offset for second ID was {offset}, but I can reply up "
                           f"to {ids.second_repl_offset}")
        else:
            return PsyncDecision(
                False, REPLID_MISMATCH,
                detail=f"replica asked for '{replid}', my replication IDs are "
                       f"'{ids.replid}' and '{ids.replid2}'")
    if backlog is None:
        return PsyncDecision(False, BACKLOG_INACTIVE, detail="no backlog")
    first = backlog.first_byte_offset
    if offset < first:
        return PsyncDecision(False, OFFSET_BEFORE_BACKLOG, gap=first - offset,
                             detail=f"offset {offset} is {first - offset} bytes before the "
                                    f"backlog's first byte {first}")
    if offset > master_repl_offset + 1:
        return PsyncDecision(False, OFFSET_AHEAD,
                             detail=f"offset {offset} is past master_repl_offset "
                                    f"{master_repl_offset} + 1")
    return PsyncDecision(True, CONTINUE)
