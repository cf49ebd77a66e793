"""maxmemory: Redis 7.0's eviction (evict.c), run before every command that may grow memory
(processCommand) and from the event loop while a cycle hit its time limit.

Theory of operation
-------------------
:meth:`Evictor.perform` is ``performEvictions``. ``to_free`` is what the memory in use, less
what is not counted (``not_counted_for_evict``: the replication buffer beyond the backlog and
the AOF buffer), exceeds ``maxmemory`` by; the cheap upper bound of the meter (``bound``) rules
the common case out without measuring, and the exact figure (``used``, a walk of the
allocator's arenas: pyrepl/memacct.py) is read only when the bound reaches the limit. Keys are
then deleted one by one until the estimate of what they freed covers ``to_free``, where the
exact figure is read again: a cycle ends when the memory is within the limit, when nothing is
left to evict (``EVICT_FAIL``: the denyoom command is refused with the OOM error), or, checked
every 16 keys, when it ran ``maxmemory-eviction-tenacity``'s time (500 us at the default 10):
the cycle then goes on at the next pass of the event loop (``Host.call_soon``, Redis's
evictionTimeProc) and the command runs (``EVICT_RUNNING``).

Which key: under an LRU, LFU or TTL policy every database with keys (all of them under
``allkeys-*``, those with a TTL under ``volatile-*``) offers ``maxmemory-samples`` random keys
(``KeyTable.sample``, Redis's dictGetSomeKeys) to the 16-entry pool
(pyrepl/keyspace/ageing.py ``EvictionPool``), scored by idle time (the key's 24-bit LRU
clock), ``255 - counter`` (its decayed LFU counter) or ``ULLONG_MAX - expire``; the best
candidate that still exists is evicted. The random policies take one random key, visiting the
databases in turn. An evicted key is deleted as DEL would, counted (``evicted_keys``),
signalled (WATCH, tracking), notified (``evicted``) and propagated as ``DEL`` (``UNLINK`` with
``lazyfree-lazy-eviction``).

Nothing is evicted while loading, on a replica with ``replica-ignore-maxmemory yes``, while
clients are paused, or while a script is busy (isSafeToPerformEvictions). Redis's
``pre_command_oom_state``, what a script's first write checks, is :attr:`Evictor.oom`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pyrepl.core.memory import key_size, not_counted_for_evict
from pyrepl.keyspace import ktable
from pyrepl.keyspace.ageing import (
    ULLONG_MAX,
    EvictionPool,
    idle_ms,
    lfu_decr_and_return,
)
from pyrepl.notify import NOTIFY_EVICTED, keyspace_event

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore
    from pyrepl.keyspace.db import Database

EVICT_OK, EVICT_RUNNING, EVICT_FAIL = 0, 1, 2

# What a pipelined run must leave below the limit to skip the check per command.
RUN_MARGIN = 1 << 20

# maxmemory-policy -> (sample every key rather than those with a TTL, how a sample is scored)
LRU, LFU, TTL, RANDOM, NONE = "lru", "lfu", "ttl", "random", "none"
POLICIES: dict[str, tuple[bool, str]] = {
    "volatile-lru": (False, LRU),
    "volatile-lfu": (False, LFU),
    "volatile-random": (False, RANDOM),
    "volatile-ttl": (False, TTL),
    "allkeys-lru": (True, LRU),
    "allkeys-lfu": (True, LFU),
    "allkeys-random": (True, RANDOM),
    "noeviction": (False, NONE),
}


def time_limit_us(tenacity: int) -> int:
    """evictionTimeLimitUs: how long one cycle may run (0-500 us linearly up to tenacity 10,
    then 15 % more a step; no limit at 100)."""
    if tenacity <= 10:
        return 50 * tenacity
    if tenacity < 100:
        return int(500.0 * 1.15 ** (tenacity - 10.0))
    return sys.maxsize


def value_size(key: bytes, value: object) -> int:
    """A cheap estimate of what deleting a key frees (the exact figure is read once the
    estimates add up to the goal): MEMORY USAGE's, with a few samples of a container."""
    return key_size(key, value, 5)


