"""Request readers: Redis 7.0.15 semantics, exact consumed counts, pure == fast (the C scan).

Every rule is checked on both readers (``reader_cls`` fixture). The hypothesis tests feed
random streams (well-formed, inline, non-canonical, junk, oversize) split at random points to
both readers and require identical observable behaviour (commands, consumed/buffered/unparsed
after every feed, errors), and well-formed streams must give the expected argv at the exact
end offsets. The slow interop tests at the end send fixed odd inputs and random streams to a
real redis-server 7.0.15 and compare its replies (commands run, error line, close) with ours.
"""

from __future__ import annotations

import gc
import socket
import sys
import time
from itertools import accumulate

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pyrepl.resp.fastreader import FastRespReader, first, make_reader, release
from pyrepl.resp.reader import (
    PROTO_INLINE_MAX_SIZE,
    ProtocolError,
    QueryBufferLimitExceeded,
    RespReader,
    split_args,
    string2ll,
)

READERS = [RespReader, FastRespReader]


@pytest.fixture(params=READERS, ids=lambda c: c.__name__)
def reader_cls(request):
    return request.param


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def drive(reader: RespReader, chunks, drain=None) -> list:
    """Feed ``chunks``; after each (if ``drain[i]``, default always) call gets() until None.
    Returns the observable trace: commands with consumed, per-feed markers, final error.
    A chunk to be drained is fed as a client does, with ``first`` (``feed_first``, its common
    case in C: its first request, if the reader returns it at once); one that is not, with
    ``feed`` (a blocked client)."""
    trace: list = []
    try:
        for i, c in enumerate(chunks):
            if drain is not None and not drain[i]:
                reader.feed(c)
                trace.append(("fed", reader.consumed, reader.buffered(), reader.unparsed()))
                continue
            argv = first(reader, c)
            while argv is not None or (argv := reader.gets()) is not None:
                trace.append((argv, reader.consumed))
                argv = None
            trace.append(("none", reader.consumed, reader.buffered(), reader.unparsed()))
        while (argv := reader.gets()) is not None:
            trace.append((argv, reader.consumed))
    except ProtocolError as e:
        trace.append(("error", type(e).__name__, str(e), e.reply, reader.consumed))
        # sticky: the same error again, and feeding more changes nothing
        with pytest.raises(ProtocolError) as again:
            reader.gets()
        assert again.value is e
        reader.feed(b"*1\r\n$4\r\nPING\r\n")
        with pytest.raises(ProtocolError):
            reader.gets()
    return trace


def parse(reader_cls, data: bytes, step: int | None = None, **kw) -> tuple[list, object]:
    """Commands and the error (or None), feeding ``data`` whole or ``step`` bytes at a time."""
    r = reader_cls(**kw)
    chunks = [data] if step is None else [data[i:i + step] for i in range(0, len(data), step)]
    trace = drive(r, chunks)
    cmds = [t[0] for t in trace if isinstance(t[0], list)]
    errs = [t for t in trace if t[0] == "error"]
    return cmds, (errs[0][2] if errs else None)


def error_of(reader_cls, data: bytes, **kw) -> str | None:
    return parse(reader_cls, data, **kw)[1]


# -- well-formed input and consumed counts ----------------------------------------------------

def test_multibulk_pipeline_any_chunking(reader_cls):
    cmds = [[b"SET", b"k", b"v"], [b"GET", b"k"], [b"SET", b"bin", b"\r\n\x00\xff$*"],
            [b""], [b"x" * 40000]]
    data = b"".join(enc(*c) for c in cmds)
    for step in (None, 1, 2, 3, 7, 1000, 16384):
        assert parse(reader_cls, data, step) == (cmds, None)


def test_consumed_is_exact_per_command(reader_cls):
    segs = [enc(b"PING"), b"*0\r\n", b"*-1\r\n", b"\r\n", b"\n", b"  \t \r\n",
            enc(b"SET", b"a", b"1"), b"GET a\r\n", b"*-10\r\n", enc(b"DEL", b"a")]
    data = b"".join(segs)
    ends = []
    off = 0
    for s in segs:
        off += len(s)
        ends.append(off)
    for step in (None, 1, 5):
        r = reader_cls()
        trace = drive(r, [data] if step is None else
                      [data[i:i + step] for i in range(0, len(data), step)])
        got = [(t[0], t[1]) for t in trace if isinstance(t[0], list)]
        assert got == [([b"PING"], ends[0]), ([b"SET", b"a", b"1"], ends[6]),
                       ([b"GET", b"a"], ends[7]), ([b"DEL", b"a"], ends[9])]
        assert r.consumed == len(data) and r.buffered() == 0 and r.unparsed() == 0


def test_skipped_requests_count_as_consumed(reader_cls):
    r = reader_cls()
    r.feed(b"*0\r\n\r\n*-1\r\n")
    assert r.gets() is None
    assert r.consumed == 11 and r.buffered() == 0


def test_partial_request_is_not_consumed(reader_cls):
    r = reader_cls()
    r.feed(enc(b"PING") + b"*2\r\n$3\r\nGET\r\n$1\r\n")
    assert r.gets() == [b"PING"]
    assert r.gets() is None
    assert r.consumed == 14
    assert r.buffered() == len(b"*2\r\n$3\r\nGET\r\n$1\r\n")
    # Redis has parsed the header and the first argument: only "$1\r\n" is left... and the
    # bulk header itself is parsed too, so nothing of the partial request is unparsed.
    assert r.unparsed() == 0
    r.feed(b"k\r\n")
    assert r.gets() == [b"GET", b"k"]
    assert r.consumed == 14 + 20 and r.buffered() == 0


def test_reader_keeps_no_finished_request(reader_cls):
    """A request that arrived in pieces is the caller's once returned: the reader holds no
    reference to its arguments (a 100,000-argument SADD kept 5.6 MB alive until the client's
    next split request: Redis's "UNLINK can reclaim memory" saw used_memory stay up)."""
    import gc
    data = enc(b"SADD", b"s", *(b"%d" % i for i in range(1000)))
    r = reader_cls()
    r.feed(data[:100])
    assert r.gets() is None
    r.feed(data[100:])
    argv = r.gets()
    assert argv is not None and len(argv) == 1002
    assert r.gets() is None
    assert not [o for o in gc.get_referrers(argv) if o is r or o is getattr(r, "__dict__", 0)]


