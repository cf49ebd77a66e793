"""pyrepl.keyspace.scan: cursor parsing, options, and the snapshot paging guarantee."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.keyspace import scan
from pyrepl.keyspace.scan import parse_cursor, parse_scan_options, scan_page
from pyrepl.resp.types import ReplyError


def test_parse_cursor_like_strtoul() -> None:
    assert parse_cursor(b"0") == 0
    assert parse_cursor(b"") == 0
    assert parse_cursor(b"+5") == 5
    assert parse_cursor(b"007") == 7
    assert parse_cursor(b"-0") == 0
    assert parse_cursor(b"-1") == 2**64 - 1
    assert parse_cursor(b"-18446744073709551615") == 1
    assert parse_cursor(b"18446744073709551615") == 2**64 - 1
    assert parse_cursor(b"5\x00junk") == 5
    for bad in (b" 0", b"\t1", b"x", b"-", b"+", b"1x", b"1 ", b"18446744073709551616",
                b"-18446744073709551616", b"0x10", b"1.0"):
        with pytest.raises(ReplyError) as ei:
            parse_cursor(bad)
        assert ei.value.message == "ERR invalid cursor", bad


def test_parse_options() -> None:
    o = parse_scan_options([b"SCAN", b"0"], 2, True)
    assert (o.count, o.match, o.type) == (10, None, None)
    o = parse_scan_options([b"SCAN", b"0", b"count", b"5", b"MATCH", b"a*", b"TYPE", b"List"],
                           2, True)
    assert o.count == 5 and o.type == b"list" and o.match(b"abc") and not o.match(b"b")
    assert parse_scan_options([b"SCAN", b"0", b"MATCH", b"*"], 2).match is None
    for argv, msg in (([b"COUNT", b"0"], "ERR syntax error"),
                      ([b"COUNT", b"x"], "ERR value is not an integer or out of range"),
                      ([b"COUNT"], "ERR syntax error"), ([b"TYPE", b"string"], "ERR syntax error"),
                      ([b"FOO", b"1"], "ERR syntax error")):
        with pytest.raises(ReplyError) as ei:
            parse_scan_options([b"HSCAN", b"k", b"0", *argv], 3, False)
        assert ei.value.message == msg


def full(source, count: int, between=None) -> list:
    out = []
    cursor = 0
    for step in range(100000):
        cursor, page = scan_page(source, cursor, count)
        out.extend(x for x in page if x in source)
        if cursor == 0:
            return out
        if between is not None:
            between(step)
    raise AssertionError("no end")


def test_small_container_in_one_page() -> None:
    assert scan_page({b"a": 1, b"b": 2}, 0, 10) == (0, [b"a", b"b"])
    assert scan_page(set(), 0, 10) == (0, [])


def test_every_member_once_despite_changes() -> None:
    d = {b"stay%d" % i: 1 for i in range(300)}
    d.update({b"go%d" % i: 1 for i in range(300)})

    def churn(step: int) -> None:
        for j in range(step * 7, step * 7 + 7):
            d.pop(b"go%d" % j, None)
            d[b"new%d-%d" % (step, j)] = 1

    got = full(d, 13, churn)
    assert len(got) == len(set(got))
    assert {b"stay%d" % i for i in range(300)} <= set(got)


def test_repeating_a_cursor_repeats_the_page() -> None:
    d = {i: None for i in range(100)}
    c1, p1 = scan_page(d, 0, 10)
    c2, p2 = scan_page(d, c1, 10)
    assert scan_page(d, c1, 10) == (c2, p2)
    assert p1 == list(range(10)) and p2 == list(range(10, 20))


def test_unknown_cursor_falls_back_to_current_order() -> None:
    d = {i: None for i in range(100)}
    cursor = (12345 << 32) | 40  # a snapshot id that does not exist
    nxt, page = scan_page(d, cursor, 10)
    assert page == list(range(40, 50)) and nxt != 0
    assert scan_page(d, (12345 << 32) | 1000, 10) == (0, [])
    assert scan_page(d, 2**64 - 1, 10) == (0, [])


def test_registry_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "MAX_SNAPSHOTS", 4)
    monkeypatch.setattr(scan, "MAX_SNAPSHOT_ITEMS", 1000)
    sources = [{i: None for i in range(300)} for _ in range(10)]
    for s in sources:
        scan_page(s, 0, 10)
    assert len(scan._snapshots) <= 4
    assert scan._items <= 1000 or len(scan._snapshots) == 1
    assert scan._items == sum(len(v[1]) for v in scan._snapshots.values())


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(1, 20),
       st.lists(st.tuples(st.booleans(), st.integers(0, 80)), max_size=40))
def test_guarantee_property(n: int, count: int, ops: list[tuple[bool, int]]) -> None:
    s = set(range(n))
    present_always = set(s)
    it = iter(ops)

    def mutate(step: int) -> None:
        for add, x in [next(it, (True, 1000))]:
            if add:
                s.add(x)
            else:
                s.discard(x)
                present_always.discard(x)

    got = full(s, count, mutate)
    assert len(got) == len(set(got))
    assert present_always <= set(got)
