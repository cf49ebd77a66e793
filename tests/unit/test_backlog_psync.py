"""Replication ids shifting, and the PSYNC decision table (the backlog itself:
test_backlog_stateful.py)."""

from __future__ import annotations

import pytest

from pyrepl.replication.backlog import Backlog
from pyrepl.replication.ids import NULL_REPLID, ReplIds
from pyrepl.replication.psync import decide


def test_ids_shift_keeps_previous_history_valid_up_to_switch_point() -> None:
    ids = ReplIds("a" * 40)
    ids.shift(100, "b" * 40)
    assert (ids.replid, ids.replid2, ids.second_repl_offset) == ("b" * 40, "a" * 40, 101)
    assert ids.accepts("a" * 40, 101) and not ids.accepts("a" * 40, 102)
    assert ids.accepts("b" * 40, 5000)
    ids.clear_secondary()
    assert ids.replid2 == NULL_REPLID and ids.second_repl_offset == -1


def make(histlen: int = 100, offset: int = 1000) -> tuple[ReplIds, Backlog]:
    ids = ReplIds("a" * 40)
    b = Backlog(1 << 20, offset - histlen)
    b.append(b"x" * histlen)
    return ids, b


@pytest.mark.parametrize("replid,offset,partial,reason,gap", [
    ("?", -1, False, "no-history", 0),
    ("?", 5, False, "replica-requested", 0),
    ("c" * 40, 950, False, "replid-mismatch", 0),
    ("a" * 40, 901, True, "continue", 0),     # first byte in the backlog
    ("a" * 40, 1001, True, "continue", 0),    # nothing missing
    ("A" * 40, 1000, True, "continue", 0),    # ids compare case-insensitively, as Redis
    ("a" * 40, 900, False, "offset-before-backlog", 1),
    ("a" * 40, 500, False, "offset-before-backlog", 401),
    ("a" * 40, 1002, False, "offset-ahead", 0),
])
def test_psync_decision_table(replid: str, offset: int, partial: bool, reason: str,
                              gap: int) -> None:
    ids, b = make()
    assert b.last_byte_offset == 1000   # (the stream's master_repl_offset)
    d = decide(replid, offset, ids, b, 1000)
    assert (d.partial, d.reason, d.gap) == (partial, reason, gap)


def test_psync_replid2_valid_only_up_to_second_offset() -> None:
    ids, b = make()
    ids.shift(950, "b" * 40)  # history switched after offset 950
    assert decide("a" * 40, 951, ids, b, 1000).partial
    d = decide("a" * 40, 952, ids, b, 1000)
    assert not d.partial and d.reason == "replid-mismatch"
    assert decide("b" * 40, 1001, ids, b, 1000).partial


def test_psync_without_backlog() -> None:
    ids = ReplIds("a" * 40)
    d = decide("a" * 40, 1, ids, None, 0)
    assert not d.partial and d.reason == "backlog-inactive"
