"""Replication ids and offsets (shared by both sides).

Theory of operation — Redis's names and invariants:

* ``replid`` identifies the current history; ``master_repl_offset`` is the offset of the last
  byte of that history (0 before anything was written; the first byte has offset 1).
* ``replid2`` / ``second_repl_offset``: the previous history this node followed and the first
  offset that is *not* part of it. A PSYNC naming ``replid2`` is valid only for offsets
  ``<= second_repl_offset`` (the shared prefix of both histories).
* :meth:`shift` is what a promotion (``REPLICAOF NO ONE``) or a ``+CONTINUE <newid>`` does:
  ``replid2 := replid``, ``second_repl_offset := master_repl_offset + 1``, new ``replid``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

NULL_REPLID = "0" * 40


def new_replid() -> str:
    """40 random hex characters, as Redis's ``changeReplicationId``."""
    return os.urandom(20).hex()


@dataclass
class ReplIds:
    replid: str
    replid2: str = NULL_REPLID
    second_repl_offset: int = -1

    @classmethod
    def fresh(cls) -> ReplIds:
        return cls(new_replid())

    def change(self) -> None:
        """A new history with no shared prefix (e.g. the backlog was created)."""
        self.replid = new_replid()

    def clear_secondary(self) -> None:
        self.replid2 = NULL_REPLID
        self.second_repl_offset = -1

    def shift(self, master_repl_offset: int, new_id: str | None = None) -> None:
        """Keep the current id as the secondary one, valid up to ``master_repl_offset``."""
        self.replid2 = self.replid
        self.second_repl_offset = master_repl_offset + 1
        self.replid = new_id or new_replid()

    def accepts(self, replid: str, offset: int) -> bool:
        """Is ``(replid, offset)`` part of this node's history (ignoring the backlog range)?"""
        if replid.lower() == self.replid:
            return True
        return replid.lower() == self.replid2 and self.replid2 != NULL_REPLID \
            and offset <= self.second_repl_offset
