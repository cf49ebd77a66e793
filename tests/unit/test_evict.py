"""maxmemory and eviction in the core (pyrepl.core.evict), sans-io: a real ServerCore whose
memory meter is the test's (``KeysMeter``: a fixed cost per key), so every decision is
deterministic. The same behaviours against real Redis 7.0.15 side by side:
tests/interop/test_diff_eviction.py."""

from __future__ import annotations

from pyrepl.core.evict import EVICT_FAIL, EVICT_OK, time_limit_us, value_size
from pyrepl.keyspace import ktable
from pyrepl.keyspace.ageing import LFU_INIT_VAL, lfu_minutes, lru_clock
from tests.support.cores import NOW, CoreHarness, make_core, run, step_clock
from tests.unit.fakes import FakeMeter

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
VALUE = "v" * 900
PER_KEY = value_size(b"k0000", VALUE.encode())


class KeysMeter(FakeMeter):
    """The memory in use: ``base`` plus ``PER_KEY`` a key in every database (values of
    ``PER_KEY`` bytes less what the engine's estimate adds, so its estimate is exact)."""

    def __init__(self, core, base: int = 0) -> None:
        super().__init__()
        self.core = core
        self.base = base

    def used(self, fresh: bool = False) -> int:
        self.used_calls += 1
        self.fresh_calls += fresh
        return self.base + PER_KEY * sum(len(db.data) for db in self.core.dbs)

    def bound(self) -> int:
        self.bound_calls += 1
        return self.base + PER_KEY * sum(len(db.data) for db in self.core.dbs)


def evicting(policy: str, keys: int, limit_keys: int, *more: tuple[str, list[str]]):
    """A core holding ``keys`` keys k0..kN-1 (the first half with a TTL under volatile-*),
    then given a limit of ``limit_keys`` keys' worth."""
    core = make_core(("maxmemory-policy", [policy]), *more)
    core.meter = KeysMeter(core)
    c = core.connection_made()
    for i in range(keys):
        run(c, "SET", f"k{i:04d}", VALUE)
        if policy.startswith("volatile") and i < keys // 2:
            run(c, "PEXPIRE", f"k{i:04d}", str(1_000_000 + i))
    run(c, "CONFIG", "SET", "maxmemory", str(limit_keys * PER_KEY))
    return core, c


def info(c, field: str) -> int:
    text = run(c, "INFO", "stats").decode()
    return int(text.split(f"\r\n{field}:")[1].split("\r\n")[0])


def test_time_limit_follows_tenacity_as_redis() -> None:
    assert [time_limit_us(t) for t in (0, 1, 10)] == [0, 50, 500]
    assert time_limit_us(11) == 575 and time_limit_us(99) == int(500 * 1.15 ** 89)
    assert time_limit_us(100) > 10 ** 15


def test_noeviction_refuses_denyoom_commands_and_serves_the_rest() -> None:
    core, c = evicting("noeviction", 10, 5)
    assert run(c, "SET", "new", "v") == OOM
    assert run(c, "INCR", "n") == OOM
    assert run(c, "GET", "k0001") == b"$900\r\n" + VALUE.encode() + b"\r\n"            # reads work
    assert run(c, "EXPIRE", "k0001", "100") == b":1\r\n"        # a write that is not denyoom
    assert run(c, "DEL", "k0001", "k0002") == b":2\r\n"            # and DEL frees memory
    assert info(c, "evicted_keys") == 0
    assert run(c, "DBSIZE") == b":8\r\n"
    for i in range(3, 6):
        run(c, "DEL", f"k{i:04d}")
    assert run(c, "SET", "new", "v") == b"+OK\r\n"            # within the limit again
    assert info(c, "total_eviction_exceeded_time") >= 0


def test_allkeys_random_evicts_down_to_the_limit_and_counts() -> None:
    core, c = evicting("allkeys-random", 50, 20)
    assert run(c, "SET", "new", "v") == b"+OK\r\n"
    # evicted before the SET ran: 20 keys' worth left, then the SET's key (one over: the next
    # command evicts again, as in Redis)
    assert len(core.dbs[0].data) == 21
    assert core.stats.evicted_keys == 30
    assert info(c, "evicted_keys") == 31          # (INFO's own check evicted one more)


def test_volatile_policies_without_candidates_answer_oom() -> None:
    for policy in ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"):
        core, c = evicting(policy, 10, 2)
        # half the keys have a TTL: they go first, then nothing is left to evict
        assert run(c, "SET", "new", "v") == OOM, policy
        assert run(c, "DBSIZE") == b":5\r\n", policy
        assert all(k not in core.dbs[0].expires for k in core.dbs[0].data)
        assert info(c, "evicted_keys") == 5


def test_volatile_ttl_evicts_the_nearest_expiry_first() -> None:
    core, c = evicting("volatile-ttl", 40, 35, ("maxmemory-samples", ["64"]))
    run(c, "SET", "x", "v")
    left = {k.decode() for k in core.dbs[0].expires}
    # the 20 volatile keys expire at +1,000,000+i ms: the 5 nearest went
    assert left == {f"k{i:04d}" for i in range(5, 20)}