def test_reader_drops_the_buffer_of_a_big_request_once_run(reader_cls):
    """A big request read in many pieces is accumulated in a bytearray; once it is returned
    and nothing follows, the reader lets the buffer go (it held a 32 MB SET's bytes until
    the client's next read: Redis's pendingquerybuf test saw the replica at twice the
    master's memory)."""
    big = b"v" * 100_000
    data = enc(b"SET", b"k", big)
    small = enc(b"GET", b"k")
    for tail in (b"", small * 3):       # (alone, then with pipelined requests behind it)
        r = reader_cls()
        stream = data + tail
        got = []
        for i in range(0, len(stream), 8192):    # (gets() after each read, as the server)
            r.feed(stream[i:i + 8192])
            while (argv := r.gets()) is not None:
                got.append(argv)
        assert got == [[b"SET", b"k", big]] + [[b"GET", b"k"]] * (len(tail) // len(small))
        held = [o for o in gc.get_referents(r) if isinstance(o, (bytes, bytearray))]
        assert all(len(o) < 8192 for o in held), [len(o) for o in held]
        assert r.consumed == len(stream) and r.buffered() == 0 and r.unparsed() == 0
        r.feed(small)
        assert r.gets() == [b"GET", b"k"] and r.consumed == len(stream) + len(small)


def test_big_argument_in_small_chunks(reader_cls):
    big = bytes(range(256)) * 8192  # 2 MiB
    data = enc(b"SET", b"k", big) + enc(b"GET", b"k")
    r = reader_cls()
    out = []
    t0 = time.perf_counter()
    for i in range(0, len(data), 4096):
        r.feed(data[i:i + 4096])
        while (c := r.gets()) is not None:
            out.append(c)
    assert out == [[b"SET", b"k", big], [b"GET", b"k"]]
    assert r.consumed == len(data)
    assert time.perf_counter() - t0 < 20  # linear: a quadratic buffer would take minutes


def test_buffer_is_compacted(reader_cls):
    r = reader_cls()
    one = enc(b"SET", b"key", b"value")
    for _ in range(5000):
        r.feed(one[:10])
        assert r.gets() is None
        r.feed(one[10:])
        assert r.gets() == [b"SET", b"key", b"value"]
    assert r.consumed == 5000 * len(one)
    assert r.unparsed() == 0 and r.buffered() == 0


def test_feed_accepts_bytearray_and_memoryview(reader_cls):
    r = reader_cls()
    data = enc(b"ECHO", b"hi") * 2
    r.feed(bytearray(data[:5]))
    r.feed(memoryview(data)[5:])
    assert r.gets() == [b"ECHO", b"hi"]
    assert r.gets() == [b"ECHO", b"hi"]


# -- Redis's tolerance (bytes it skips without checking) --------------------------------------

def test_header_lines_end_at_first_cr_and_next_byte_is_skipped(reader_cls):
    data = b"*2\rX$3\rYabc\r\n$2\r\nhi\r\n"
    assert parse(reader_cls, data) == ([[b"abc", b"hi"]], None)
    for step in (1, 2):
        assert parse(reader_cls, data, step) == ([[b"abc", b"hi"]], None)


def test_bulk_trailer_is_not_checked(reader_cls):
    data = b"*1\r\n$5\r\nhelloXY*1\r\n$2\r\nhiAB"
    r = reader_cls()
    r.feed(data)
    assert r.gets() == [b"hello"] and r.consumed == 15
    assert r.gets() == [b"hi"] and r.consumed == len(data)


def test_negative_and_zero_multibulk_are_skipped(reader_cls):
    for head in (b"*0\r\n", b"*-1\r\n", b"*-10\r\n", b"*-2147483648\r\n",
                 b"*-9223372036854775808\r\n"):
        assert parse(reader_cls, head + enc(b"PING")) == ([[b"PING"]], None)


def test_max_multibulk_count_is_int_max(reader_cls):
    r = reader_cls()
    r.feed(b"*2147483647\r\n$4\r\nPING\r\n")
    assert r.gets() is None  # waits for 2**31-2 more arguments
    assert error_of(reader_cls, b"*2147483648\r\n") == \
        "ERR Protocol error: invalid multibulk length"


# -- inline commands --------------------------------------------------------------------------

@pytest.mark.parametrize("line,argv", [
    (b"PING\r\n", [b"PING"]),
    (b"PING\n", [b"PING"]),
    (b"set a b\r\n", [b"set", b"a", b"b"]),
    (b"  set\t a   b  \r\n", [b"set", b"a", b"b"]),
    (b"set a b\r\r\n", [b"set", b"a", b"b"]),  # only one CR is stripped; the other is a space
    (b'set "a b" \'c d\'\r\n', [b"set", b"a b", b"c d"]),
    (b'set k "\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\"\\q"\r\n',
     [b"set", b"k", b"AJ\n\r\t\b\a\\\"q"]),
    (b'echo "\\x4"\r\n', [b"echo", b"x4"]),  # not two hex digits: plain escape of 'x'
    (b'echo "\\xzz"\r\n', [b"echo", b"xzz"]),
    (b"echo 'it\\'s' 'a\\b'\r\n", [b"echo", b"it's", b"a\\b"]),
    (b'echo a"b c"\r\n', [b"echo", b"ab c"]),  # a quote inside a token opens quotes
    (b"echo a\vb\fc\r\n", [b"echo", b"a\vb\fc"]),  # \v \f do not end a token...
    (b"\v\fecho\v x\r\n", [b"echo\v", b"x"]),  # ...but are skipped between tokens
    (b'echo ""\r\n', [b"echo", b""]),
    (b"echo \xff\x80\r\n", [b"echo", b"\xff\x80"]),
])
def test_inline_splitting(reader_cls, line, argv):
    assert parse(reader_cls, line) == ([argv], None)
    assert parse(reader_cls, line, 1) == ([argv], None)


@pytest.mark.parametrize("line", [
    b'set """test-key""" test-value\r\n',  # from Redis's protocol.tcl
    b'echo "abc\r\n',
    b"echo 'abc\r\n",
    b'echo "a"b\r\n',
    b"echo 'a'b\r\n",
    b'echo "abc\\"\r\n',
])
def test_inline_unbalanced_quotes(reader_cls, line):
    assert error_of(reader_cls, enc(b"PING") + line + enc(b"PING")) == \
        "ERR Protocol error: unbalanced quotes in request"
    assert parse(reader_cls, enc(b"PING") + line)[0] == [[b"PING"]]


def test_inline_closing_quote_followed_by_vertical_tab_is_fine(reader_cls):
    assert parse(reader_cls, b'echo "a"\vb\r\n') == ([[b"echo", b"a", b"b"]], None)


def test_inline_too_big(reader_cls):
    exact = b"x" * PROTO_INLINE_MAX_SIZE
    r = reader_cls()
    r.feed(exact)
    assert r.gets() is None  # not more than 64 KiB yet
    r.feed(b"x")
    with pytest.raises(ProtocolError, match="^ERR Protocol error: too big inline request$"):
        r.gets()
    # a complete long line is fine
    long_arg = b"y" * (PROTO_INLINE_MAX_SIZE + 10)
    assert parse(reader_cls, b"echo " + long_arg + b"\r\n") == ([[b"echo", long_arg]], None)


def test_nul_hides_the_newline_like_strchr(reader_cls):
    # Redis searches the line end with strchr(), which stops at a NUL byte.
    r = reader_cls()
    r.feed(b"PI\x00NG\r\n" + enc(b"PING"))
    assert r.gets() is None
    r.feed(b"A" * PROTO_INLINE_MAX_SIZE)
    with pytest.raises(ProtocolError, match="too big inline request"):
        r.gets()
    # protocol.tcl "Protocol desync regression test" sequences
    for prefix, what in ((b"\x00", "inline request"), (b"*\x00", "mbulk count string"),
                         (b"*1\r\n$\x00", "bulk count string")):
        r = reader_cls()
        r.feed(prefix)
        for _ in range(70):
            r.feed(b"A" * 1024 + b"\n")
            try:
                if r.gets() is not None:
                    raise AssertionError("no command expected")
            except ProtocolError as e:
                assert str(e) == f"ERR Protocol error: too big {what}"
                break
        else:
            raise AssertionError("no error")


def test_nul_in_header_line_waits_instead_of_failing(reader_cls):
    for data in (b"*1\x00\r\n", b"*1\r\n$3\x00\r\nabc\r\n", b"*1\r\n$\x00x\r\nabc\r\n"):
        r = reader_cls()
        r.feed(data)
        assert r.gets() is None
        r.feed(b"B" * PROTO_INLINE_MAX_SIZE)
        with pytest.raises(ProtocolError, match="too big"):
            r.gets()


def test_nul_inside_bulk_data_is_fine(reader_cls):
    assert parse(reader_cls, enc(b"\x00\r\x00", b"\x00")) == ([[b"\x00\r\x00", b"\x00"]], None)


# -- multibulk errors -------------------------------------------------------------------------

@pytest.mark.parametrize("head", [
    b"*3000000000\r\n", b"*abc\r\n", b"*+1\r\n", b"*01\r\n", b"*\r\n", b"*-\r\n", b"*-0\r\n",
    b"* 1\r\n", b"*1 \r\n", b"*99999999999999999999\r\n", b"*-9223372036854775809\r\n",
    b"*1\n\r\n",
])
def test_invalid_multibulk_length(reader_cls, head):
    assert error_of(reader_cls, head) == "ERR Protocol error: invalid multibulk length"


@pytest.mark.parametrize("data,got", [
    (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "f"),  # protocol.tcl
    (b"*1\r\nfoo\r\n", "f"),
    (b"*1\r\n+OK\r\n", "+"),
    (b"*1\r\n:5\r\n", ":"),
    (b"*1\r\n*1\r\n$1\r\na\r\n", "*"),
    (b"*2\r\n=7\r\ntxt:abc\r\n+0123456789\r\n", "="),
    (b"*1\r\n\r\n", " "),  # CR and LF are replaced by spaces in the reply
    (b"*1\r\n\n\r\n", " "),
    (b"*1\r\n\xff\r\n", "\xff"),
])
def test_expected_dollar(reader_cls, data, got):
    assert error_of(reader_cls, data) == f"ERR Protocol error: expected '$', got '{got}'"


def test_expected_dollar_error_bytes_are_latin1(reader_cls):
    err = error_of(reader_cls, b"*1\r\n\xff\r\n")
    assert err.encode("latin-1") == b"ERR Protocol error: expected '$', got '\xff'"


@pytest.mark.parametrize("head", [
    b"$-10", b"$-1", b"$2000000000", b"$blabla", b"$+5", b"$05", b"$-0", b"$ 5", b"$5 ", b"$",
    b"$536870913", b"$99999999999999999999",
])
def test_invalid_bulk_length(reader_cls, head):
    data = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n" + head + b"\r\n"
    assert error_of(reader_cls, data) == "ERR Protocol error: invalid bulk length"
    # the error comes as soon as the header line is complete, before any data
    cmds, err = parse(reader_cls, enc(b"PING") + data, 1)
    assert cmds == [[b"PING"]] and err == "ERR Protocol error: invalid bulk length"


def test_proto_max_bulk_len(reader_cls):
    assert parse(reader_cls, enc(b"12345"), proto_max_bulk_len=5) == ([[b"12345"]], None)
    assert error_of(reader_cls, enc(b"123456"), proto_max_bulk_len=5) == \
        "ERR Protocol error: invalid bulk length"
    assert error_of(reader_cls, b"*1\r\n$536870912\r\nabc") is None  # default: 512mb


def test_proto_max_bulk_len_can_change(reader_cls):
    r = reader_cls(proto_max_bulk_len=100)
    r.feed(enc(b"x" * 50) * 2)
    assert r.gets() == [b"x" * 50]
    r.proto_max_bulk_len = 10
    with pytest.raises(ProtocolError, match="invalid bulk length"):
        r.gets()


def test_too_big_mbulk_count_string(reader_cls):
    r = reader_cls()
    r.feed(b"*" + b"1" * (PROTO_INLINE_MAX_SIZE - 1))
    assert r.gets() is None
    r.feed(b"1")
    with pytest.raises(ProtocolError, match="^ERR Protocol error: too big mbulk count string$"):
        r.gets()


def test_too_big_bulk_count_string(reader_cls):
    r = reader_cls()
    r.feed(b"*1\r\n$" + b"1" * PROTO_INLINE_MAX_SIZE)
    with pytest.raises(ProtocolError, match="^ERR Protocol error: too big bulk count string$"):
        r.gets()


def test_long_header_line_with_cr_but_no_following_byte_waits(reader_cls):
    # networking.c only checks the size when no CR was found at all
    r = reader_cls()
    r.feed(b"*1\r\n$" + b"1" * (PROTO_INLINE_MAX_SIZE + 10) + b"\r")
    assert r.gets() is None
    r.feed(b"\n")
    with pytest.raises(ProtocolError, match="invalid bulk length"):
        r.gets()


# -- authentication limits, master links, query buffer limit ----------------------------------

def unauthenticated(reader_cls, data: bytes):  # noqa: ANN201
    """A reader for a client that has not authenticated yet, fed ``data``."""
    r = reader_cls()
    r.auth_required = True
    r.feed(data)
    return r


def test_unauthenticated_limits(reader_cls):
    r = unauthenticated(reader_cls, enc(*[b"a"] * 10) + enc(b"x" * 16384))
    assert r.gets() == [b"a"] * 10
    assert r.gets() == [b"x" * 16384]
    assert error_of(reader_cls, b"*11\r\n") is None
    r = unauthenticated(reader_cls, b"*11\r\n")
    with pytest.raises(ProtocolError, match="^ERR Protocol error: unauthenticated multibulk"):
        r.gets()
    r = unauthenticated(reader_cls, b"*1\r\n$16385\r\n")
    with pytest.raises(ProtocolError, match="^ERR Protocol error: unauthenticated bulk length$"):
        r.gets()


def test_auth_flag_applies_from_next_gets(reader_cls):
    r = unauthenticated(reader_cls, enc(b"AUTH", b"pw") + enc(*[b"a"] * 11) + enc(b"RESET")
                        + enc(*[b"b"] * 11))
    assert r.gets() == [b"AUTH", b"pw"]
    r.auth_required = False
    assert r.gets() == [b"a"] * 11
    assert r.gets() == [b"RESET"]
    r.auth_required = True
    with pytest.raises(ProtocolError, match="unauthenticated multibulk length"):
        r.gets()


def test_master_stream(reader_cls):
    r = reader_cls(proto_max_bulk_len=4, client_query_buffer_limit=10, from_master=True)
    data = b"\n" + enc(b"SET", b"key", b"0123456789") + b"\r\n"
    r.feed(data)
    assert r.gets() == [b"SET", b"key", b"0123456789"]
    assert r.gets() is None and r.consumed == len(data)
    r.feed(b"PING\r\n")
    with pytest.raises(ProtocolError) as ei:
        r.gets()
    assert str(ei.value) == "Master using the inline protocol. Desync?"
    assert ei.value.reply is False
    assert r.consumed == len(data)


def test_query_buffer_limit(reader_cls):
    r = reader_cls(client_query_buffer_limit=30)
    r.feed(b"x" * 30)
    assert r.gets() is None
    r.feed(b"x")
    with pytest.raises(QueryBufferLimitExceeded) as ei:
        r.gets()
    assert ei.value.reply is False
    assert str(ei.value) == "Closing client that reached max query buffer length"


def test_query_buffer_limit_checked_before_parsing_the_read(reader_cls):
    # Like readQueryFromClient: the whole read is refused, even its complete commands.
    r = reader_cls(client_query_buffer_limit=30)
    r.feed(enc(b"PING") + enc(b"x" * 20))
    with pytest.raises(QueryBufferLimitExceeded):
        r.gets()
    assert r.consumed == 0


def test_query_buffer_limit_counts_only_unparsed_bytes(reader_cls):
    # Arguments already parsed out of a partial request are no longer in Redis's querybuf.
    part = b"*3\r\n$10\r\n0123456789\r\n$10\r\n01234"  # 31 bytes
    r = reader_cls(client_query_buffer_limit=32)
    r.feed(part)
    assert r.gets() is None
    assert r.unparsed() == 5 and r.buffered() == 31
    r.feed(b"56789\r\n$10\r\n0123456789")  # 53 buffered, but only 5 + 22 unparsed
    assert r.gets() is None
    assert r.unparsed() == 10
    r.feed(b"\r\n")
    assert r.gets() == [b"0123456789"] * 3
    r = reader_cls(client_query_buffer_limit=32)
    r.feed(part)
    assert r.gets() is None
    r.feed(b"56789\r\n$10\r\n0123456789\r\n" + b"x" * 4)  # 5 + 28 = 33 unparsed
    with pytest.raises(QueryBufferLimitExceeded):
        r.gets()


def test_query_buffer_limit_without_draining(reader_cls):
    # A blocked client: commands are not taken out, the buffer grows and hits the limit.
    r = reader_cls(client_query_buffer_limit=60)
    r.feed(enc(b"PING") * 2)
    r.feed(enc(b"PING") * 2)  # 56 unparsed
    assert r.gets() == [b"PING"]  # 42 unparsed
    r.feed(enc(b"PING") * 2)  # 70 > 60
    with pytest.raises(QueryBufferLimitExceeded):
        r.gets()
    assert r.consumed == 14


def test_error_reason_for_logs(reader_cls):
    r = reader_cls()
    r.feed(b"*1\r\nfoo\r\n")
    with pytest.raises(ProtocolError) as ei:
        r.gets()
    assert ei.value.reason == "expected $ but got something else"
    assert ei.value.reply is True


def test_make_reader():
    r = make_reader(1024 * 1024, 1024 * 1024 * 1024)
    assert type(r) is FastRespReader
    assert type(make_reader(1024 * 1024, 1024 * 1024 * 1024, fast=False)) is RespReader
    r = make_reader(5, 100, fast=True)
    assert r.proto_max_bulk_len == 5 and r.client_query_buffer_limit == 100


# -- helpers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("s,v", [
    (b"0", 0), (b"1", 1), (b"-1", -1), (b"9223372036854775807", 2**63 - 1),
    (b"-9223372036854775808", -(2**63)), (b"9223372036854775808", None),
    (b"-9223372036854775809", None), (b"01", None), (b"-0", None), (b"+1", None),
    (b"", None), (b"-", None), (b" 1", None), (b"1 ", None), (b"1a", None),
    (b"00000000000000000001", None), (b"\xd9\xa1", None), (b"\xb9", None),
])
def test_string2ll(s, v):
    assert string2ll(s) == v
    assert string2ll(bytearray(s)) == v


