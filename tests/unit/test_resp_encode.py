"""pyrepl/resp/_encode.c against its Python reference (writer.encode_reference): the same bytes
for any reply value, nested in any way, in RESP2 and RESP3, and the same error for a value no
reply holds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.resp.types import (
    NULL_ARRAY,
    Map,
    Raw,
    ReplyError,
    SetReply,
    Status,
    Verbatim,
)
from pyrepl.resp.writer import encode_reference

_native = native.load("pyrepl.resp._encode")
if _native is None:
    pytest.skip(f"compares pyrepl/resp/_encode.c with its Python reference ({native.WHY_PURE})",
                allow_module_level=True)
encode = _native.encode


class IntSub(int):
    pass


LEAF = st.one_of(
    st.binary(max_size=40), st.none(), st.booleans(),
    st.integers(-2**63, 2**63 - 1), st.integers(-2**80, 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1.0, 0.1, -0.0, 1e300, 5e-324, 3.0000000000000004, 1e17, 123456789.0]),
    st.builds(Raw, st.binary(max_size=10)),
    st.builds(Status, st.text(max_size=10)),
    st.builds(ReplyError, st.text(max_size=10)),
    st.builds(Verbatim, st.binary(max_size=10)),
    st.just(NULL_ARRAY), st.text(max_size=10), st.builds(IntSub, st.integers(-5, 5)),
)
REPLY = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=6),
    st.lists(inner, max_size=6).map(tuple),
    st.builds(Map, st.lists(st.tuples(inner, inner), max_size=4)),
    st.builds(Map, st.lists(st.lists(inner, min_size=2, max_size=2), max_size=3)),
    st.builds(SetReply, st.lists(inner, max_size=6)),
), max_leaves=40)


@settings(max_examples=600, deadline=None)
@given(value=REPLY, proto=st.sampled_from([2, 3]))
def test_the_c_encoder_writes_the_references_bytes(value, proto):
    assert encode(value, proto) == encode_reference(value, proto)


@given(value=REPLY)
def test_proto_defaults_to_resp2(value):
    assert encode(value) == encode_reference(value)


def test_big_values_and_arrays():
    big = b"x" * 100_000                     # (past the stack buffer, and the one-copy path)
    assert encode(big) == encode_reference(big)
    many = [b"%d" % i for i in range(10_000)]   # (the heap buffer grows several times)
    assert encode(many) == encode_reference(many)
    assert encode(Map([(b"k", many)]), 3) == encode_reference(Map([(b"k", many)]), 3)


def test_doubles_as_redis_writes_them():
    for d in (1.5, -0.0, 1e-7, 2.0 ** 70, math.pi, math.inf, -math.inf):
        assert encode(d) == encode_reference(d)
        assert encode([d], 3) == encode_reference([d], 3)


def test_a_value_no_reply_holds_is_a_type_error():
    for bad in (object(), [b"ok", object()], Map([(b"k", object())])):
        with pytest.raises(TypeError, match="cannot encode reply value"):
            encode(bad)
    with pytest.raises(ValueError):   # (a pair that does not unpack: the reference's error)
        encode(Map([(b"a", b"b", b"c")]))


def test_deep_nesting_is_a_recursion_error_not_a_crash():
    v: object = b"x"
    for _ in range(100_000):
        v = [v]
    with pytest.raises(RecursionError):
        encode(v)
