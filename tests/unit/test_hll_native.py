"""pyrepl/keyspace/_hll.c against hll.py: the hash's register and count for any element, and a
PFADD's dense adds (the registers, the stale cache flag, what counts as grown)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import hll

_native = native.load("pyrepl.keyspace._hll")
if _native is None:
    pytest.skip(f"compares pyrepl/keyspace/_hll.c with hll.py ({native.WHY_PURE})",
                allow_module_level=True)


@settings(max_examples=2000)
@given(element=st.binary(max_size=40))
def test_pat_len_is_the_references(element: bytes) -> None:
    assert _native.pat_len(element) == hll.pat_len_reference(element)


def _dense(elements: list[bytes]) -> bytes:
    value = hll.new_sparse()
    value = hll.to_dense(value)
    for e in elements:
        value, _ = hll.add(value, e, 3000)
    return bytes(value)


@settings(max_examples=200, deadline=None)
@given(before=st.lists(st.binary(max_size=12), max_size=300),
       added=st.lists(st.binary(max_size=12), max_size=40), start=st.integers(0, 3))
def test_dense_add_is_the_references(before: list[bytes], added: list[bytes], start: int) -> None:
    value = _dense(before)
    argv = [b"PFADD", b"key", *added]
    got = _native.dense_add(value, argv, start)
    assert got == hll.dense_add_reference(value, argv, start)
    if got[1] is not None:   # (the value itself is never written: a copy was)
        assert got[1] != value and value == _dense(before)


@settings(max_examples=200, deadline=None)
@given(before=st.lists(st.binary(max_size=12), max_size=300),
       added=st.lists(st.binary(max_size=12), max_size=40))
def test_dense_add_in_place_grows_the_value_itself(before: list[bytes],
                                                   added: list[bytes]) -> None:
    """With in_place, the registers grow in the string given (its cached hash forgotten), to
    the reference's bytes; nothing grown, it is left as it was."""
    value = _dense(before)
    hash(value)                        # (a hash cached before the change)
    argv = [b"PFADD", b"key", *added]
    want = hll.dense_add_reference(value, argv, 2)
    got = _native.dense_add(value, argv, 2, True)
    assert got[0] == want[0]
    if want[1] is None:
        assert got[1] is None and value == _dense(before)
    else:
        assert got[1] is value and value == want[1]
        assert hash(value) == hash(bytes(bytearray(value)))


def test_dense_add_sets_every_register_as_the_reference() -> None:
    value = _dense([])
    elements = [b"element:%d" % i for i in range(200_000)]   # (every register reached)
    got = _native.dense_add(value, elements, 0)
    assert got == hll.dense_add_reference(value, elements, 0)
    assert got[1] is not None and got[1][15] & 0x80
    assert _native.dense_add(got[1], elements, 0) == (0, None)   # nothing grows twice


def test_a_sparse_or_short_value_is_refused() -> None:
    for bad in (bytes(hll.new_sparse()), _dense([])[:-1]):
        with pytest.raises(ValueError):
            _native.dense_add(bad, [b"x"], 0)


# (registers clustered in a few windows as well as spread, counts mostly 1 or 2: runs split,
# merge into VAL runs of up to 4 and grow long)
_registers = st.one_of(st.integers(0, hll.REGISTERS - 1),
                       st.integers(0, 40), st.integers(8000, 8040),
                       st.integers(hll.REGISTERS - 40, hll.REGISTERS - 1))


@settings(max_examples=300, deadline=None)
@given(sets=st.lists(st.tuples(_registers, st.one_of(st.integers(1, 2), st.integers(1, 36))),
                    max_size=400),
       max_bytes=st.sampled_from([40, 200, 3000, 100000]))
def test_sparse_set_is_the_references(sets: list[tuple[int, int]], max_bytes: int) -> None:
    """Every step of a sparse HLL's life, set by set: the same bytes, the same answer, the
    same promotion to dense (count over 32, or the form over max_bytes) as hll.py's walk."""
    ref = hll.new_sparse()
    got = hll.new_sparse()
    for index, count in sets:
        ref, ref_changed = hll.sparse_set_reference(ref, index, count, max_bytes)
        got, got_changed = hll._sparse_set_native(got, index, count, max_bytes)
        assert (bytes(got), got_changed) == (bytes(ref), ref_changed)
        if ref[4] == hll.DENSE:
            break


def test_sparse_set_refuses_an_invalid_form() -> None:
    short = hll.new_sparse()[:-1]             # (an XZERO cut in half)
    with pytest.raises(hll.CorruptHll):
        hll._sparse_set_native(short, 16383, 1, 3000)
    shy = hll.new_sparse()[:-2]               # (opcodes covering fewer than 16384 registers)
    with pytest.raises(hll.CorruptHll):
        hll._sparse_set_native(shy, 16383, 1, 3000)
    with pytest.raises(hll.CorruptHll):
        hll.sparse_set_reference(shy, 16383, 1, 3000)


def test_pfadd_of_a_sparse_hll_is_the_references() -> None:
    """hll.add (what PFADD runs) over many elements: native and reference give the same HLL
    through the sparse form's whole life and its promotion at hll-sparse-max-bytes."""
    ref = hll.new_sparse()
    got = hll.new_sparse()
    for i in range(4000):
        e = b"member:%d" % (i * 7919 % 100003)
        index, count = hll.pat_len(e)
        ref, _ = (hll.sparse_set_reference(ref, index, count, 3000) if ref[4] == hll.SPARSE
                  else (ref, hll.dense_set_max(ref, index, count)))
        got, _ = hll.add(got, e, 3000)
        assert bytes(got) == bytes(ref)
    assert got[4] == hll.DENSE


@pytest.mark.parametrize("seed", range(20))
def test_a_window_filled_in_any_order_merges_as_the_reference(seed: int) -> None:
    """Neighbouring registers of one value set in a shuffled order: VAL runs split, then merge
    back into runs of up to 4 (the merge's every length), the same bytes at every step."""
    order = list(range(200, 264))
    random.Random(seed).shuffle(order)
    ref = hll.new_sparse()
    got = hll.new_sparse()
    for i in order:
        count = 1 + (i // 8) % 2
        ref, ref_changed = hll.sparse_set_reference(ref, i, count, 3000)
        got, got_changed = hll._sparse_set_native(got, i, count, 3000)
        assert (bytes(got), got_changed) == (bytes(ref), ref_changed)
