"""Backlog ring buffer against a reference model, ids shifting, and the PSYNC decision table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.replication.backlog import Backlog, BacklogRangeError
from pyrepl.replication.ids import NULL_REPLID, ReplIds
from pyrepl.replication.psync import decide


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 64), start=st.integers(0, 1000),
       ops=st.lists(st.one_of(st.binary(min_size=0, max_size=100).map(lambda b: ("w", b)),
                              st.integers(1, 64).map(lambda n: ("r", n))), max_size=40))
def test_backlog_matches_reference_model(size: int, start: int, ops: list) -> None:
    b = Backlog(size, master_repl_offset=start)
    stream = b""  # everything appended, first byte at absolute offset start + 1
    for kind, arg in ops:
        if kind == "w":
            b.append(arg)
            stream += arg
        else:
            b.resize(arg)
            size = arg
        total = start + len(stream)
        kept = min(len(stream), size, b.histlen)
        assert b.master_repl_offset == total
        assert b.histlen == min(b.histlen, size)
        assert b.first_byte_offset == total - b.histlen + 1
        # every servable offset yields exactly the tail of the stream
        for off in range(b.first_byte_offset, total + 2):
            got = b"".join(b.read_from(off))
            assert got == stream[off - start - 1:] if off - start - 1 < len(stream) else got == b""
        assert kept == b.histlen
        with pytest.raises(BacklogRangeError):
            b.read_from(b.first_byte_offset - 1)
        with pytest.raises(BacklogRangeError):
            b.read_from(total + 2)


def test_backlog_keeps_newest_history_on_shrink_and_grow() -> None:
    b = Backlog(10)
    b.append(b"0123456789abc")
    assert b.first_byte_offset == 4 and b.master_repl_offset == 13
    b.resize(4)
    assert b"".join(b.read_from(10)) == b"9abc"
    b.resize(100)
    b.append(b"XYZ")
    assert b"".join(b.read_from(10)) == b"9abcXYZ"
    assert b.first_byte_offset == 10


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
    b = Backlog(histlen, master_repl_offset=offset - 200)
    b.append(b"x" * 200)
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
    d = decide(replid, offset, ids, b, b.master_repl_offset)
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