def test_split_args_returns_none_on_unbalanced():
    assert split_args(b'"abc') is None
    assert split_args(b"") == []
    assert split_args(b"   ") == []


# -- huge headers --------------------------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("data", [
    b"*2000000000\r\n", b"*1\r\n*2000000000\r\n", b"*1\r\n~2000000000\r\n",
    b"*1\r\n>2000000000\r\n", b"*1\r\n|2000000000\r\n", b"*1\r\n%2000000000\r\n",
    b"*2\r\n$1\r\na\r\n*99999\r\n",
])
def test_huge_aggregate_headers_are_cheap(reader_cls, data):
    # Nothing may be allocated from a header alone (hiredis-py preallocated lists from it).
    t0 = time.perf_counter()
    for step in (None, 1, 3):
        cmds, err = parse(reader_cls, enc(b"PING") + data, step)
        assert cmds == [[b"PING"]]
    assert time.perf_counter() - t0 < 10


def test_non_canonical_lookalikes_match_pure_reader():
    # Same total length as the canonical form of [b"abc", b"0123456789"]: a length check alone
    # would be fooled; both readers must report Redis's error.
    data = b"*2\r\n=7\r\ntxt:abc\r\n+0123456789\r\n"
    for cls in READERS:
        assert error_of(cls, data) == "ERR Protocol error: expected '$', got '='"


