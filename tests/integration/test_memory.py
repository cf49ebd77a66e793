"""used_memory on a real server, through redis-py (issue 37 part 1): it rises with the keys
written and falls back when they go; INFO memory's fields agree with each other; MEMORY USAGE
sums to about the growth; a plain-Python server reports RSS and says so."""

from __future__ import annotations

import time

import pytest
import redis

from pyrepl import native
from tests.support.procs import start_pyrepl

N = 50_000
pool_walk = pytest.mark.skipif(native.PURE, reason=f"plain Python ({native.WHY_PURE})")


def _memory(c: redis.Redis) -> dict[str, object]:
    return c.info("memory")


def _fill(c: redis.Redis, n: int = N, prefix: str = "key") -> None:
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"{prefix}:{i:08d}", "v" * 100)
        if i % 5000 == 4999:
            p.execute()
    p.execute()


def _consistent(m: dict[str, object]) -> None:
    used, rss = int(m["used_memory"]), int(m["used_memory_rss"])   # type: ignore[call-overload]
    overhead = int(m["used_memory_overhead"])                     # type: ignore[call-overload]
    assert int(m["used_memory_dataset"]) == max(0, used - overhead)  # type: ignore
    assert float(m["mem_fragmentation_ratio"]) == round(rss / used, 2)  # type: ignore[arg-type]
    assert int(m["mem_fragmentation_bytes"]) == rss - used        # type: ignore[call-overload]
    assert int(m["used_memory_peak"]) >= used                     # type: ignore[call-overload]
    assert used >= int(m["used_memory_startup"]) - (1 << 20)      # type: ignore[call-overload]
    for field in ("used_memory_human", "used_memory_rss_human", "used_memory_peak_human",
                  "used_memory_peak_perc", "used_memory_dataset_perc", "maxmemory",
                  "maxmemory_human", "maxmemory_policy", "mem_not_counted_for_evict",
                  "mem_clients_normal", "mem_clients_slaves", "mem_allocator"):
        assert field in m, field


@pool_walk
def test_used_memory_rises_with_keys_and_falls_when_they_go() -> None:
    """50k SETs of 100 bytes: used_memory grows by ~11 MB (each key ~200 B with its share of
    the table). FLUSHALL frees the keys and the table: back within 1 MiB of the start. DEL of
    each key frees the keys, and the cron shrinks the keyspace's table: back within 1 MiB too. RSS does not come back (glibc keeps the heap)."""
    with start_pyrepl() as srv:
        c = redis.Redis(port=srv.port)
        m0 = _memory(c)
        assert m0["mem_allocator"] == "pymalloc-poolwalk"
        _consistent(m0)
        used0 = int(m0["used_memory"])
        _fill(c)
        m1 = _memory(c)
        _consistent(m1)
        grown = int(m1["used_memory"]) - used0
        assert 8 << 20 < grown < 20 << 20, grown
        assert int(m1["used_memory_peak"]) >= int(m1["used_memory"])
        sample = sum(c.memory_usage(f"key:{i:08d}") for i in range(0, N, 50))
        assert abs(sample * 50 - grown) < grown * 0.15, (sample * 50, grown)
        c.flushall()
        m2 = _memory(c)
        _consistent(m2)
        assert abs(int(m2["used_memory"]) - used0) < 1 << 20, (used0, m2["used_memory"])
        assert int(m2["used_memory_peak"]) >= int(m1["used_memory"])
        _fill(c)
        p = c.pipeline(transaction=False)
        for i in range(N):
            p.delete(f"key:{i:08d}")
        p.execute()
        assert c.dbsize() == 0
        # the keyspace's table shrinks in the cron (KeyTable.shrink, Redis's
        # tryResizeHashTables): back within 1 MiB of the start, as after FLUSHALL
        deadline = time.monotonic() + 5
        while True:
            m3 = _memory(c)
            if abs(int(m3["used_memory"]) - used0) < 1 << 20 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        _consistent(m3)
        assert abs(int(m3["used_memory"]) - used0) < 1 << 20, (used0, m3["used_memory"])


@pool_walk
def test_memory_stats_and_usage_agree_with_info() -> None:
    with start_pyrepl() as srv:
        c = redis.Redis(port=srv.port)
        _fill(c, 20_000)
        stats = c.memory_stats()
        m = _memory(c)
        assert abs(stats["total.allocated"] - int(m["used_memory"])) < 256 * 1024
        assert stats["startup.allocated"] == int(m["used_memory_startup"])
        assert stats["keys.count"] == 20_000
        assert 100 < stats["keys.bytes-per-key"] < 400
        assert c.memory_usage("key:00000001") < 400
        assert "Sam" in c.execute_command("MEMORY", "DOCTOR").decode()


@pool_walk
def test_strings_that_are_integers_cost_no_object_and_memory_usage_says_so() -> None:
    """As Redis's OBJ_ENCODING_INT: 50k keys holding integers grow used_memory by ~40 B a key
    less than the same keys holding text of the same length, and MEMORY USAGE, which counts no
    value object for them, still sums to the growth."""
    with start_pyrepl() as srv:
        c = redis.Redis(port=srv.port)
        grown = {}
        for kind, value in (("int", lambda i: str(1_000_000 + i)), ("text", lambda i: f"x{i:06d}")):
            used0 = int(_memory(c)["used_memory"])
            p = c.pipeline(transaction=False)
            for i in range(N):
                p.set(f"{kind}:{i:08d}", value(i))
            p.execute()
            grown[kind] = int(_memory(c)["used_memory"]) - used0
            sample = sum(c.memory_usage(f"{kind}:{i:08d}") for i in range(0, N, 50))
            assert abs(sample * 50 - grown[kind]) < grown[kind] * 0.15, (kind, sample * 50, grown)
            assert c.get(f"{kind}:{N - 1:08d}") == value(N - 1).encode()
            assert c.object("encoding", f"{kind}:00000001") == (b"int" if kind == "int"
                                                                 else b"embstr")
        assert (grown["text"] - grown["int"]) / N > 32, grown
        assert c.memory_usage("text:00000001") - c.memory_usage("int:00000001") >= 32
        assert c.incr("int:00000001") == 1_000_002 and c.get("int:00000001") == b"1000002"


def test_a_plain_python_server_reports_rss_and_says_so(monkeypatch) -> None:
    monkeypatch.setenv("PYREPL_PURE", "1")
    with start_pyrepl() as srv:
        c = redis.Redis(port=srv.port)
        m = _memory(c)
        assert m["mem_allocator"] == "libc-rss"
        _consistent(m)
        # the RSS, counted from the interpreter's own at start (set_origin)
        assert abs(int(m["used_memory"]) + int(m["used_memory_interpreter"]) -
                   int(m["used_memory_rss"])) < 1 << 20
        assert "Memory accounting: rss (used_memory is the RSS: plain Python" in srv.log()


def test_used_memory_counts_from_the_interpreters_own() -> None:
    """The interpreter's code and modules (tens of MB) are not in used_memory: an empty server
    uses about what an empty Redis does, so a maxmemory written for Redis means the same."""
    with start_pyrepl() as srv:
        m = _memory(redis.Redis(port=srv.port))
        assert m["mem_allocator"] == "pymalloc-poolwalk"
        assert int(m["used_memory_interpreter"]) > 10 << 20
        assert int(m["used_memory"]) < 4 << 20
        assert int(m["used_memory_startup"]) <= int(m["used_memory"])
