"""INFO commandstats and errorstats beside redis-server 7.0.15.

The same commands go to both servers (successes, errors raised while running, commands refused
before running, unknown commands, a transaction); the per-command ``calls``,
``rejected_calls`` and ``failed_calls`` and the per-code error counts must be equal. ``usec``
is a duration: checked for shape and consistency only. CONFIG RESETSTAT clears both sections.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import RawClient, info, info_sections

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CMDSTAT = re.compile(r"calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d),rejected_calls=(\d+),"
                     r"failed_calls=(\d+)")

SCRIPT: list[tuple[str, ...]] = [
    ("SET", "k", "v"), ("GET", "k"), ("GET", "k"), ("GET", "missing"),
    ("INCR", "k"),                       # failed: ERR value is not an integer
    ("LPUSH", "k", "x"),                 # failed: WRONGTYPE
    ("GET",),                            # rejected: arity
    ("NOSUCHCOMMAND", "x"),              # ERR, no command to count
    ("CONFIG", "GET", "port"), ("CONFIG", "NOSUCH"),
    ("MULTI",), ("SET", "a", "1"), ("INCR", "k"), ("GET",), ("EXEC",),   # EXECABORT
    ("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("EXEC",),
    ("PING",), ("PING", "a", "b"),
]


@pytest.fixture
def clients() -> Iterator[list[RawClient]]:
    """A client of a redis-server and one of a pyrepl, in that order: both servers fresh for
    the test and stopped after it."""
    with start_redis() as theirs, start_pyrepl() as ours, \
            RawClient(theirs.port) as a, RawClient(ours.port) as b:
        yield [a, b]


def stats(c: RawClient, section: str) -> dict[str, str]:
    return info(c, section)


def counts(cmdstats: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    out = {}
    for name, value in cmdstats.items():
        m = CMDSTAT.fullmatch(value)
        assert m, (name, value)
        calls, usec, per_call, rejected, failed = m.groups()
        assert int(usec) >= 0 and float(per_call) >= 0
        out[name] = (int(calls), int(rejected), int(failed))
    return out


def test_commandstats_and_errorstats_count_as_redis(clients: list[RawClient]) -> None:
    for c in clients:
        assert c.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
        for argv in SCRIPT:
            c.call(*argv)
    theirs, ours = (counts(stats(c, "commandstats")) for c in clients)
    assert ours == theirs
    assert theirs["cmdstat_get"] == (3, 2, 0) and theirs["cmdstat_incr"] == (2, 0, 1)
    errors = [stats(c, "errorstats") for c in clients]
    assert errors[1] == errors[0]
    assert errors[0]["errorstat_WRONGTYPE"] == "count=1"
    totals = [stats(c, "stats")["total_commands_processed"] for c in clients]
    assert totals[1] == totals[0]
    for c in clients:
        assert c.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    after = [counts(stats(c, "commandstats")) for c in clients]
    assert after[1] == after[0] == {"cmdstat_config|resetstat": (1, 0, 0)}
    assert [stats(c, "errorstats") for c in clients] == [{}, {}]


# Fields of Redis 7.0.15's INFO that have no meaning in pyrepl (yet): the C build and its
# allocator, and scripting's memory (issue 13).
NO_MEANING = {
    "gcc_version", "atomicvar_api", "allocator_allocated", "allocator_active",
    "allocator_resident", "allocator_frag_ratio", "allocator_frag_bytes", "allocator_rss_ratio",
    "allocator_rss_bytes", "rss_overhead_ratio", "rss_overhead_bytes", "used_memory_lua",
    "used_memory_vm_eval", "used_memory_lua_human", "used_memory_scripts_eval",
    "number_of_cached_scripts", "number_of_functions", "number_of_libraries",
    "used_memory_vm_functions", "used_memory_vm_total", "used_memory_vm_total_human",
    "used_memory_functions", "used_memory_scripts", "used_memory_scripts_human",
}


def info_fields(c: RawClient) -> dict[str, list[str]]:
    return {section: list(fields) for section, fields in info_sections(c, "everything").items()}


def test_every_info_field_of_redis_is_there(clients: list[RawClient]) -> None:
    for c in clients:
        c.call("SET", "k", "v")
        c.call("EXPIRE", "k", "100")
    theirs, ours = (info_fields(c) for c in clients)
    for section, names in theirs.items():
        missing = [n for n in names if n not in ours.get(section, []) and
                   n not in NO_MEANING]
        assert missing == [], section
        if section in ("Commandstats", "Errorstats", "Latencystats"):
            continue            # Redis lists these in its hash table's order
        # and in Redis's order (pyrepl's own fields may sit in between)
        common = [n for n in ours.get(section, []) if n in names]
        assert common == [n for n in names if n in common], section


LATENCY = re.compile(r"p50=(\d+\.\d{3}),p99=(\d+\.\d{3}),p99\.9=(\d+\.\d{3})")


def test_latencystats_as_redis(clients: list[RawClient]) -> None:
    for c in clients:
        c.call("CONFIG", "RESETSTAT")
        for i in range(200):
            c.call("SET", f"k{i}", "v")
        c.call("GET", "k1")
    stats_by_server = [stats(c, "latencystats") for c in clients]
    for got in stats_by_server:
        assert {"latency_percentiles_usec_set", "latency_percentiles_usec_get",
                "latency_percentiles_usec_config|resetstat"} <= set(got)
        for name, value in got.items():
            m = LATENCY.fullmatch(value)
            assert m, (name, value)
            p50, p99, p999 = (float(x) for x in m.groups())
            assert 0 < p50 <= p99 <= p999 < 1_000_000, (name, value)
    # the names both servers list are the same (pyrepl times one SET in 16: still listed)
    assert set(stats_by_server[1]) == set(stats_by_server[0])
    # the shown percentiles follow the directive; "no" turns the section off
    for c in clients:
        assert c.call("CONFIG", "SET", "latency-tracking-info-percentiles", "90 99.99") == \
            b"+OK\r\n"
    shown = [stats(c, "latencystats")["latency_percentiles_usec_set"] for c in clients]
    for value in shown:
        assert re.fullmatch(r"p90=\d+\.\d{3},p99\.99=\d+\.\d{3}", value), value
    for c in clients:
        assert c.call("CONFIG", "SET", "latency-tracking", "no") == b"+OK\r\n"
    assert [stats(c, "latencystats") for c in clients] == [{}, {}]
