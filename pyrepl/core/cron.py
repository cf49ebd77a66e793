"""The server's cron (Redis's serverCron), ``hz`` times a second: active expiry, the blocked
clients' deadlines, client pauses, the ops/sec samples, idle clients' timeouts, the save
points, the snapshot child's copy-on-write, a shutdown waiting for replicas, client-side
caching, replication's and the AOF's periodic work, in that order.

``Cron`` is the core's (``core.cron``); the shell calls ``core.tick(now_ms)``, which sets the
core's clock and runs it. Its own state: how many times it ran (``hz_counter``: jobs that run
once a second count on it) and whether active expiry is on (DEBUG SET-ACTIVE-EXPIRE).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from pyrepl.core.stats import CowSample
from pyrepl.keyspace import hashttl

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore


class Cron:
    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.hz_counter = 0
        self.active_expire_enabled = True
        self.paused = False     # DEBUG PAUSE-CRON 1: serverCron does nothing

    def run(self, now_ms: int) -> None:
        """serverCron's jobs, in its order (the core's tick set ``now_ms``)."""
        if self.paused:
            return
        core = self.core
        self.hz_counter += 1
        # Active expiry: check a slice of the keys with a TTL in every database (none while
        # clients are paused: the dataset stays as it is, as Redis's activeExpireCycle).
        if self.active_expire_enabled and not core.pause.kind:
            t0 = core.clock_ns()
            budget = 200 * core.config.active_expire_effort
            for db in core.dbs:
                if db.expires:
                    db.active_expire(budget)
            hashttl.active_expire(core, now_ms, budget_us=250 * core.config.active_expire_effort)
            if not core.expiry_deletes and core.replica_keys_with_expire:
                self.expire_replica_keys(now_ms)
            spent = core.clock_ns() - t0
            core.stats.expire_cycle_cpu_ns += spent
            core.latency_sample("expire-cycle", spent // 1_000_000)
        if core.rdb_child_pid == -1:
            # databasesCron's tryResizeHashTables: the tables that deletions left under 10 %
            # full give their memory back (not while a child shares the pages: copy-on-write)
            for db in core.dbs:
                db.data.shrink()
                db.expires.shrink()
        if core._pending:
            core.flush_propagation()
        if core.blocking.clients:
            self._blocked_cron(now_ms)
        if core.pause.kind:
            core.pause.tick(now_ms)
        self._sample_ops(now_ms)
        self._memory()
        if core.maxmemory:      # evict in the cron too, not only before a write
            core.evictor.perform()
        self._client_timeouts(now_ms)
        core.host.migrate_close_idle(now_ms / 1000)     # (migrateCloseTimedoutSockets)
        if core.maxmemory_clients:   # clientsCron's figures, then what is due
            core.client_eviction.cron()
        if core.output_limits.soft:  # clients over a soft output limit: its seconds may be up
            core.output_limits.cron()
        core.persistence.cron(now_ms)
        self._sample_cow(now_ms)
        if core.shutdown.signalled is not None:
            core.shutdown.signal_cron()
        if core.shutdown.wait is not None:
            core.shutdown.cron(now_ms)
        if core.tracking_writes:    # client-side caching: BCAST batch, table limit
            core.tracking.cron()
        if core.replication is not None:
            core.replication.tick(now_ms)
        aof = core.aof
        if aof.on or aof.rewrite_scheduled:
            aof.cron(now_ms, core.rdb_child_pid != -1)

    def expire_replica_keys(self, now_ms: int, budget: int = 1000) -> int:
        """Redis's expireSlaveKeys: expire the keys clients set with a TTL on this writable
        replica (the master never sends a DEL for them). Up to ``budget`` tracked keys per
        call, oldest first, stopping after more than 3 that still live (as Redis); a key is
        tracked until it is gone or has no TTL. Nothing is propagated: a replica's own writes
        are not part of its stream. Returns how many keys were deleted."""
        core = self.core
        tracked = core.replica_keys_with_expire
        deleted = alive = 0
        for key in list(itertools.islice(tracked, budget)):
            dbids = tracked.pop(key)
            keep = 0
            for db in core.dbs:
                if dbids >> db.id & 1:
                    outcome = db.expire_replica_key(key, now_ms)
                    if outcome:
                        deleted += 1
                    elif outcome is False:
                        keep |= 1 << db.id
                        alive += 1
            if keep:
                tracked[key] = keep        # to the end: the next call starts with others
            if alive > 3:
                break
        return deleted

    def _sample_ops(self, now_ms: int) -> None:
        core = self.core
        last_t, last_n = core.stats.last_ops_sample
        if now_ms - last_t >= 100:
            n = core.total_commands_processed()
            if last_t:
                rate = (n - last_n) * 1000 // max(1, now_ms - last_t)
                s = core.stats.ops_samples
                s.append(rate)
                if len(s) > 16:
                    del s[0]
                core.stats.instantaneous_ops = sum(s) // len(s)
            core.stats.last_ops_sample = (now_ms, n)
            stats = core.stats
            for name, metric in stats.instant.items():
                metric.sample(now_ms, getattr(stats, name))

    def _memory(self) -> None:
        """Redis's cronUpdateMemoryStats: used_memory's peak. A reading at most an interval
        old every run; once a second an exact one (pyrepl/memacct.py: the arenas from before
        the install re-read)."""
        core = self.core
        used = core.meter.used(fresh=self.hz_counter % max(1, core.config.hz) == 0)
        if used > core.used_memory_peak:
            core.used_memory_peak = used

    def _blocked_cron(self, now_ms: int) -> None:
        """Blocked clients: keys still ready are served, and deadlines are checked."""
        core = self.core
        blocking = core.blocking
        if blocking.ready:
            blocking.serve_ready()
        blocking.expire(now_ms)

    def _client_timeouts(self, now_ms: int) -> None:
        core = self.core
        timeout = core.config.timeout
        if not timeout or self.hz_counter % max(1, core.config.hz) != 0:
            return
        for c in list(core.clients.values()):
            if (c.kind == "normal" and c.blocked is None
                    and now_ms - c.last_interaction_ms > timeout * 1000):
                core.log.verbose(f"Closing idle client {c.describe()}")
                core.host.close_client(c)

    def _sample_cow(self, now_ms: int) -> None:
        """The snapshot child's copy-on-write memory, once a second (Redis's child reports it
        at the same pace)."""
        core = self.core
        if core.rdb_child_pid == -1 or now_ms - core.cow.at_ms < 1000:
            return
        size = core.host.child_cow_bytes(core.rdb_child_pid)
        if size is not None:
            core.cow = CowSample(size, max(size, core.cow.peak), now_ms)