class Evictor:
    """The core's eviction (``core.evictor``)."""

    __slots__ = ("core", "pool", "next_db", "proc_running", "oom", "exceeded_since_ns",
                 "exceeded_total_ns", "allkeys", "kind", "samples", "limit_us", "lazy")

    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.pool = EvictionPool()
        self.next_db = 0
        self.proc_running = False
        # pre_command_oom_state: the OOM state the current command started in
        self.oom = False
        # INFO's total/current_eviction_exceeded_time: since when the memory is over the limit
        self.exceeded_since_ns = 0
        self.exceeded_total_ns = 0
        self.allkeys = False
        self.kind = NONE
        self.samples = 5
        self.limit_us = 500
        self.lazy = False
        self.refresh()

    # -- configuration ----------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the maxmemory-* directives (CONFIG SET of any of them calls it)."""
        cfg = self.core.config
        self.allkeys, kind = POLICIES[cfg.maxmemory_policy]
        if kind != self.kind:
            self.pool.clear()
        self.kind = kind
        self.samples = cfg.maxmemory_samples
        self.limit_us = time_limit_us(cfg.maxmemory_eviction_tenacity)
        self.lazy = bool(cfg.lazyfree_lazy_eviction)
        ktable.configure(kind == LFU, cfg.lfu_log_factor, cfg.lfu_decay_time)
        ktable.save_ages(kind if kind in (LRU, LFU) else "")

    def room_for_run(self) -> bool:
        """Whether a pipelined run of plain commands (pyrepl.plainrun) may skip the check per
        command: the meter's upper bound ``RUN_MARGIN`` below the limit (``run_maxmemory``).
        A plain command is O(1) and its arguments are already counted; a run is at most one
        read's requests, which grow the dataset by far less than the margin."""
        return self.core.meter.bound() <= self.core.run_maxmemory

    def enforced(self) -> bool:
        """Whether processCommand checks the limit: maxmemory set, and this server not a
        replica ignoring it."""
        core = self.core
        return bool(core.config.maxmemory) and not (
            not core.expiry_deletes and core.config.replica_ignore_maxmemory)

    def safe(self) -> bool:
        """isSafeToPerformEvictions."""
        core = self.core
        if core.busy is not None or core.loading or core.pause.kind:
            return False
        return core.expiry_deletes or not core.config.replica_ignore_maxmemory

    # -- the state ----------------------------------------------------------------------------
    def to_free(self, fresh: bool = False) -> int:
        """getMaxmemoryState: how many bytes the memory counted for eviction exceeds the limit
        by (0 when within it, or no limit)."""
        core = self.core
        maxmemory = core.config.maxmemory
        if not maxmemory:
            return 0
        meter = core.meter
        if not fresh and meter.bound() <= maxmemory:
            return 0
        used = meter.used(fresh)
        if used <= maxmemory:
            return 0
        used -= not_counted_for_evict(core)
        return used - maxmemory if used > maxmemory else 0

    # -- processCommand's check ---------------------------------------------------------------
    def check(self) -> bool:
        """processCommand's maxmemory step: evict what is due; True when out of memory (a
        denyoom command is then refused). Also the OOM state a script's first write sees."""
        oom = self.perform() == EVICT_FAIL
        self.oom = oom
        return oom

    def oom_now(self) -> bool:
        """The OOM state the running command started in, as a script reads it: the last check
        failed and the memory is still over the limit (the C dispatch skips the check while
        the meter's bound is within the limit, leaving ``oom`` as the last check set it)."""
        return self.oom and self.to_free() > 0

    # -- performEvictions --------------------------------------------------------------------
    def perform(self) -> int:
        core = self.core
        if not self.safe():
            return EVICT_OK
        to_free = self.to_free()
        if to_free:
            # confirmed by an exact reading first: between walks the meter's figure counts
            # every arena made since the last one as full, which would evict (or refuse) for
            # memory that is not in use
            to_free = self.to_free(fresh=True)
        if not to_free:
            self._metrics(EVICT_OK)
            return EVICT_OK
        if self.kind == NONE:
            self._metrics(EVICT_FAIL)
            return EVICT_FAIL
        clock = core.clock_ns
        t0 = clock()
        limit_ns = self.limit_us * 1000
        keys_freed = 0
        # the invalidations this cycle sends to tracking clients add to their output; as Redis
        # counts what each deletion freed before its invalidation goes out, they do not count
        # against what the cycle freed (else they would evict more keys, whose invalidations
        # would evict more: Redis's "client tracking don't cause eviction feedback loop")
        emitted0 = core.tracking.emitted_mem
        estimated = 0        # the estimates of what the keys evicted since the last reading held
        scale = 1.0          # what a reading found freed per byte estimated
        result = EVICT_FAIL
        while True:
            picked = self._pick()
            if picked is None:
                break                                # nothing left to evict
            db, key = picked
            estimated += self._evict(db, key)
            keys_freed += 1
            if keys_freed == 1 or estimated * scale >= to_free or keys_freed % 16 == 0:
                # Read the memory: after the first key (to scale the estimates by), when the
                # scaled estimates say done, and every 16 keys.
                left = max(0, self.to_free(fresh=True) - (core.tracking.emitted_mem - emitted0))
                if to_free > left and estimated:
                    scale = (to_free - left) / estimated
                to_free, estimated = left, 0
                if not to_free:
                    result = EVICT_OK
                    break
            if keys_freed % 16 == 0 and clock() - t0 > limit_ns:
                self.start_proc()
                result = EVICT_RUNNING
                break
        if result == EVICT_OK and self.proc_running:
            result = EVICT_RUNNING
        if keys_freed and core._pending:
            core.flush_propagation()
        if keys_freed:
            core.latency_sample("eviction-cycle", (clock() - t0) // 1_000_000)
        self._metrics(result)
        return result

    def _metrics(self, result: int) -> None:
        """stat_last_eviction_exceeded_time / stat_total_eviction_exceeded_time."""
        if result == EVICT_OK:
            if self.exceeded_since_ns:
                self.exceeded_total_ns += self.core.clock_ns() - self.exceeded_since_ns
                self.exceeded_since_ns = 0
        elif not self.exceeded_since_ns:
            self.exceeded_since_ns = self.core.clock_ns()

    def exceeded_ms(self) -> tuple[int, int]:
        """INFO's (total_eviction_exceeded_time, current_eviction_exceeded_time), in ms."""
        current = self.core.clock_ns() - self.exceeded_since_ns if self.exceeded_since_ns else 0
        return (self.exceeded_total_ns + current) // 1_000_000, current // 1_000_000

    def start_proc(self) -> None:
        """startEvictionTimeProc: go on at the next pass of the event loop."""
        if not self.proc_running:
            self.proc_running = True
            self.core.host.call_soon(self._proc)

    def _proc(self) -> None:
        """evictionTimeProc: another cycle while the last one ran out of time."""
        if self.perform() == EVICT_RUNNING:
            self.core.host.call_soon(self._proc)
        else:
            self.proc_running = False

    # -- choosing a key -----------------------------------------------------------------------
    def _pick(self) -> tuple[Database, bytes] | None:
        if self.kind == RANDOM:
            return self._pick_random()
        dbs = self.core.dbs
        pool = self.pool
        allkeys = self.allkeys
        while True:
            total = 0
            for db in dbs:
                table = db.data if allkeys else db.expires
                n = len(table)
                if n:
                    self._populate(db, table.sample(self.samples))
                    total += n
            if not total:
                return None
            while True:
                best = pool.pop_best()
                if best is None:
                    break                   # only ghosts: sample again
                dbid, key = best
                db = dbs[dbid]
                if key in (db.data if allkeys else db.expires):
                    return db, key

    def _populate(self, db: Database, keys: list[bytes]) -> None:
        """evictionPoolPopulate: score the sampled keys and offer them to the pool."""
        kind = self.kind
        now = self.core.now_ms
        offer = self.pool.offer
        if kind == TTL:
            expires = db.expires
            for key in keys:
                offer(ULLONG_MAX - expires[key], db.id, key)
            return
        age = db.data.age
        if kind == LRU:
            for key in keys:
                offer(idle_ms(age(key) or 0, now), db.id, key)
        else:
            decay = self.core.config.lfu_decay_time
            for key in keys:
                offer(255 - lfu_decr_and_return(age(key) or 0, now, decay), db.id, key)

    def _pick_random(self) -> tuple[Database, bytes] | None:
        dbs = self.core.dbs
        n = len(dbs)
        for _ in range(n):
            self.next_db = (self.next_db + 1) % n
            db = dbs[self.next_db]
            table = db.data if self.allkeys else db.expires
            if len(table):
                for _ in range(100):    # (a draw that met only holes comes back empty)
                    keys = table.sample(1)
                    if keys:
                        return db, keys[0]
        return None

    # -- evicting it ---------------------------------------------------------------------------
    def _evict(self, db: Database, key: bytes) -> int:
        """Delete ``key`` as performEvictions does; returns the estimate of what it freed."""
        core = self.core
        value = db.data.pop(key)
        size = value_size(key, value)
        if db.expires:
            db.expires.pop(key, None)
        core.stats.evicted_keys += 1
        db.touch(key)
        if core.notify_mask & NOTIFY_EVICTED:
            keyspace_event(core, NOTIFY_EVICTED, b"evicted", key, db.id)
        core.propagate_internal(db.id, [b"UNLINK" if self.lazy else b"DEL", key])
        if self.lazy:
            core.lazyfree.free_value(value)
        del value
        return size
