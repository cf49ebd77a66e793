"""The C loops of a run of plain commands (``pyrepl._plainrun``) and their Python references
against the Python they stand for: ``run_length`` against a model of plainrun's selection,
``store_pairs`` and ``lookup_strings`` against the dict loops, on any requests (wrong shapes
included), and ``bulk_replies`` against the writer's ``encode`` of each reply. As plain Python
(pyrepl/native.py) the references alone run, and the C's argument checks are skipped."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pyrepl import native, plainrun
from pyrepl.commands import keys, strings
from pyrepl.resp import writer
from pyrepl.resp.writer import encode, encode_replies

_C = native.load("pyrepl._plainrun")
IMPLS = {"python": SimpleNamespace(run_length=plainrun.run_length_reference,
                                   store_pairs=strings.store_pairs_reference,
                                   lookup_strings=strings.lookup_strings_reference,
                                   bulk_replies=writer.bulk_replies_reference,
                                   int_replies=writer.int_replies_reference,
                                   count_keys=keys.count_keys_reference)}
if _C is not None:
    IMPLS["c"] = _C   # type: ignore[assignment]
each_impl = pytest.mark.parametrize("impl", list(IMPLS.values()), ids=list(IMPLS))
c_only = pytest.mark.skipif(_C is None, reason=f"tests the C extension itself ({native.WHY_PURE})")


def model_run_length(rest: list, name: bytes, lo: int, hi: int) -> int:
    """The reference: the requests at the end of ``rest`` (last first) that are ``name``'s
    with an argument count in [lo, hi], up to the first that is not."""
    k = 0
    for r in reversed(rest):
        if not (type(r) is list and r and lo <= len(r) <= hi and type(r[0]) is bytes and
                r[0] == name):
            break
        k += 1
    return k


NAMES = st.sampled_from([b"SET", b"set", b"GET", b"", b"SETX"])


@each_impl
@settings(max_examples=400, deadline=None)
@given(rest=st.lists(st.lists(NAMES | st.binary(max_size=3), max_size=4), max_size=12),
       name=NAMES, lo=st.integers(0, 4), span=st.integers(0, 3), shared=st.booleans())
def test_run_length_is_the_model(impl, rest, name, lo, span, shared):
    """``run_length`` counts what the model counts, whatever the requests hold; an argument
    equal to ``name`` counts whether or not it is the same object."""
    if shared:   # the scan hands a repeated name back as the same object
        rest = [[name, *r[1:]] if r and r[0] == name else r for r in rest]
    hi = lo + span
    assert impl.run_length(rest, name, lo, hi) == model_run_length(rest, name, lo, hi)
    assert impl.run_length(rest, name, lo, 2**62) == model_run_length(rest, name, lo, 2**62)


@c_only
def test_run_length_refuses_what_is_not_a_queue():
    run_length = _C.run_length
    with pytest.raises(TypeError):
        run_length((), b"SET", 1, 3)
    with pytest.raises(TypeError):
        run_length([], "SET", 1, 3)
    assert run_length([[b"SET", b"k", b"v"], (b"SET", b"k", b"v")], b"SET", 1, 3) == 0
    assert run_length([[1, 2], [b"SET"]], b"SET", 1, 3) == 1


REQ = st.lists(st.binary(max_size=2), max_size=4)


@each_impl
@settings(max_examples=300, deadline=None)
@given(start=st.dictionaries(st.binary(max_size=2), st.binary(max_size=2), max_size=6),
       reqs=st.lists(REQ, max_size=10))
def test_store_pairs_is_the_loop_or_nothing(impl, start, reqs):
    """Every request a list of three: the dict as the loop leaves it (a repeated key: the
    last wins). Else False, and the dict as it was."""
    d, want = dict(start), dict(start)
    ok = all(len(r) == 3 for r in reqs)
    if ok:
        for r in reqs:
            want[r[1]] = r[2]
    assert impl.store_pairs(d, reqs) is ok
    assert d == want and list(d) == list(want)


@each_impl
@settings(max_examples=300, deadline=None)
@given(d=st.dictionaries(st.binary(max_size=2), st.binary(max_size=2) | st.integers() |
                         st.just(["a list"]), max_size=6),
       keys=st.lists(st.binary(max_size=2), max_size=10))
def test_lookup_strings_is_the_lookup_while_all_are_strings(impl, d, keys):
    reqs = [[b"GET", k] for k in keys]
    vals = [d.get(k) for k in keys]
    got = impl.lookup_strings(d, reqs)
    if all(v is None or type(v) is bytes for v in vals):
        assert got == vals and all(a is b for a, b in zip(got, vals, strict=True))
    else:
        assert got is None


@c_only
def test_lookup_strings_refuses_a_request_without_a_key():
    lookup_strings, store_pairs = _C.lookup_strings, _C.store_pairs
    with pytest.raises(ValueError):
        lookup_strings({}, [[b"GET", b"k"], [b"GET"]])
    with pytest.raises(TypeError):
        lookup_strings({}, ([b"GET", b"k"],))
    with pytest.raises(TypeError):
        store_pairs([], [])


BULK = st.none() | st.binary(max_size=12) | st.sampled_from([b"x" * 9, b"y" * 10, b"z" * 100,
                                                             b"w" * 1000, b"\r\n$-1"])


@each_impl
@settings(max_examples=400, deadline=None)
@given(replies=st.lists(BULK, max_size=20), other=st.none() | st.integers(0, 20),
       proto=st.sampled_from([2, 3]))
def test_bulk_replies_are_the_encoded_replies(impl, replies, other, proto):
    """Bulk strings and nils: exactly ``encode``'s bytes of each, joined (RESP2 and RESP3);
    anything else among them: None, and ``encode_replies`` still encodes them all."""
    nil = b"_\r\n" if proto == 3 else b"$-1\r\n"
    if other is not None:
        replies.insert(min(other, len(replies)), 7 if other % 2 else "a str")
        assert impl.bulk_replies(replies, nil) is None
    else:
        assert impl.bulk_replies(replies, nil) == b"".join(encode(r, proto) for r in replies)
    if other is None or other % 2:   # (a str is no reply value)
        assert b"".join(encode_replies(replies, proto)) == \
            b"".join(encode(r, proto) for r in replies)


@c_only
def test_bulk_replies_refuses_what_is_not_a_list():
    bulk_replies = _C.bulk_replies
    with pytest.raises(TypeError):
        bulk_replies((b"a",), b"$-1\r\n")
    assert bulk_replies([], b"$-1\r\n") == b""


INTS = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1),
                st.sampled_from([0, 1, -1, 9, 10, -10, (1 << 63) - 1, -(1 << 63)]))


@each_impl
@settings(max_examples=400, deadline=None)
@given(replies=st.lists(INTS, max_size=20), other=st.none() | st.integers(0, 20),
       kind=st.sampled_from([True, 1 << 63, -(1 << 63) - 1, b"1", None, 1.0]),
       proto=st.sampled_from([2, 3]))
def test_int_replies_are_the_encoded_replies(impl, replies, other, kind, proto):
    """Integers: exactly ``encode``'s bytes of each, joined (RESP2 and RESP3); anything else
    among them (a bool, an int past a long long, bytes, a nil, a double): None, and
    ``encode_replies`` still encodes them all."""
    if other is not None:
        replies.insert(min(other, len(replies)), kind)
        assert impl.int_replies(replies) is None
    else:
        assert impl.int_replies(replies) == b"".join(encode(r, proto) for r in replies)
    assert b"".join(encode_replies(replies, proto)) == \
        b"".join(encode(r, proto) for r in replies)


@each_impl
@settings(max_examples=300, deadline=None)
@given(d=st.dictionaries(st.binary(max_size=2), st.binary(max_size=2), max_size=6),
       reqs=st.lists(st.one_of(st.binary(max_size=2).map(lambda k: [b"EXISTS", k]),
                               st.just([b"EXISTS", b"a", b"b"]), st.just([b"EXISTS"])),
                     max_size=10))
def test_count_keys_is_the_membership_of_each_key(impl, d, reqs):
    """One-key requests: 1 or 0 as each key is in the dict (or a database's KeyTable); a
    request of another shape among them: None."""
    from pyrepl.keyspace.ktable import KeyTable

    want = [int(r[1] in d) for r in reqs] if all(len(r) == 2 for r in reqs) else None
    assert impl.count_keys(d, reqs) == want
    table = KeyTable()
    for k, v in d.items():
        table[k] = v
    assert impl.count_keys(table, reqs) == want


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(st.tuples(st.sampled_from(["set", "get", "incr", "nostat"]),
                               st.integers(1, 40), st.booleans(),
                               st.one_of(st.integers(0, 3000),
                                         st.integers(0, 10 ** 13))), min_size=1, max_size=8),
       tracking=st.booleans())
@c_only
def test_account_is_plainruns(runs, tracking):
    """``account`` (C) leaves a client and INFO commandstats (calls, timed calls and time,
    the latency histogram's buckets) as ``plainrun.account`` does, for any run (of one
    command or mixed; a command whose stats record does not exist yet) and time."""
    account = _C.account
    from pyrepl.commands.table import COMMANDS
    from pyrepl.config import Config
    from pyrepl.core.server import ServerCore

    def world():
        core = ServerCore(Config.load(None, [("save", [""]), ("latency-tracking",
                                                              ["yes" if tracking else "no"])]))
        for name in ("set", "get", "incr"):
            core.command_stat(COMMANDS[name.encode()])
        return core, core.connection_made()

    def look(core, c):
        return (c.commands, c.last_cmd.name, sorted(
            (k.name, s.calls, s.timed, s.timed_ns, sorted(s.latency.counts.items()))
            for k, s in core.cmdstats.items()))

    (a, ca), (b, cb) = world(), world()
    for name, n, mixed, ns in runs:
        cmds = [COMMANDS[b"ping" if name == "nostat" else name.encode()]] * n
        if mixed:
            cmds = cmds + [COMMANDS[b"get"]]
        one = cmds.count(cmds[0]) == len(cmds)
        account(a, ca, list(cmds), one, ns)
        plainrun.account(b, cb, list(cmds), one, ns)
        assert look(a, ca) == look(b, cb)


@settings(max_examples=300, deadline=None)
@given(first=st.sampled_from([["SET", "k", "v"], ["GET", "k"], ["SET", "k"], ["INCR", "n"],
                              ["DEL", "k"], ["NOSUCH"], ["set", "k", "v"], ["GET", "k", "x"],
                              ["MULTI"], ["EXEC"]]),
       rest=st.lists(st.sampled_from([["SET", "a", "1"], ["GET", "a"], ["SET", "a"],
                                      ["set", "b", "2"], ["INCR", "n"], ["PING"],
                                      ["GET", "a", "x"]]), max_size=8),
       state=st.sampled_from(["plain", "multi", "reply", "gated", "waited", "tracking",
                              "unstated", "untimed"]))
@example(first=["GET", "k", "x"], rest=[["GET", "a"]], state="plain")   # too many arguments
@example(first=["SET", "k", "v"], rest=[["GET", "a"], ["SET", "a", "1"], ["SET", "b", "2"]],
         state="plain")                                                # a run, then another
@c_only
def test_start_is_plainruns(first, rest, state):
    """``start`` (C) answers what ``plainrun.start`` answers, for any request behind any
    others and any client or server state: None, or the same commands, the same request
    objects in the same order, and ``one``."""
    start = _C.start
    from pyrepl.commands.table import COMMANDS
    from pyrepl.config import Config
    from pyrepl.core.server import ServerCore

    core = ServerCore(Config.load(None, [("save", [""])]))
    c = core.connection_made()
    for name in (b"set", b"get", b"incr", b"del", b"ping", b"multi", b"exec"):
        core.command_stat(COMMANDS[name])
    for spelling in (b"SET", b"GET", b"INCR", b"DEL", b"PING", b"set", b"MULTI", b"EXEC"):
        core.name_cache[spelling] = COMMANDS[spelling.lower()]
    if state == "multi":
        c.in_multi = True
    elif state == "reply":
        c.reply_mode = 2
    elif state in ("gated", "waited", "tracking"):
        setattr(core, {"gated": "gated", "waited": "keys_waited",
                       "tracking": "tracking_on"}[state], True)
    elif state == "unstated":
        core.cmdstats.clear()
    elif state == "untimed":
        for s in core.cmdstats.values():
            s.timing = 0
    f = [a.encode() for a in first]
    r = [[a.encode() for a in x] for x in rest]
    got, want = start(core, c, f, r), plainrun.start(core, c, f, r)
    if want is None:
        assert got is None
    else:
        assert got is not None and got[2] is want[2]
        assert [x.name for x in got[0]] == [x.name for x in want[0]]
        assert len(got[1]) == len(want[1]) and all(map(lambda a, b: a is b, got[1], want[1]))