def test_allkeys_lru_keeps_what_was_read_recently() -> None:
    core, c = evicting("allkeys-lru", 100, 100, ("maxmemory-samples", ["64"]))
    core.now_ms = NOW + 600_000
    ktable.set_clock(core.now_ms)
    for i in range(50, 100):                       # the hot half, read 10 minutes later
        run(c, "GET", f"k{i:04d}")
    assert run(c, "OBJECT", "IDLETIME", "k0001") == b":600\r\n"
    assert run(c, "OBJECT", "IDLETIME", "k0060") == b":0\r\n"
    run(c, "CONFIG", "SET", "maxmemory", str(70 * PER_KEY))
    run(c, "SET", "new", "v")
    survivors = {k.decode() for k in core.dbs[0].data}
    assert {f"k{i:04d}" for i in range(50, 100)} <= survivors
    assert len(survivors) == 71 and "new" in survivors


def test_allkeys_lfu_keeps_what_is_read_often() -> None:
    core, c = evicting("allkeys-lfu", 60, 60, ("maxmemory-samples", ["64"]),
                       ("lfu-log-factor", ["0"]))
    assert run(c, "OBJECT", "FREQ", "k0000") == b":%d\r\n" % LFU_INIT_VAL
    for _ in range(20):
        for i in range(30, 60):
            run(c, "GET", f"k{i:04d}")
    assert run(c, "OBJECT", "FREQ", "k0030") == b":25\r\n"      # log factor 0: +1 an access
    run(c, "CONFIG", "SET", "maxmemory", str(40 * PER_KEY))
    run(c, "SET", "new", "v")
    assert {f"k{i:04d}".encode() for i in range(30, 60)} <= set(core.dbs[0].data)
    assert run(c, "OBJECT", "IDLETIME", "k0030").startswith(b"-ERR An LFU maxmemory policy is")


def test_eviction_propagates_del_or_unlink_and_notifies_evicted() -> None:
    h = CoreHarness()
    core = h.core
    core.meter = KeysMeter(core)
    h.run("CONFIG", "SET", "notify-keyspace-events", "Ee")
    sub = core.connection_made()
    run(sub, "SUBSCRIBE", "__keyevent@0__:evicted")
    h.run("SET", "a", "1")
    h.run("SET", "b", "2")
    h.take()
    h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-random")
    h.run("CONFIG", "SET", "lazyfree-lazy-eviction", "yes")
    h.run("CONFIG", "SET", "maxmemory", str(PER_KEY))
    for fn in core.host.__dict__.pop("soon", []):   # updateMaxmemory's cycle, at the next pass
        fn()
    fed = h.take()
    assert fed in ([[b"UNLINK", b"a"]], [[b"UNLINK", b"b"]]), fed
    assert b"evicted" in sub.data_to_send()
    assert info(h.client, "evicted_keys") == 1


