"""Memory accounting (pyrepl/memacct.py, pyrepl/_memacct.c): the pool walk's used_memory follows
what the process allocates (checked against CPython's own statistics over every arena, and
glibc's), rises and falls; the RSS meter where it cannot run; INFO memory's fields consistent
with the meter; MEMORY USAGE summed close to the growth it measures."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl import memacct, native
from pyrepl.core import memory
from pyrepl.core.info import section_memory
from tests.support.cores import make_core, run
from tests.unit.fakes import FakeMeter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_walk = pytest.mark.skipif(native.PURE, reason=f"plain Python ({native.WHY_PURE})")


def _python(code: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("PYREPL_PURE", "PYTHONMALLOC")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _truth() -> int:
    """Ground truth of what the meter counts: pymalloc's bytes over every arena (CPython's
    statistics) + glibc's heap in use (which also holds C libraries' own blocks)."""
    pym, heap = memacct.ground_truth()
    return pym + heap


@pytest.fixture(scope="module")
def walk() -> memacct.PoolWalkMeter:
    if native.PURE:
        pytest.skip(f"plain Python ({native.WHY_PURE})")
    assert memacct.install() == memacct.POOL_WALK, memacct.why_not()
    m = memacct.meter()
    assert isinstance(m, memacct.PoolWalkMeter)
    return m


def test_install_is_idempotent_and_the_meter_says_its_kind(walk: memacct.PoolWalkMeter) -> None:
    assert memacct.install() == memacct.POOL_WALK and memacct.why_not() == ""
    assert walk.kind == "pool-walk" and memacct.stats()["installed"] == 1
    assert memacct.stats()["walk_tested"] == 1 or memacct.stats()["arenas_made"] >= 0


Op = tuple[str, int]
ops = st.lists(st.tuples(st.sampled_from(["bytes", "dict", "list", "free"]),
                         st.integers(min_value=0, max_value=4000)), min_size=1, max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_used_tracks_the_ground_truth_through_allocations_and_frees(
        walk: memacct.PoolWalkMeter, script: list[Op]) -> None:
    """Random allocations and frees of bytes, dicts and lists of up to thousands of elements:
    used(fresh=True) moves as the ground truth does, within 64 KiB (glibc's own bookkeeping and
    what C code allocates without CPython's API) — the pymalloc part to the byte."""
    held: list[object] = []
    u0, t0, p0 = walk.used(fresh=True), _truth(), memacct.ground_truth()[0]
    for kind, n in script:
        if kind == "bytes":
            held.append(b"x" * n)
        elif kind == "dict":
            held.append({i: str(i) for i in range(n // 8)})
        elif kind == "list":
            held.append([i * 1000 for i in range(n // 4)])
        elif held:
            held.pop(n % len(held))
    s0 = memacct.stats()
    u1, t1 = walk.used(fresh=True), _truth()
    s1 = memacct.stats()
    # the walk and the pre-install arenas re-read are CPython's count of pymalloc (to the
    # byte in C; here the few objects the calls between make)
    assert abs(s1["walk_sum"] + s1["pre_content"] - memacct.ground_truth()[0]) < 8192
    assert abs((u1 - u0) - (t1 - t0)) < 64 * 1024, (u1 - u0, t1 - t0, p0, s0, s1)
    del held
    u2, t2 = walk.used(fresh=True), _truth()
    assert abs((u2 - u0) - (t2 - t0)) < 64 * 1024


def test_used_rises_with_a_large_allocation_and_returns_after_the_free(
        walk: memacct.PoolWalkMeter) -> None:
    """50 MB of small objects: used grows by what the ground truth grows (within 1 %), the
    bound stays above used, and after the free used is back within 256 KiB."""
    gc.collect()
    u0, t0 = walk.used(fresh=True), _truth()
    held = [b"%d" % i * 10 for i in range(500_000)]
    u1, t1 = walk.used(fresh=True), _truth()
    assert u1 - u0 > 40 << 20
    assert abs((u1 - u0) - (t1 - t0)) < (t1 - t0) / 100
    assert walk.bound() >= walk.used(fresh=True)
    more = [b"y" * 200 for _ in range(50_000)]          # grows after the walk: the bound sees it
    assert walk.bound() >= walk.used(fresh=True)
    del held, more
    u2 = walk.used(fresh=True)
    assert abs(u2 - u0) < 256 * 1024, (u0, u2)


def test_used_without_fresh_walks_at_most_once_per_interval(walk: memacct.PoolWalkMeter) -> None:
    walk.used(fresh=True)
    walks = memacct.stats()["walks"]
    for _ in range(1000):
        walk.used()
    assert memacct.stats()["walks"] - walks <= 2     # a ms floor: 1000 calls take less than 2


def test_the_capsule_gives_c_callers_used_and_bound(walk: memacct.PoolWalkMeter) -> None:
    """pyrepl/_memacct.h's API, called as another extension would (ctypes, the GIL held):
    its version, used(fresh) as the module's, bound() above a fresh reading."""
    import ctypes

    from pyrepl import _memacct  # type: ignore[attr-defined]

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    address = get(_memacct._C_API, b"pyrepl._memacct._C_API")

    class Api(ctypes.Structure):
        _fields_ = [("version", ctypes.c_int),
                    ("used", ctypes.PYFUNCTYPE(ctypes.c_int64, ctypes.c_int)),
                    ("bound", ctypes.PYFUNCTYPE(ctypes.c_int64))]

    api = Api.from_address(address)
    assert api.version == 1
    exact = api.used(2)
    assert abs(exact - walk.used(fresh=True)) < 64 * 1024
    assert api.bound() >= api.used(2)
    walks = memacct.stats()["walks"]
    api.used(1)
    assert memacct.stats()["walks"] == walks + 1


@needs_walk
def test_a_server_process_installs_it_first_and_pure_or_pymalloc_debug_fall_back() -> None:
    code = ("from pyrepl import memacct\nprint(memacct.install(), memacct.meter().kind, "
            "repr(memacct.why_not()))")
    assert _python(code) == "pool-walk pool-walk ''"
    assert _python(code, PYREPL_PURE="1") == \
        "rss rss 'plain Python (PYREPL_PURE is set)'"
    assert _python(code, PYTHONMALLOC="malloc").startswith("rss rss 'PYTHONMALLOC=malloc")
    assert _python(code, PYTHONMALLOC="pymalloc_debug").startswith("rss rss 'PYTHONMALLOC=")


def test_a_refused_self_test_falls_back_to_rss(monkeypatch) -> None:
    """The extension's install() answers why it refuses (the pool layout is not 3.11's):
    memacct then runs the RSS meter and says why."""

    class Refusing:
        @staticmethod
        def installed() -> bool:
            return False

        @staticmethod
        def install() -> str:
            return "a pool header is not CPython 3.11's (szidx at 36, count at 0)"

    monkeypatch.setattr(memacct, "_ext", Refusing)
    monkeypatch.setattr(memacct, "_why_not", memacct._why_not)     # (restored after)
    monkeypatch.setattr(memacct, "_unsupported", lambda: "")
    assert memacct.install() == memacct.RSS
    assert memacct.why_not() == "self-test: a pool header is not CPython 3.11's (szidx at 36, " \
        "count at 0)"
    assert isinstance(memacct.meter(), memacct.RssMeter) and memacct.stats() == {}


def test_the_rss_meter_reads_the_process() -> None:
    m = memacct.RssMeter()
    assert m.kind == "rss" and m.used() == m.bound() > 0 and m.rss() > 0


# -- INFO memory, MEMORY STATS / DOCTOR / USAGE ----------------------------------------------


def _info(core: object) -> dict[str, object]:
    return dict(section_memory(core))   # type: ignore[arg-type]


def test_info_memory_is_the_meters_and_consistent() -> None:
    meter = FakeMeter(used=50 << 20, rss=80 << 20, kind="pool-walk")
    core = make_core()
    core.meter = meter
    core.used_memory_startup = 10 << 20
    core.used_memory_peak = 0
    m = _info(core)
    used, overhead = m["used_memory"], m["used_memory_overhead"]
    assert used == 50 << 20 and m["used_memory_rss"] == 80 << 20
    assert m["used_memory_dataset"] == used - overhead  # type: ignore[operator]
    assert m["mem_fragmentation_ratio"] == "1.60" and m["mem_fragmentation_bytes"] == 30 << 20
    assert m["mem_allocator"] == "pymalloc-poolwalk" and m["used_memory_human"] == "50.00M"
    assert m["used_memory_startup"] == 10 << 20 and m["used_memory_peak"] == 50 << 20
    assert m["used_memory_peak_perc"] == "100.00%" and m["mem_not_counted_for_evict"] == 0
    net = (50 << 20) - (10 << 20)
    assert m["used_memory_dataset_perc"] == f"{(used - overhead) * 100 / net:.2f}%"  # type: ignore
    assert meter.fresh_calls == 1           # INFO reads the exact figure
    meter.set(40 << 20)                     # the peak stays, its percentage falls
    m = _info(core)
    assert m["used_memory_peak"] == 50 << 20 and m["used_memory_peak_perc"] == "80.00%"
    meter.set(60 << 20)                     # the cron keeps the peak too
    core.tick(core.now_ms + 100)
    assert core.used_memory_peak == 60 << 20
    core.meter = FakeMeter(used=1 << 20, kind="rss")
    assert _info(core)["mem_allocator"] == "libc-rss"


def test_memory_stats_and_doctor_follow_info() -> None:
    core = make_core()
    core.meter = FakeMeter(used=40 << 20, rss=100 << 20)
    core.used_memory_startup = 1 << 20
    core.used_memory_peak = 0
    c = core.connection_made()
    text = run(c, "MEMORY", "STATS").decode()
    assert "total.allocated" in text and str(40 << 20) in text and "2.5" in text
    assert b"High total RSS" in run(c, "MEMORY", "DOCTOR")
    core.meter = FakeMeter(used=40 << 20, rss=41 << 20)
    assert b"can't find any memory issue" in run(c, "MEMORY", "DOCTOR")


def test_not_counted_for_evict_is_the_aof_buffer_and_replication_beyond_the_backlog() -> None:
    core = make_core()
    assert memory.not_counted_for_evict(core) == 0
    core.aof.writer.buf += b"x" * 1000
    assert memory.not_counted_for_evict(core) == 0        # the AOF is off
    core.aof.state = type(core.aof.state)["ON"]
    assert memory.not_counted_for_evict(core) == memory.alloc_size(1000)

    class Repl:
        def memory_fields(self) -> list[tuple[str, object]]:
            return [("mem_total_replication_buffers", core.config.repl_backlog_size + 5000)]

        def unshared_output_bytes(self) -> int:   # (a stalled replica's transport buffer)
            return 700

    core.replication = Repl()   # type: ignore[assignment]
    assert memory.not_counted_for_evict(core) == memory.alloc_size(1000) + 5000 + 700
    core.replication = None


def test_a_replicas_output_outside_the_shared_buffer_is_not_counted() -> None:
    """Feeding.unshared_bytes: a link's replies not yet handed to its transport and what the
    transport holds (a replica that stopped reading), for every link."""
    from pyrepl.replication.manager import Replication

    core = make_core()
    repl = Replication(core)  # type: ignore[arg-type]
    repl.create_backlog()
    assert repl.unshared_output_bytes() == 0
    feeding = repl.master.feeding

    class Link:
        def __init__(self, c: object, streaming: bool) -> None:
            self.client, self.streaming = c, streaming

    a, b = core.connection_made(), core.connection_made()
    a.out.append(b"x" * 300)
    held = {a: 4000, b: 2500}
    feeding.side = type("Side", (), {"links": [Link(a, True), Link(b, False)],
                                      "buffered": staticmethod(lambda c: held[c])})()
    assert repl.unshared_output_bytes() == a.pending_output() + 4000   # (b is not streamed yet)
    assert memory.not_counted_for_evict(core) >= a.pending_output() + 4000


def test_alloc_size_is_pymallocs_classes_then_glibcs() -> None:
    assert [memory.alloc_size(n) for n in (1, 16, 17, 33, 512)] == [16, 16, 32, 48, 512]
    assert memory.alloc_size(513) == 520 and memory.alloc_size(1000) == 1000 and memory.alloc_size(1001) == 1016
    assert memory.object_size(b"") == 48 and memory.object_size({}) == 64


@needs_walk
def test_memory_usage_summed_is_close_to_the_used_memory_growth(
        walk: memacct.PoolWalkMeter) -> None:
    """50k keys of each shape: the sum of their MEMORY USAGE is within 15 % of the
    used_memory they add."""
    core = make_core()
    db = core.dbs[0]
    c = core.connection_made()
    shapes = {
        "string": lambda i: run(c, "SET", f"key:{i:08d}", "v" * (i % 60)),
        "hash": lambda i: run(c, "HSET", f"h:{i}", "a", "1", "bb", "22", "ccc", str(i)),
        "list": lambda i: run(c, "RPUSH", f"l:{i}", "x", "yy", str(i)),
        "set": lambda i: run(c, "SADD", f"s:{i}", "x", "yy", str(i)),
        "ttl": lambda i: run(c, "SET", f"t:{i}", "v" * 20, "EX", "1000"),
    }
    for name, write in shapes.items():
        run(c, "FLUSHALL")
        gc.collect()     # (garbage of earlier tests, freed by a collection in the loop, is not ours)
        u0 = walk.used(fresh=True)
        gc.disable()
        try:
            for i in range(50_000):
                write(i)
        finally:
            gc.enable()
        grown = walk.used(fresh=True) - u0
        usage = sum(memory.key_size(k, v, 5, db) for k, v in db.data.items())
        assert abs(usage - grown) < grown * 0.15, (name, usage, grown, memacct.stats())
    run(c, "FLUSHALL")


keyspace_ops = st.lists(
    st.tuples(st.sampled_from(["SET", "HSET", "RPUSH", "SADD", "ZADD", "XADD"]),
              st.integers(min_value=1, max_value=200),      # elements (or KB for SET)
              st.integers(min_value=0, max_value=30)),      # which key
    min_size=5, max_size=40)


def _write(c, op: str, n: int, k: int) -> None:
    key = f"{op.lower()}:{k}"
    if op == "SET":
        run(c, "SET", key, "x" * (n * 1024))
    elif op == "HSET":
        run(c, "HSET", key, *[f"f{i}:{n}" if j == 0 else "v" * 20
                              for i in range(n) for j in range(2)])
    elif op == "RPUSH":
        run(c, "RPUSH", key, *[f"element:{i}" for i in range(n)])
    elif op == "SADD":
        run(c, "SADD", key, *[f"member:{i}:{n}" for i in range(n)])
    elif op == "ZADD":
        run(c, "ZADD", key, *[x for i in range(n) for x in (str(i), f"m{i}")])
    else:
        for _ in range(min(n, 20)):
            run(c, "XADD", key, "*", "sensor", str(n))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keyspace_ops)
def test_used_memory_returns_to_its_start_after_the_keys_are_deleted(
        walk: memacct.PoolWalkMeter, ops: list[tuple[str, int, int]]) -> None:
    """Keys of every type written through the commands, then deleted: the memory the server
    holds comes back to where it was (within 256 KiB: the cron's shrink of the keyspace's
    table, then what the allocator keeps in partly used pools' free lists)."""
    core = make_core()
    core.meter = walk
    c = core.connection_made()
    for op in ("SET", "HSET", "RPUSH", "SADD", "ZADD", "XADD"):   # (each command's stats exist)
        _write(c, op, 3, 99)
    run(c, "FLUSHALL")
    gc.collect()
    start = walk.used(fresh=True)
    for op, n, k in ops:
        _write(c, op, n, k)
    grown = walk.used(fresh=True) - start
    keys = [k for k in core.dbs[0].data]
    for key in keys:
        run(c, "DEL", key)
    core.tick(core.now_ms + 100)           # (the cron shrinks the emptied table)
    gc.collect()
    back = walk.used(fresh=True) - start
    assert abs(back) < 256 * 1024, (grown, back)


@needs_walk
def test_the_replication_buffers_figures_are_what_its_blocks_hold(
        walk: memacct.PoolWalkMeter) -> None:
    """A replica that reads nothing holds 50 MB of small commands in the shared buffer: what
    the buffer counts (``mem``, Redis's figure, and ``python_overhead``, the rest that
    maxmemory leaves out with it) is within 0.2 % of what the meter sees it take. (The ints of
    each block and a memoryview per block were left out once: 0.6 MB off.)"""
    from pyrepl.replication.backlog import Backlog

    b = Backlog(10 * 1024)
    cmd = b"*4\r\n$8\r\nsetrange\r\n$5\r\nkey:0\r\n$1\r\n0\r\n$10\r\nAAAAAAAAAA\r\n"
    b.append(cmd)
    cur = b.cursor_at(b.first_byte_offset)    # (the stopped replica: nothing is trimmed)
    gc.collect()
    u0, mem0, extra0 = walk.used(fresh=True), b.mem, b.python_overhead()
    for _ in range(1_000_000):
        b.append(cmd)
    grew = walk.used(fresh=True) - u0
    counted = (b.mem - mem0) + (b.python_overhead() - extra0)
    assert b.nblocks > 2000 and abs(grew - counted) < grew * 0.002, (grew, counted)
    b.release(cur)


@needs_walk
def test_what_cpythons_free_lists_keep_is_not_in_use(walk: memacct.PoolWalkMeter) -> None:
    """Freed tuples, lists, dicts and floats wait in CPython's free lists for the next ones
    (as freed blocks wait in jemalloc's caches, which Redis's used_memory does not count):
    once they are freed used is back where it was, though CPython still counts their blocks,
    and a full collection, which empties the lists, changes nothing. The bound counts them
    (reusing them takes no new block)."""
    from pyrepl import _memacct

    gc.collect()                    # (empties the free lists)
    u0, lists0 = _memacct.used(2), _memacct.stats()["free_lists"]
    held: list[object] = [(i, i, i, i, i) for i in range(2000)]      # (small ints: shared)
    held += [[i] for i in range(80)] + [{i: i} for i in range(80)]
    held += [float(i) + 0.5 for i in range(100)]
    assert _memacct.used(2) - u0 > 150_000
    del held
    u1, s1 = _memacct.used(2), _memacct.stats()
    assert s1["free_lists"] - lists0 > 150_000     # (2,000 tuples of 5: 80 B each, and more)
    assert abs(u1 - u0) < 8192, (u0, u1, s1)
    assert walk.bound() >= walk.used(fresh=True) + s1["free_lists"] - 8192
    gc.collect()
    u2 = _memacct.used(2)
    assert _memacct.stats()["free_lists"] < 1024 and abs(u2 - u1) < 8192
