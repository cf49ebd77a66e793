"""pyrepl/keyspace/_digest.c against digest.py's references: its SHA1 against hashlib's at every
padding boundary, and each of a value's digests (a list's mix, a set's xor, a hash's or a sorted
set's pairs with fields marked, a stream node's live entries) for any input, the wrong types
refused alike."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import digest

_native = native.load("pyrepl.keyspace._digest")
if _native is None:
    pytest.skip(f"compares pyrepl/keyspace/_digest.c with digest.py ({native.WHY_PURE})",
                allow_module_level=True)

DIGESTS = st.binary(min_size=20, max_size=20)
ITEMS = st.lists(st.binary(max_size=80), max_size=40)
SCORES = st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, math.inf, -math.inf,
                                                                 1e-320, 5e-324, 1.5, 1e17]),
                   st.integers(-2**60, 2**60))


def test_sha1_is_hashlibs_at_every_length_to_three_blocks() -> None:
    data = bytes(range(256)) * 2
    for n in range(200):        # (55/56 and 119/120: the length's spill into a second block)
        assert _native.sha1(data[:n]) == hashlib.sha1(data[:n]).digest(), n
    big = bytes(range(256)) * 4000 + b"tail"
    assert _native.sha1(big) == hashlib.sha1(big).digest()
    assert _native.sha1(bytearray(b"abc")) == hashlib.sha1(b"abc").digest()


@settings(max_examples=300)
@given(d=DIGESTS, items=ITEMS)
def test_mix_and_xor_each_are_the_references(d: bytes, items: list[bytes]) -> None:
    assert _native.mix(d, items) == digest.mix_reference(d, items)
    assert _native.mix(d, iter(items)) == digest.mix_reference(d, items)
    assert _native.xor_each(d, items) == digest.xor_each_reference(d, items)
    assert _native.xor_each(d, reversed(items)) == digest.xor_each_reference(d, items)


@settings(max_examples=300)
@given(d=DIGESTS, pairs=st.lists(st.tuples(st.binary(max_size=70),
                                           st.one_of(st.binary(max_size=70), SCORES)),
                                 max_size=30),
       marked=st.none() | st.sets(st.binary(max_size=70), max_size=5), mark=DIGESTS,
       take=st.integers(0, 30))
def test_xor_pairs_is_the_reference(d: bytes, pairs: list[tuple[bytes, Any]],
                                    marked: set[bytes] | None, mark: bytes, take: int) -> None:
    if marked is not None:
        marked |= {a for a, _ in pairs[:take]}
        assert _native.xor_pairs(d, pairs, marked, mark) == \
            digest.xor_pairs_reference(d, pairs, marked, mark)
    assert _native.xor_pairs(d, pairs) == digest.xor_pairs_reference(d, pairs)
    assert _native.xor_pairs(d, pairs, None, None) == digest.xor_pairs_reference(d, pairs)


@settings(max_examples=300)
@given(d=DIGESTS, entries=st.lists(
    st.tuples(st.integers(0, 2**128 - 1), st.sampled_from([0, 1, 2, 3]),
              st.lists(st.binary(max_size=40), max_size=8)), max_size=20))
def test_mix_entries_is_the_reference(d: bytes, entries: list[tuple[int, int, list[bytes]]]
                                      ) -> None:
    ids = [e[0] for e in entries]
    flags = [e[1] for e in entries]
    fvs = [e[2] for e in entries]
    assert _native.mix_entries(d, ids, flags, fvs) == \
        digest.mix_entries_reference(d, ids, flags, fvs)


@pytest.mark.parametrize("call", [
    lambda m: m.mix(b"short", [b"x"]),
    lambda m: m.mix(bytes(20), [b"x", 3]),
    lambda m: m.xor_each(bytes(20), [b"x", None]),
    lambda m: m.xor_pairs(bytes(20), [(b"a", None)]),
    lambda m: m.xor_pairs(bytes(20), [(b"a", 2**2000)]),
    lambda m: m.mix_entries(bytes(20), [-1], [0], [[b"f", b"v"]]),
    lambda m: m.mix_entries(bytes(20), [2**128], [0], [[b"f", b"v"]]),
    lambda m: m.mix_entries(bytes(20), [1], [0], [[b"f", 7]]),
])
def test_the_wrong_types_are_refused_alike(call: Any) -> None:
    """Each C call that raises raises what its reference raises."""
    names = {"mix": digest.mix_reference, "xor_each": digest.xor_each_reference,
             "xor_pairs": digest.xor_pairs_reference,
             "mix_entries": digest.mix_entries_reference}

    class Ref:
        def __getattr__(self, name: str) -> Any:
            ref = names[name]

            def checked(d: bytes, *rest: Any) -> Any:
                if len(d) != 20:
                    raise TypeError("the digest is 20 bytes")
                return ref(d, *rest)
            return checked

    with pytest.raises((TypeError, OverflowError)) as c_err:
        call(_native)
    with pytest.raises((TypeError, OverflowError)) as py_err:
        call(Ref())
    assert c_err.type is py_err.type
