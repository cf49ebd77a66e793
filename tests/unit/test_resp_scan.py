"""The C scan (``pyrepl.resp._scan.scan``) and its Python reference (``pyrepl.resp.scan``)
against the pure reader, the reference; as plain Python (pyrepl/native.py) the Python alone.

What it returns must be a prefix of what the pure reader parses from the same bytes (the
same arguments, the same ends, and bytes that are exactly the arguments' RESP encoding, as
propagation copies them), and for canonical requests the whole of it: it never takes
a request the pure reader would read otherwise or refuse, and never stops before a canonical
request that lies complete within its window and limits."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.resp.reader import ProtocolError, RespReader
from pyrepl.resp.scan import scan_reference

_C = native.load("pyrepl.resp._scan")
SCANS = {"python": scan_reference, **({"c": _C.scan} if _C is not None else {})}
each_scan = pytest.mark.parametrize("scan", list(SCANS.values()), ids=list(SCANS))

BIG = 512 * 1024 * 1024
INT_MAX = 2**31 - 1


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def pure(data: bytes, maxbulk: int = BIG, auth: bool = False) -> list[tuple[list[bytes], int]]:
    """The requests the pure reader returns from ``data``, each with its end, up to the first
    error or incomplete request."""
    r = RespReader(maxbulk)
    r.auth_required = auth
    r.feed(data)
    out = []
    try:
        while (argv := r.gets()) is not None:
            out.append((argv, r.consumed))
    except ProtocolError:
        pass
    return out


ARG = st.binary(max_size=10) | st.sampled_from([
    b"", b"*", b"$", b"\r\n", b"*1\r\n$1\r\na\r\n", b"x" * 99, b"y" * 100, b"z" * 1000])
# Changes to one byte of a canonical stream (or a cut): each may make it something the pure
# reader reads otherwise, refuses, or still reads the same.
BYTES = st.sampled_from(list(b"*$\r\n0123456789-+ \x00aZ:"))


@each_scan
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.lists(ARG, min_size=1, max_size=4), min_size=1, max_size=8),
       edits=st.lists(st.tuples(st.integers(0, 10**6), BYTES), max_size=3),
       cut=st.integers(0, 10**6), lead=st.binary(max_size=3),
       maxbulk=st.sampled_from([0, 3, 100, BIG]), auth=st.booleans())
def test_scan_is_a_prefix_of_the_pure_reader(scan, reqs, edits, cut, lead, maxbulk, auth):
    data = bytearray(b"".join(enc(*a) for a in reqs))
    for at, byte in edits:
        data[at % len(data)] = byte
    data = bytes(data[:cut % (len(data) + 1)])
    count, bulk = (10, min(maxbulk, 16384)) if auth else (INT_MAX, maxbulk)
    got, ends = scan(lead + data, len(lead), 1 << 20, count, bulk, 1000 - len(lead), False)
    ref = pure(data, maxbulk, auth)
    assert list(zip(got, ends, strict=True)) == [(a, 1000 + e) for a, e in ref[:len(got)]]
    # and each one's bytes are its canonical encoding (propagation copies them)
    starts = [1000, *ends]
    assert [data[s - 1000:e - 1000] for s, e in zip(starts, ends, strict=False)] == [enc(*a) for a in got]
    if not edits and not auth:   # canonical: everything complete is taken
        assert len(got) == len(ref)


@each_scan
@settings(max_examples=200, deadline=None)
@given(reqs=st.lists(st.lists(ARG, min_size=1, max_size=4), min_size=1, max_size=20),
       window=st.integers(0, 2000))
def test_window_bounds_where_requests_start(scan, reqs, window):
    data = b"".join(enc(*a) for a in reqs)
    got, ends = scan(data, 0, window, INT_MAX, BIG, 0, False)
    starts = [0, *(e for _, e in pure(data))][:len(reqs)]
    assert got == [a for a, s in zip(reqs, starts, strict=True) if s < window]
    assert ends == [e for _, e in pure(data)][:len(got)]


@each_scan
def test_inputs_of_every_buffer_type_and_position(scan):
    data = enc(b"SET", b"k", b"v") + enc(b"PING")
    for buf in (data, bytearray(data), memoryview(data)):
        assert scan(buf, 0, 65536, INT_MAX, BIG, 0, True) == ([[b"SET", b"k", b"v"], [b"PING"]],
                                                          [27, 41])
        assert scan(buf, 27, 65536, INT_MAX, BIG, 5, False) == ([[b"PING"]], [46])
        assert scan(buf, len(data), 65536, INT_MAX, BIG, 0, True) == ([], [])
    with pytest.raises(ValueError):
        scan(data, len(data) + 1, 65536, INT_MAX, BIG, 0, False)
    with pytest.raises(TypeError):
        scan("text", 0, 65536, INT_MAX, BIG, 0, False)


@each_scan
@pytest.mark.parametrize("header", [b"*2000000000\r\n", b"*999999999\r\n$1\r\na\r\n",
                                    b"*" + b"9" * 18 + b"\r\n"])
def test_a_huge_count_allocates_nothing(scan, header):
    tracemalloc.start()
    try:
        assert scan(enc(b"PING") + header, 0, 65536, INT_MAX, BIG, 0, True) == \
            ([[b"PING"]], [14])
        assert tracemalloc.get_traced_memory()[1] < 64 * 1024
    finally:
        tracemalloc.stop()


@each_scan
def test_limits_stop_the_scan(scan):
    data = enc(b"a" * 11) + enc(*[b"k"] * 11)
    assert scan(data, 0, 65536, INT_MAX, 10, 0, False) == ([], [])
    assert len(scan(data, 0, 65536, INT_MAX, 11, 0, False)[0]) == 2
    assert scan(data, 0, 65536, 10, 11, 0, False)[0] == [[b"a" * 11]]
    assert len(scan(data, 0, 65536, 11, 11, 0, False)[0]) == 2


@pytest.mark.skipif(_C is None, reason=f"the C scan's name cache ({native.WHY_PURE})")
def test_a_repeated_command_name_is_one_object():
    """A first argument equal to one scanned before is that object again (no allocation,
    identity compares, its hash cached), in one scan and across scans; names over 32 bytes
    and other arguments are not shared."""
    scan = _C.scan
    reqs, _ = scan(enc(b"SET", b"k", b"SET") + enc(b"SET", b"k2", b"v"), 0, 1 << 16,
                   INT_MAX, BIG, 0, False)
    assert reqs[0][0] is reqs[1][0] and reqs[0][0] == b"SET"
    assert reqs[0][2] is not reqs[0][0]
    again, _ = scan(enc(b"SET", b"x", b"y"), 0, 1 << 16, INT_MAX, BIG, 0, False)
    assert again[0][0] is reqs[0][0]
    other, _ = scan(enc(b"GET", b"x") + enc(b"set", b"x", b"y"), 0, 1 << 16, INT_MAX, BIG, 0,
                    False)
    assert other[0][0] == b"GET" and other[1][0] == b"set"
    long = b"N" * 33
    big, _ = scan(enc(long) * 2, 0, 1 << 16, INT_MAX, BIG, 0, False)
    assert big[0][0] == big[1][0] == long and big[0][0] is not big[1][0]


@pytest.mark.skipif(_C is None, reason=f"the C scan's name cache ({native.WHY_PURE})")
def test_a_transactions_names_are_kept_apart():
    """The names of a transaction (MULTI, its commands, EXEC) are each one object across
    requests and reads, not only the last one; names that share a place in the table (a
    thousand of them cannot all have their own) still come back equal to what was sent."""
    scan = _C.scan
    tx = [(b"MULTI",), (b"SET", b"k", b"v"), (b"EXPIRE", b"k", b"9"), (b"GET", b"k"), (b"EXEC",)]
    data = b"".join(enc(*c) for c in tx)
    first, _ = scan(data, 0, 1 << 16, INT_MAX, BIG, 0, False)
    second, _ = scan(data, 0, 1 << 16, INT_MAX, BIG, 0, False)
    assert [r[0] for r in first] == [c[0] for c in tx]
    assert all(a[0] is b[0] for a, b in zip(first, second, strict=True))
    names = [b"c%d" % i for i in range(1000)]
    many, _ = scan(b"".join(enc(n) for n in names), 0, 1 << 20, INT_MAX, BIG, 0, False)
    assert [r[0] for r in many] == names
    later, _ = scan(data, 0, 1 << 16, INT_MAX, BIG, 0, False)
    assert [r[0] for r in later] == [c[0] for c in tx]



# -- inline requests --------------------------------------------------------------------------

INLINE_ARG = st.binary(min_size=1, max_size=6) | st.sampled_from([
    b"PING", b"SET", b"k", b"x" * 70, b'"q"', b"'s'", b"*", b"*1", b"a\x00b", b"\x0b", b"\x0c"])
SEP = st.sampled_from([b" ", b"  ", b"\t", b"\r", b" \t "])
END = st.sampled_from([b"\r\n", b"\n", b"\r\r\n", b" \r\n", b""])


@st.composite
def inline_lines(draw):
    """Inline lines of random arguments, separators and ends (some not simple, some empty,
    some cut), with an occasional multibulk request between them."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 5)) == 0:
            out.append(enc(*draw(st.lists(ARG, min_size=1, max_size=3))))
            continue
        args = draw(st.lists(INLINE_ARG, max_size=4))
        lead = draw(st.sampled_from([b"", b" ", b"\t"]))
        out.append(lead + b"".join(a + draw(SEP) for a in args[:-1]) + b"".join(args[-1:]) +
                   draw(END))
    return b"".join(out)