# -- differential / property tests ------------------------------------------------------------

ARG = st.binary(max_size=12) | st.sampled_from([b"", b"\r\n", b"\x00", b"*1", b"$3", b"a" * 40])
JUNK_ALPHABET = b"*$+-:=~%>|_\r\n\r\n0123456789 \t\"'\\x\x00aZ\xff"


@st.composite
def well_formed(draw) -> tuple[bytes, list[list[bytes]]]:
    """A segment and the commands Redis parses from it."""
    kind = draw(st.sampled_from(
        ["array", "array", "array", "inline", "skip", "sloppy", "bigcount"]))
    if kind == "array":
        argv = draw(st.lists(ARG, min_size=1, max_size=5))
        return enc(*argv), [argv]
    if kind == "bigcount":
        argv = [b"k"] * draw(st.integers(11, 40))
        return enc(*argv), [argv]
    if kind == "inline":
        toks = draw(st.lists(st.sampled_from([
            (b"set", b"set"), (b"k1", b"k1"), (b'"a b"', b"a b"), (b"'c d'", b"c d"),
            (b'"\\x41\\n"', b"A\n"), (b"'it\\'s'", b"it's"), (b'""', b""),
            (b'"\\t\\"q"', b'\t"q'), (b"\xff\x01", b"\xff\x01")]), min_size=1, max_size=4))
        sep = draw(st.sampled_from([b" ", b"  ", b"\t", b" \v"]))
        end = draw(st.sampled_from([b"\r\n", b"\n"]))
        return sep.join(t for t, _ in toks) + end, [[v for _, v in toks]]
    if kind == "skip":
        return draw(st.sampled_from([b"*0\r\n", b"*-1\r\n", b"*-7\r\n", b"\r\n", b"\n",
                                     b" \t\r\n"])), []
    # sloppy: valid for Redis, not canonical (header CR + any byte, unchecked trailers)
    argv = draw(st.lists(ARG, min_size=1, max_size=3))
    x = draw(st.sampled_from([b"\n", b"X", b"\x00", b"\r"]))
    t = draw(st.sampled_from([b"\r\n", b"AB", b"\x00\x00", b"\n\r"]))
    data = b"*%d\r%s" % (len(argv), x) + b"".join(
        b"$%d\r%s%s%s" % (len(a), x, a, t) for a in argv)
    return data, [argv]


