"""pyrepl/keyspace/_hll.c against hll.py: the hash's register and count for any element, and a
PFADD's dense adds (the registers, the stale cache flag, what counts as grown)."""

from __future__ import annotations

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