def _simple(line: bytes) -> bool:
    """A line the scan takes: an argument, and none of what sdssplitargs reads otherwise."""
    return bool(line.strip(b" \t\r")) and \
        not any(b in line for b in (b'"', b"'", b"\x0b", b"\x0c", b"\x00"))


@each_scan
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=inline_lines(), cut=st.integers(0, 10**6), window=st.sampled_from([3, 1 << 20]))
def test_inline_scan_is_a_prefix_of_the_pure_reader(scan, data, cut, window):
    """Inline batches: the same arguments and ends as the pure reader; a batch of one kind
    (an inline one stops at a ``*``); every complete simple line up to there taken."""
    data = data[:cut % (len(data) + 1)]
    got, ends = scan(b"#" + data, 1, window, INT_MAX, BIG, 500, True)
    ref = pure(data)
    assert list(zip(got, ends, strict=True)) == [(a, 501 + e) for a, e in ref[:len(got)]]
    if data[:1] == b"*":
        return
    starts = [0, *(e - 501 for e in ends)]
    assert all(data[s:s + 1] != b"*" for s in starts[:-1])
    at = starts[-1]   # where it stopped: the window, a "*", the end, or a line not simple
    if at < window and at < len(data) and data[at:at + 1] != b"*":
        nl = data.find(b"\n", at)
        assert nl < 0 or not _simple(data[at:nl])


@each_scan
def test_inline_examples(scan):
    lines = b"PING\r\nSET k  v\n\tGET\tk \r\n*1\r\n$4\r\nPING\r\n"
    assert scan(lines, 0, 1 << 16, INT_MAX, BIG, 0, True) == (
        [[b"PING"], [b"SET", b"k", b"v"], [b"GET", b"k"]], [6, 15, 24])
    assert scan(lines, 0, 1 << 16, INT_MAX, BIG, 0, False) == ([], [])   # (a master's)
    assert scan(lines, 24, 1 << 16, INT_MAX, BIG, 0, True) == ([[b"PING"]], [38])
    # not simple, empty or not complete: the pure reader's
    for line in (b'SET k "v"\r\n', b"SET k 'v'\n", b"\r\n", b"  \n", b"PING", b"A\x00\n",
                 b"SET k a\x0bb\n"):
        assert scan(b"PING\n" + line, 0, 1 << 16, INT_MAX, BIG, 0, True) == ([[b"PING"]], [5])