@st.composite
def odd(draw) -> bytes:
    """A segment that may be anything: junk, RESP3 look-alikes, oversize lengths."""
    kind = draw(st.sampled_from(["junk", "resp3", "oversize", "bad", "random"]))
    if kind == "junk":
        return draw(st.lists(st.sampled_from(list(JUNK_ALPHABET)), max_size=30).map(bytes))
    if kind == "resp3":
        el = draw(st.lists(st.sampled_from([
            b"$3\r\nabc\r\n", b"+OK\r\n", b":12\r\n", b"=7\r\ntxt:abc\r\n", b"(123\r\n",
            b",1.5\r\n", b"#t\r\n", b"_\r\n", b"$-1\r\n", b"*1\r\n$1\r\na\r\n", b"%1\r\n+a\r\n+b\r\n",
            b"~1\r\n+a\r\n", b">1\r\n+a\r\n", b"-ERR x\r\n", b"!3\r\nerr\r\n", b"*-1\r\n",
            b"|1\r\n+a\r\n+b\r\n", b"*0\r\n", b"$0\r\n\r\n"]), min_size=1, max_size=3))
        return b"*%d\r\n" % len(el) + b"".join(el)
    if kind == "oversize":
        n = draw(st.sampled_from([6, 7, 100, 16385, 2**31, 2**63 - 1]))
        return b"*1\r\n$%d\r\n" % n + b"z" * draw(st.integers(0, 8))
    if kind == "bad":
        return draw(st.sampled_from([
            b"*abc\r\n", b"*01\r\n$1\r\na\r\n", b"*1\r\n$01\r\na\r\n", b"*1\r\n$+1\r\na\r\n",
            b'"unbalanced\r\n', b"*3000000000\r\n", b"*12\r\n", b"*1\r\n$\x00\r\n",
            b"*1\r\n$1\x00\r\n", b"\x00x\r\n"]))
    return draw(st.binary(max_size=40))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    pts = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in pts + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments=st.lists(st.one_of(well_formed().map(lambda t: t[0]), odd()), max_size=12),
       cuts=st.lists(st.integers(0, 10**6), max_size=8),
       drain=st.lists(st.booleans(), min_size=10, max_size=10),
       maxbulk=st.sampled_from([5, 100, 512 * 1024 * 1024]),
       qblimit=st.sampled_from([40, 200, 1024 * 1024 * 1024]),
       auth=st.booleans(), master=st.booleans())
def test_pure_and_fast_readers_agree(segments, cuts, drain, maxbulk, qblimit, auth, master):
    data = b"".join(segments)
    chunks = split(data, cuts)
    drains = [drain[i % len(drain)] for i in range(len(chunks))]
    traces = []
    for cls in (RespReader, FastRespReader):
        r = cls(maxbulk, qblimit, from_master=master)
        r.auth_required = auth
        traces.append(drive(r, chunks, drains))
    assert traces[0] == traces[1]


@pytest.mark.parametrize("reader_cls", READERS, ids=lambda c: c.__name__)
@settings(max_examples=200, deadline=None)
@given(segments=st.lists(well_formed(), max_size=15),
       cuts=st.lists(st.integers(0, 10**6), max_size=10))
def test_well_formed_streams_give_expected_commands_and_offsets(reader_cls, segments, cuts):
    data = b"".join(s for s, _ in segments)
    expected = []
    off = 0
    for seg, cmds in segments:
        off += len(seg)
        # commands from one segment all end at its end (one command per segment)
        expected += [(c, off) for c in cmds]
    r = reader_cls()
    trace = drive(r, split(data, cuts))
    assert not [t for t in trace if t[0] == "error"]
    got = [(t[0], t[1]) for t in trace if isinstance(t[0], list)]
    assert got == expected
    assert r.consumed == len(data) and r.buffered() == 0


@settings(max_examples=200, deadline=None)
@given(segments=st.lists(st.one_of(well_formed().map(lambda t: t[0]), odd()), max_size=8),
       step=st.integers(1, 9))
def test_readers_agree_byte_by_byte_and_with_auth_flips(segments, step):
    data = b"".join(segments)
    chunks = [data[i:i + step] for i in range(0, len(data), step)]
    traces = []
    for cls in (RespReader, FastRespReader):
        r = cls(100, 1024)
        trace = []
        try:
            for i, c in enumerate(chunks):
                r.feed(c)
                r.auth_required = bool(i % 3 == 1)
                while (argv := r.gets()) is not None:
                    trace.append((argv, r.consumed, r.unparsed()))
        except ProtocolError as e:
            trace.append((str(e), r.consumed))
        traces.append(trace)
    assert traces[0] == traces[1]


# -- the fast reader (pyrepl.resp.fastreader, the C scan) ------------------------------------

# Arguments built to fool a parser that counts '*': stars and headers inside payloads, lengths
# at the digit boundaries of "$L", arguments bigger than the canonical-size table.
STARRY = st.binary(max_size=8) | st.sampled_from([
    b"*", b"**", b"*1\r\n$1\r\na", b"$3\r\n*", b"\r\n*2\r\n", b"*" * 9, b"x" * 10,
    b"y" * 99, b"z" * 100, b"w" * 16384, b"v" * 16385])
