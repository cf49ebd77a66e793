"""Reply encoding: ``encode_replies`` (a run's replies at C speed where they are of one kind,
or GET's bulks and nils) gives exactly the bytes of ``encode`` one reply at a time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.resp.types import Raw, ReplyError
from pyrepl.resp.writer import encode, encode_replies

OK = Raw(b"+OK\r\n")
REPLY = st.one_of(st.binary(max_size=20), st.none(), st.integers(-2**63, 2**63 - 1),
                  st.just(OK), st.just(ReplyError("ERR x")), st.lists(st.binary(max_size=3),
                                                                        max_size=2))


@settings(max_examples=400, deadline=None)
@given(replies=st.one_of(
    st.lists(REPLY, max_size=20),
    st.lists(st.one_of(st.binary(max_size=20), st.none()), max_size=20),  # GETs
    st.lists(st.none(), max_size=5), st.lists(st.just(OK), max_size=5),
    # runs of one Raw (SET's +OK: one bytes object), or of Raws that differ
    st.lists(st.sampled_from([OK, Raw(b"+OK\r\n"), Raw(b"+QUEUED\r\n")]), max_size=20)),
    proto=st.sampled_from([2, 3]))
def test_encode_replies_is_encode_one_by_one(replies, proto):
    assert b"".join(encode_replies(replies, proto)) == \
        b"".join(encode(r, proto) for r in replies)


def test_nils_by_protocol():
    assert b"".join(encode_replies([None, b"a", None], 2)) == b"$-1\r\n$1\r\na\r\n$-1\r\n"
    assert b"".join(encode_replies([None, b"a", None], 3)) == b"_\r\n$1\r\na\r\n_\r\n"
    assert b"".join(encode_replies([None, None], 3)) == b"_\r\n_\r\n"
