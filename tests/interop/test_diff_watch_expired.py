"""WATCH of keys that are logically expired, side by side with Redis 7.0.15 (multi.tcl's stale-key
cases): the deletion of a key that was already expired when WATCHed is no change (lazy expiry,
DEL, FLUSHDB), SWAPDB touches a watched key only when something changes logically (an expired
key replaced with none or another expired one, no key replaced with an expired one: no), and a
key that expires after the WATCH and is deleted by the active expiry does fail EXEC."""

from __future__ import annotations

import time

import pytest

from tests.support.differential import Pair

STALE_CASES = {
    # name: commands run on both after "SET x foo PX 1" has expired (active expiry off)
    "lazy expiry by EXISTS": [("WATCH", "x"), ("EXISTS", "x")],
    "DEL": [("WATCH", "x"), ("DEL", "x")],
    "FLUSHDB": [("WATCH", "x"), ("FLUSHDB",)],
    "SWAPDB, expired key replaced with none": [("SELECT", "1"), ("SET", "x", "foo", "PX", "1"),
                                               ("SLEEP",), ("WATCH", "x"), ("SWAPDB", "0", "1")],
}


@pytest.fixture
def pair(servers):
    p = Pair(servers[0], servers[1], 2)
    p.both("FLUSHALL")
    p.both("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    yield p
    p.both("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    p.both("SELECT", "0")
    p.close()


def _run(pair: Pair, steps: list[tuple[str, ...]]) -> None:
    for argv in steps:
        if argv == ("SLEEP",):
            time.sleep(0.01)
        else:
            pair.check(*argv)


def _exec(pair: Pair) -> None:
    pair.check("MULTI")
    pair.check("PING")
    pair.check("EXEC")


@pytest.mark.parametrize("case", list(STALE_CASES))
def test_a_watched_stale_key_gone_is_no_change(pair, case: str) -> None:
    pair.check("SET", "x", "foo", "PX", "1")
    time.sleep(0.01)
    _run(pair, STALE_CASES[case])
    _exec(pair)


def test_swapdb_no_key_replaced_with_a_stale_one_and_stale_with_stale(pair) -> None:
    pair.check("SET", "x", "foo", "PX", "1")        # db 0: an expired key
    time.sleep(0.01)
    pair.check("SELECT", "1")
    pair.check("WATCH", "x")                       # db 1: no key
    pair.check("SWAPDB", "0", "1")
    _exec(pair)
    pair.check("FLUSHALL")
    pair.check("SET", "x", "foo", "PX", "1")        # db 1
    pair.check("SELECT", "0")
    pair.check("SET", "x", "bar", "PX", "1")        # db 0
    time.sleep(0.01)
    pair.check("SELECT", "1")
    pair.check("WATCH", "x")
    pair.check("SWAPDB", "0", "1")
    _exec(pair)
    # and what does change: a live key replaced, a stale key replaced with a live one
    pair.check("FLUSHALL")
    pair.check("SET", "x", "live")
    pair.check("SELECT", "0")
    pair.check("WATCH", "x")
    pair.check("SWAPDB", "0", "1")
    _exec(pair)
    pair.check("SET", "x", "foo", "PX", "1")
    time.sleep(0.01)
    pair.check("WATCH", "x")
    pair.check("SELECT", "1")
    pair.check("SET", "x", "live2")
    pair.check("SWAPDB", "0", "1")
    pair.check("SELECT", "0")
    _exec(pair)


def test_a_key_that_expires_after_the_watch_fails_exec(pair) -> None:
    """multi.tcl "WATCH will consider touched expired keys": the active expiry's deletion
    touches it."""
    pair.both("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    pair.check("SET", "x", "foo", "PX", "100")
    pair.check("WATCH", "x")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pair.both("DBSIZE") != (b":0\r\n", b":0\r\n"):
        time.sleep(0.05)
    pair.check("DBSIZE")
    _exec(pair)