# Tails after the canonical requests: partial requests, a top-level bulk that hides a '*',
# elements Redis refuses (an integer, a nested array, a nil), a "*0", an inline command.
TAILS = st.sampled_from([
    b"", b"*", b"*2\r\n", b"*2\r\n$3\r\nab", b"$5\r\nab*cd", b"$5\r\nab*cd\r\n",
    b"*2\r\n$3\r\nGET\r\n:5\r\n", b"*2\r\n$3\r\nGET\r\n*1\r\n$1\r\na\r\n",
    b"*1\r\n$-1\r\n", b"*0\r\n", b"PING *\r\n", b":1\r\n*1\r\n$1\r\na\r\n"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.lists(STARRY, min_size=1, max_size=4), min_size=1, max_size=6),
       tail=TAILS, more=st.lists(st.lists(STARRY, min_size=1, max_size=3), max_size=3),
       cuts=st.lists(st.integers(0, 10**6), max_size=3))
def test_fast_proof_agrees_with_pure_reader(reqs, tail, more, cuts):
    data = b"".join(enc(*a) for a in reqs) + tail + b"".join(enc(*a) for a in more)
    traces = [drive(cls(), split(data, cuts)) for cls in (RespReader, FastRespReader)]
    assert traces[0] == traces[1]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments=st.lists(st.one_of(
    st.lists(STARRY, min_size=1, max_size=4).map(lambda a: enc(*a)),
    well_formed().map(lambda t: t[0]), odd()), min_size=1, max_size=6),
    auth=st.booleans(), maxbulk=st.sampled_from([5, 100, 512 * 1024 * 1024]))
def test_one_request_per_read_agrees_with_pure_reader(segments, auth, maxbulk):
    # A client that waits for each reply: every read is one request (the single-request
    # check), or a look-alike of one (a CRLF inside an argument, sloppy headers, junk).
    traces = []
    for cls in (RespReader, FastRespReader):
        r = cls(maxbulk)
        r.auth_required = auth
        traces.append(drive(r, segments))
    assert traces[0] == traces[1]


@settings(max_examples=100, deadline=None)
@given(reqs=st.lists(st.lists(STARRY, min_size=1, max_size=5), min_size=1, max_size=40))
def test_canonical_batches_never_reach_the_pure_parser(reqs):
    # The common case: canonical requests in one read are all parsed by one C scan (the pure
    # parser never runs), whatever the payloads hold, and every command ends where it should.
    pure = []
    orig = RespReader.gets
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RespReader, "gets", lambda self: pure.append(1) or orig(self))
        r = FastRespReader()
        r.feed(b"".join(enc(*a) for a in reqs))
        got, ends = [], []
        while (argv := r.gets()) is not None:
            got.append(argv)
            ends.append(r.consumed)
    assert got == reqs and pure == []
    assert ends == list(accumulate(len(enc(*a)) for a in reqs))


@pytest.mark.parametrize("tail", [
    b"*1\r\n$4\r\nPINGXY",            # data not followed by CRLF (Redis does not check)
    b"*1\r\n$4\r\nPINGX\n", b"*1\r\n$4\r\nPING\rX",
    b"*1\r\n$4\rXPING\r\n",           # a header's CR followed by any byte (the same)
    b"*01\r\n$4\r\nPING\r\n",         # a leading zero: Redis refuses it
    b"*0\r\n", b'ECHO "x"\r\n',       # an inline line that is not simple (quotes)
    b"\r\n", b"*1\r\n$-1\r\n", b"*1\r\n:1\r\n"])
def test_what_the_scan_leaves_goes_to_the_pure_parser(monkeypatch, tail):
    # The scan stops at the first non-canonical request; the pure parser answers from there
    # (the requests before it stay the scan's), as Redis does.
    pure = []
    orig = RespReader.gets
    monkeypatch.setattr(RespReader, "gets", lambda self: pure.append(self.consumed) or orig(self))
    good = enc(b"SET", b"k", b"v") + enc(b"GET", b"k")
    fast = parse(FastRespReader, good + tail)
    monkeypatch.setattr(RespReader, "gets", orig)
    assert fast == parse(RespReader, good + tail)
    assert fast[0][:2] == [[b"SET", b"k", b"v"], [b"GET", b"k"]]
    assert pure and min(pure) == len(good)


@settings(max_examples=150, deadline=None)
@given(reqs=st.lists(st.lists(st.binary(max_size=12), min_size=1, max_size=4), min_size=1,
                     max_size=30),
       cuts=st.lists(st.integers(0, 600), max_size=4), peek=st.lists(st.booleans()),
       toggle_at=st.one_of(st.none(), st.integers(0, 30)))
def test_positions_and_raw_bytes_are_exact_wherever_they_are_read(reqs, cuts, peek, toggle_at):
    # The batch's positions are brought up to date only when read (consumed, buffered(),
    # unparsed(), raw_last(), a settings change): read them after some requests and not
    # others, in any chunking, and they must be the exact ones.
    data = b"".join(enc(*a) for a in reqs)
    ends = list(accumulate(len(enc(*a)) for a in reqs))
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    r = FastRespReader()
    got, fed = [], 0
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        r.feed(data[lo:hi])
        fed = hi
        while (argv := r.gets()) is not None:
            i = len(got)
            got.append(argv)
            raw = r.raw_last(argv)
            assert raw is None or raw == enc(*argv)
            if len(bounds) == 2 and not set(data) & set(b"+=(%~>|") and \
                    data.count(b"*") == len(reqs):
                assert raw is not None   # one chunk, the common case: proven, bytes kept
            if i < len(peek) and peek[i]:
                assert r.consumed == ends[i]
                assert r.buffered() == fed - ends[i]
                assert r.unparsed() == fed - ends[i]
            else:
                assert r.consumed_now() == ends[i]   # (the replica's, without settling)
            if i == toggle_at:   # AUTH / RESET: the queue is dropped, parsing goes on from here
                r.auth_required = False
    assert got == reqs
    assert r.consumed == len(data) and r.buffered() == 0 and r.unparsed() == 0


def test_requests_before_a_bad_header_keep_the_shortcut(monkeypatch):
    # The scan stops at the bad header; the three requests it parsed before are still queued
    # (the pure parser only runs from the bad one on, and gives Redis's error).
    pure = []
    orig = RespReader.gets
    monkeypatch.setattr(RespReader, "gets", lambda self: pure.append(self.consumed) or orig(self))
    good = enc(b"PING") + enc(b"SET", b"k", b"v") + enc(b"GET", b"k")
    cmds, err = parse(FastRespReader, good + b"*1\r\n$x\r\n")
    assert cmds == [[b"PING"], [b"SET", b"k", b"v"], [b"GET", b"k"]]
    assert err is not None and "bulk length" in str(err)
    assert pure and min(pure) == len(good)


# -- interop with a real redis-server ---------------------------------------------------------