def test_oom_inside_multi_discard_and_exec() -> None:
    core, c = evicting("noeviction", 5, 10)
    other = core.connection_made()
    run(c, "SET", "x", "value")
    run(c, "MULTI")
    assert run(c, "GET", "x") == b"+QUEUED\r\n"
    run(other, "CONFIG", "SET", "maxmemory", "1")
    assert run(c, "PING") == OOM                          # queuing is refused ...
    assert run(c, "EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    run(c, "MULTI")
    assert run(c, "SET", "y", "1") == OOM
    assert run(c, "DISCARD") == b"+OK\r\n"                # ... DISCARD never is
    # EXEC of read-only commands queued before the limit runs; of a denyoom one, aborts
    run(other, "CONFIG", "SET", "maxmemory", "0")
    run(c, "MULTI")
    run(c, "GET", "x")
    run(c, "PING")
    run(other, "CONFIG", "SET", "maxmemory", "1")
    assert run(c, "EXEC") == b"*2\r\n$5\r\nvalue\r\n+PONG\r\n"
    run(other, "CONFIG", "SET", "maxmemory", "0")
    run(c, "MULTI")
    run(c, "SET", "x", "1")
    run(c, "GET", "x")
    run(other, "CONFIG", "SET", "maxmemory", "1")
    assert run(c, "EXEC") == b"-EXECABORT Transaction discarded because of: OOM command not " \
                             b"allowed when used memory > 'maxmemory'.\r\n"


def test_scripts_oom_flags() -> None:
    core, c = evicting("noeviction", 10, 5)
    w = "#!lua\nreturn redis.call('SET', 'a', '1')"
    assert run(c, "EVAL", w, "0") == OOM     # (processCommand: the shebang makes it denyoom)
    allow = "#!lua flags=allow-oom\nreturn redis.call('SET', 'a', '1')"
    assert run(c, "EVAL", allow, "0") == b"+OK\r\n"
    ro = "#!lua flags=no-writes\nreturn redis.call('GET', 'k0001')"
    assert run(c, "EVAL", ro, "0") == b"$900\r\n" + VALUE.encode() + b"\r\n"
    # a script without a shebang: its first denyoom write fails, as Redis's scriptVerifyOOM
    assert run(c, "EVAL", "return redis.call('SET', 'b', '1')", "0").startswith(b"-OOM command")


def test_tenacity_bounds_a_cycle_and_the_event_loop_goes_on() -> None:
    core, c = evicting("allkeys-random", 200, 200, ("maxmemory-eviction-tenacity", ["0"]))
    step_clock(core, 1000)                                # (each reading 1 us later)
    run(c, "CONFIG", "SET", "maxmemory", str(10 * PER_KEY))
    # updateMaxmemory started the cycle for the next pass of the event loop; each pass evicts
    # 16 keys (tenacity 0: no time at all) and asks for another
    passes = 0
    while core.host.__dict__.get("soon") and passes < 100:
        fn = core.host.__dict__["soon"].pop(0)
        fn()
        passes += 1
        if passes == 1:
            assert len(core.dbs[0].data) == 200 - 16
            assert core.evictor.proc_running
    assert len(core.dbs[0].data) == 10
    assert passes == 13                                   # 12 passes of 16, one of 2 and done
    assert not core.evictor.proc_running
    assert core.evictor.perform() == EVICT_OK


def test_nothing_evicted_while_paused_or_on_a_replica_ignoring_maxmemory() -> None:
    core, c = evicting("allkeys-random", 10, 5)
    core.pause.kind = 1
    for fn in core.host.__dict__.pop("soon"):               # (CONFIG SET's cycle, paused)
        fn()
    assert core.evictor.perform() == EVICT_OK and len(core.dbs[0].data) == 10
    core.pause.kind = 0
    core.expiry_deletes = False                             # a replica
    core.refresh_maxmemory()
    assert core.maxmemory == 0
    assert core.evictor.perform() == EVICT_OK and len(core.dbs[0].data) == 10
    run(c, "CONFIG", "SET", "replica-ignore-maxmemory", "no")
    assert core.maxmemory == 5 * PER_KEY
    assert core.evictor.perform() == EVICT_OK and len(core.dbs[0].data) == 5


def test_restore_idletime_and_freq_set_the_age() -> None:
    core = make_core()
    c = core.connection_made()
    ktable.set_clock(core.now_ms)
    run(c, "SET", "a", "1")
    payload = run(c, "DUMP", "a").split(b"\r\n", 1)[1][:-2]
    assert run(c, "RESTORE", "b", "0", payload, "IDLETIME", "1000") == b"+OK\r\n"
    assert core.dbs[0].data.age(b"b") == lru_clock(core.now_ms) - 1000
    assert run(c, "OBJECT", "IDLETIME", "b") == b":1000\r\n"
    run(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    assert run(c, "RESTORE", "f", "0", payload, "FREQ", "100") == b"+OK\r\n"
    assert core.dbs[0].data.age(b"f") == (lfu_minutes(core.now_ms) << 8) | 100
    assert run(c, "OBJECT", "FREQ", "f") == b":100\r\n"
    assert EVICT_FAIL != EVICT_OK


def _reloaded(core) -> list:
    """core's databases through an RDB and back (what a restart or a full sync keeps)."""
    from pyrepl.keyspace.ktable import KeyTable
    from pyrepl.rdb.decoder import RdbDecoder
    from pyrepl.rdb.encoder import encode_rdb_bytes

    blob = encode_rdb_bytes(core.dbs, now_ms=core.now_ms)
    dec = RdbDecoder()
    dec.receive_data(blob)
    data = [KeyTable() for _ in core.dbs]
    dec.load_into(data, [KeyTable(ageing=False) for _ in core.dbs])
    return data


def test_the_rdb_keeps_a_keys_idle_time_or_counter_as_redis() -> None:
    """rdbSaveKeyValuePair writes IDLE (an LRU policy) or FREQ (an LFU one) before a key,
    and the load sets the age from it (objectSetLRUOrLFU)."""
    core = make_core(("maxmemory-policy", ["allkeys-lru"]))
    c = core.connection_made()
    ktable.set_clock(core.now_ms)
    run(c, "SET", "old", "1")
    core.now_ms += 500_000
    ktable.set_clock(core.now_ms)
    run(c, "SET", "new", "1")
    data = _reloaded(core)[0]
    assert data.age(b"old") == lru_clock(core.now_ms) - 500
    assert data.age(b"new") == lru_clock(core.now_ms)
    run(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    payload = run(c, "DUMP", "old").split(b"\r\n", 1)[1][:-2]
    run(c, "RESTORE", "hot", "0", payload, "FREQ", "77")
    data = _reloaded(core)[0]
    assert data.age(b"hot") & 255 == 77
    run(c, "CONFIG", "SET", "maxmemory-policy", "noeviction")   # (neither is written: the
    core.now_ms += 500_000                                      #  keys load as new ones)
    ktable.set_clock(core.now_ms)
    data = _reloaded(core)[0]
    assert data.age(b"old") == data.age(b"hot") == lru_clock(core.now_ms)