INTEROP_CASES = [
    b"*3000000000\r\n",
    b"*abc\r\n",
    b"*01\r\n$4\r\nPING\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
    b"*1\r\nfoo\r\n",
    b"*1\r\n+PING\r\n",
    b"*1\r\n\r\n\r\n",
    b"*1\r\n\xfe\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n",
    b"*1\r\n$04\r\nPING\r\n",
    b"*1\r\n$+4\r\nPING\r\n",
    b'set """test-key""" test-value\r\n',
    b"echo 'abc\r\n",
    b'echo "a"b\r\n',
    b"\x00" + b"A" * 70000,
    b"*\x00" + b"A" * 70000,
    b"*1\r\n$\x00" + b"A" * 70000,
    b"P" * 70000,
    b"*" + b"1" * 70000,
    b"*1\r\n$" + b"1" * 70000,
    b"*2\r\n$4\r\nECHO\r\n=7\r\ntxt:abc\r\n",
]


def _redis_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` and return everything Redis writes until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
        else:
            raise AssertionError(f"redis did not close the connection; got {out[:200]!r}")
        return out


@pytest.fixture(scope="module")
def strict_redis():
    from tests.support.procs import start_redis

    with start_redis("--client-query-buffer-limit", "1mb") as srv:
        yield srv


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("case", INTEROP_CASES, ids=lambda b: repr(b[:24]))
def test_protocol_errors_match_real_redis(strict_redis, case):
    data = b"PING\r\n" + enc(b"PING") + case
    reply = _redis_exchange(strict_redis.port, data)
    cmds, err = parse(RespReader, data)
    assert err is not None
    assert reply == b"+PONG\r\n" * len(cmds) + b"-" + err.encode("latin-1") + b"\r\n"


@pytest.mark.slow
@pytest.mark.interop
def test_query_buffer_limit_matches_real_redis(strict_redis):
    # 1mb limit: a 2mb argument is refused while it arrives, and the client closed silently.
    head = enc(b"PING") + b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n"
    with socket.create_connection(("127.0.0.1", strict_redis.port), timeout=10) as s:
        s.sendall(head)
        assert s.recv(100) == b"+PONG\r\n"
        sent = 0
        try:
            while sent < 2_000_000:
                s.sendall(b"v" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        rest = b""
        try:
            while chunk := s.recv(65536):
                rest += chunk
        except ConnectionResetError:
            pass
    assert rest == b""  # closed without a reply
    r = RespReader(client_query_buffer_limit=1024 * 1024)
    r.feed(head)
    assert r.gets() == [b"PING"] and r.gets() is None
    with pytest.raises(QueryBufferLimitExceeded) as ei:
        for _ in range(40):
            r.feed(b"v" * 65536)
            assert r.gets() is None
    assert ei.value.reply is False


@pytest.mark.slow
@pytest.mark.interop
def test_unauthenticated_limits_match_real_redis():
    from tests.support.procs import start_redis

    with start_redis("--requirepass", "secret") as srv:
        for case in (b"*11\r\n", b"*1\r\n$16385\r\n"):
            reply = _redis_exchange(srv.port, case)
            r = RespReader()
            r.auth_required = True
            r.feed(case)
            with pytest.raises(ProtocolError) as ei:
                r.gets()
            assert reply == b"-" + str(ei.value).encode() + b"\r\n"


@pytest.fixture(scope="module")
def acl_redis():
    from tests.support.procs import start_redis

    # Random input can name any command: let the default user run only PING and ECHO, so
    # everything else is refused with exactly one error reply and nothing is executed.
    with start_redis("--user", "default", "reset", "on", "nopass", "~*", "+ping", "+echo") as srv:
        yield srv


# Commands that close the connection or change its protocol even without permissions
# (Redis also closes on "host:" / "post": an HTTP request looks like a cross-protocol attack).
_NO_FUZZ = {b"quit", b"reset", b"hello", b"auth", b"host:", b"post"}


@pytest.mark.slow
@pytest.mark.interop
@settings(max_examples=150, deadline=None)
@given(segments=st.lists(st.one_of(well_formed().map(lambda t: t[0]), odd()), max_size=10))
def test_random_streams_against_real_redis(acl_redis, segments):
    from hypothesis import assume

    from tests.support.resp import RawClient

    data = b"".join(segments)
    cmds, err = parse(RespReader, data)
    assume(not any(c[0].lower() in _NO_FUZZ for c in cmds if c))
    with RawClient(acl_redis.port) as c:
        c.send_raw(data)
        for _ in cmds:  # one reply per command we parsed, none of them a protocol error
            assert not c.read_reply().startswith(b"-ERR Protocol error")
        if err is None:
            return  # Redis waits for the rest of a partial request, as we do
        assert c.read_reply() == b"-" + err.encode("latin-1") + b"\r\n"
        assert c.buf == b""
        try:
            assert c.sock.recv(1024) == b""  # and then closes the connection
        except ConnectionResetError:
            pass


_PIECES = st.sampled_from([
    b"*1\r\n$4\r\nPING\r\n", b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"PING\r\n", b"\r\n", b"*0\r\n", b"*1\r\n$04\r\nPING\r\n", b"*2\r\n$3\r\nGET\r\n$1\r\nkXY",
])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=12), cuts=st.lists(st.integers(0, 200),
                                                                         max_size=6),
       limit=st.sampled_from([1 << 30, 40]), arrays=st.lists(st.booleans(), max_size=12),
       ends=st.lists(st.booleans(), max_size=12))
def test_fed_as_a_client_feeds_it_the_fast_reader_is_the_pure_one(pieces, cuts, limit, arrays,
                                                                   ends):
    """Driven as ``Client.process`` drives it: ``first``, then ``gets()`` only while
    ``spent`` does not say the read is all run, the end of each request read with
    ``consumed_now()`` (nothing settles the batch in between; the next ``feed_first`` does).
    The requests and their ends are the pure reader's, whatever the chunking (and with a
    small client-query-buffer-limit, or a bytearray: reads the general path takes)."""
    data = b"".join(pieces)
    at_ends = [e for e, cut in zip(accumulate(map(len, pieces)), ends, strict=False) if cut]
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)} | set(at_ends))
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    chunks = [bytearray(ch) if i < len(arrays) and arrays[i] else ch
              for i, ch in enumerate(chunks)]

    def client_trace(reader):
        out = []
        try:
            for ch in chunks:
                argv = first(reader, ch)
                while True:
                    if argv is None:
                        argv = reader.gets()
                        if argv is None:
                            break
                    out.append((argv, reader.consumed_now()))
                    argv = None
                    if reader.spent and not reader.queue:
                        break
        except ProtocolError as e:
            out.append(("error", str(e)))
        return out, reader.consumed, reader.buffered()

    assert client_trace(FastRespReader(client_query_buffer_limit=limit)) == \
        client_trace(RespReader(client_query_buffer_limit=limit))


def test_the_ends_kept_for_the_next_reads_never_change_a_value_someone_holds():
    """The C scan writes a read's request ends into the ints of an earlier read's ends that
    nothing else holds (pyrepl/resp/_scan.c's end_int): each end read off the reader and kept
    here (a reference of ours) must keep its value while later reads, alone and pipelined,
    reuse the others; and every end is where its request ends."""
    reader = FastRespReader()
    held: list[int] = []
    want: list[int] = []
    at = 0
    for i in range(400):
        reqs = [enc(b"SET", b"k%d" % j, b"v" * (i % 7)) for j in range(1 + i % 4)]
        for q in reqs:
            at += len(q)
            want.append(at)
        argv = first(reader, b"".join(reqs))
        while True:   # (as Client.process: no gets() once the read is all run)
            if argv is None and (argv := reader.gets()) is None:
                break
            if i % 3:   # (a third of the ends not kept: theirs may be reused)
                held.append(reader.consumed_now())
            else:
                held.append(int(str(reader.consumed_now())))   # (a copy: the int may go)
            argv = None
            if reader.spent and not reader.queue:
                break
        release(reader)   # (then its batch is kept for the next read, with its ends)
    assert held == want


_SLOTS = [(name, cls.__dict__[name]) for cls in (RespReader, FastRespReader)
          for name in cls.__slots__]


def _state(reader: FastRespReader) -> dict:
    """Every slot of the reader, read as stored (``consumed`` unsettled; an error by its type
    and text: two readers make two instances)."""
    state = {name: d.__get__(reader) for name, d in _SLOTS}
    err = state["_error"]
    if err is not None:
        state["_error"] = (type(err), str(err))
    return state


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=12), cuts=st.lists(st.integers(0, 200),
                                                                         max_size=6),
       limit=st.sampled_from([1 << 30, 40]), arrays=st.lists(st.booleans(), max_size=12),
       gets=st.lists(st.integers(0, 3), max_size=12), auth=st.booleans(),
       releases=st.lists(st.booleans(), max_size=12))
@example(pieces=[enc(b"PING"), enc(b"GET", b"k"), enc(b"PING")], cuts=[14, 35], limit=1 << 30,
         arrays=[], gets=[0, 0, 0], auth=False,
         releases=[])   # lone requests, as a client at -P1 sends them
@example(pieces=[enc(b"PING"), enc(b"GET", b"k"), enc(b"PING")], cuts=[], limit=1 << 30,
         arrays=[], gets=[2, 0, 0], auth=False, releases=[True])   # a pipeline, all run
def test_first_in_c_moves_the_slots_as_feed_first_does(pieces, cuts, limit, arrays, gets, auth,
                                                       releases):
    """``first`` and ``release`` (C) against ``FastRespReader.feed_first`` and ``release``
    (Python, the reference): the same request returned and every slot of the reader equal
    after each read, whatever state the reads find (requests left queued or buffered, a
    partial request, an error, a bytearray, a small query-buffer limit, the unauthenticated
    limits, a read's requests let go of once all returned or before)."""
    data = b"".join(pieces)
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    chunks = [bytearray(ch) if i < len(arrays) and arrays[i] else ch
              for i, ch in enumerate(chunks)]
    fast, ref = (FastRespReader(client_query_buffer_limit=limit) for _ in range(2))
    fast.auth_required = ref.auth_required = auth
    for i, ch in enumerate(chunks):
        outcome = []
        for reader, feed, let_go in ((fast, lambda r, d: first(r, d), release),
                                     (ref, FastRespReader.feed_first, FastRespReader.release)):
            try:
                got = [feed(reader, ch)]
                for _ in range(gets[i] if i < len(gets) else 1):
                    got.append(reader.gets())
                if i < len(releases) and releases[i]:
                    let_go(reader)
            except ProtocolError as e:
                got.append(("error", str(e)))
            outcome.append((got, _state(reader)))
        assert outcome[0] == outcome[1]


def test_a_batch_someone_holds_never_changes():
    """``first`` keeps the batch it lets go of for its next read, of any reader (_scan.c's
    spare: its tuple and lists are filled again), but only when the reader alone held it. A
    batch, its request list or a request that anyone else holds stays as it was through the
    later reads of that reader and of another; and each read's slots are the reference's."""
    fast, ref = [FastRespReader(), FastRespReader()], [FastRespReader(), FastRespReader()]
    held = []
    for i in range(60):
        for k in (0, 1):
            req = enc(b"SET", b"k%d:%d" % (k, i), b"v" * i)
            got, want = first(fast[k], req), FastRespReader.feed_first(ref[k], req)
            assert got == want == [b"SET", b"k%d:%d" % (k, i), b"v" * i]
            assert _state(fast[k]) == _state(ref[k])
            batch = fast[k]._batch
            kept = (batch, batch[0], batch[0][0], batch[4])[i % 5] if i % 5 < 4 else None
            if kept is not None:
                held.append((kept, repr(kept)))
            del batch, kept
    for obj, was in held:
        assert repr(obj) == was


def test_first_takes_any_reader():
    """The pure reader, or a subclass, goes the general way (their own ``feed_first``)."""
    class Sub(FastRespReader):
        calls = 0

        def feed_first(self, data):
            self.calls += 1
            return FastRespReader.feed_first(self, data)

    pure, sub = RespReader(), Sub()
    assert first(pure, enc(b"PING")) is None
    assert pure.gets() == [b"PING"]
    assert first(sub, enc(b"PING")) == [b"PING"] and sub.calls == 1
    with pytest.raises(TypeError):
        first(FastRespReader())


def test_a_spent_reads_requests_and_bytes_go_once_they_have_all_run():
    """Redis frees a request's arguments as it completes; the fast reader keeps a read's batch
    (every request's arguments, the read's bytes) while its requests run, and ``release``
    lets them go once the last has been returned. Nothing before: a request still queued, or
    a read not scanned to its end, keeps its batch. The offsets go on exactly."""
    for let_go in (release, FastRespReader.release):
        reader = FastRespReader()
        reqs = [enc(b"SET", b"k%d" % i, b"v" * 100) for i in range(50)]
        data = b"".join(reqs)
        assert first(reader, data) == [b"SET", b"k0", b"v" * 100]
        let_go(reader)                          # 49 still queued: kept
        assert reader._batch is not None and len(reader.queue) == 49
        while reader.queue:
            reader.gets()
        argv = reader._batch[0][-1]
        before = sys.getrefcount(argv)
        let_go(reader)
        assert reader._batch is None and reader._buf == b"" and reader._pos == 0
        assert sys.getrefcount(argv) == before - 1    # (the batch's reference went)
        assert reader.consumed == reader._base == len(data) and reader.unparsed() == 0
        assert first(reader, reqs[0] + reqs[1][:10]) == [b"SET", b"k0", b"v" * 100]
        assert not reader.spent                 # (a partial request follows: nothing to let go)
        let_go(reader)
        assert reader._batch is not None
        reader.feed(reqs[1][10:])
        assert reader.gets() == [b"SET", b"k1", b"v" * 100] and reader.gets() is None
        assert reader.consumed == len(data) + len(reqs[0]) + len(reqs[1])
        assert reader._buf == b""               # (gets() saying "nothing left" lets it go too)
