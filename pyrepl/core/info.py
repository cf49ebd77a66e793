"""INFO: the text report, section by section, with Redis 7's field names.

Theory of operation: each section is a function returning ``[(field, value), ...]``; values are
formatted like Redis (ints, ``%.2f`` ratios, ``*_human`` sizes). Sections owned by other layers
(replication) are asked from them, so field names live next to the state they describe.
Figures that need the operating system (RSS, CPU) come from ``core.host.process_info()``.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyrepl import __version__
from pyrepl.config import format_percentiles as fmt_percentiles
from pyrepl.memacct import ALLOCATOR_NAME

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore
    from pyrepl.core.stats import Stats

Fields = list[tuple[str, object]]

# The fields a Redis 7.0.15 server does not show (tests that compare INFO with one leave them
# out): Redis 7.2/8's and Valkey's names that pyrepl shows, and pyrepl's own.
BEYOND_REDIS_7: frozenset[str] = frozenset({
    # Redis 7.2 / 8
    "client_query_buffer_limit_disconnections", "client_output_buffer_limit_disconnections",
    "replica_full_sync_buffer_size", "replica_full_sync_buffer_peak",
    "mem_replica_full_sync_buffer",
    # Valkey's (its dual channel)
    "replicas_waiting_psync",
    # pyrepl's
    "pyrepl_version", "python_version", "used_memory_interpreter",
    "used_memory_interpreter_human", "master_sync_mode", "replica_full_sync_buffer_spilled",
    "replica_full_sync_buffer_on_disk", "total_repl_spilled_bytes", "sync_full_resumed",
    "total_repl_resumed_bytes", "resume_kept_snapshots", "master_sync_resume_kept_bytes",
})

DEFAULT_SECTIONS = ["server", "clients", "memory", "persistence", "stats", "replication", "cpu",
                    "modules", "errorstats", "cluster", "keyspace"]
# Redis's order for INFO all / everything.
ALL_SECTIONS = ["server", "clients", "memory", "persistence", "stats", "replication", "cpu",
                "modules", "commandstats", "errorstats", "latencystats", "cluster", "keyspace"]


def scripts_memory(core: ServerCore) -> list[tuple[str, object]]:
    """The Lua fields of INFO memory (Redis 7.0's names): EVAL's Lua state and script cache,
    the functions engine's Lua state, libraries and structures (an empty engine's figures, as
    Redis shows them, until scripting is first used)."""
    eng = getattr(core, "scripts", None)         # made by the first EVAL (commands.scripting)
    lua = eng.memory_lua() if eng is not None else 32768
    scr = eng.cache.overhead() if eng is not None else 0
    n = len(eng.cache) if eng is not None else 0
    fns = eng._functions if eng is not None else None   # made by the first FUNCTION/FCALL
    if fns is None:
        from pyrepl.scripting.functions import EMPTY_OVERHEAD, EMPTY_VM

        nfun = nlib = 0
        vmf, fmem = EMPTY_VM, EMPTY_OVERHEAD
    else:
        nfun, nlib = len(fns.current.functions), len(fns.current.libraries)
        vmf, fmem = fns.vm_memory(), fns.overhead()
    return [("used_memory_lua", lua), ("used_memory_vm_eval", lua),
            ("used_memory_lua_human", human_bytes(lua)), ("used_memory_scripts_eval", scr),
            ("number_of_cached_scripts", n), ("number_of_functions", nfun),
            ("number_of_libraries", nlib), ("used_memory_vm_functions", vmf),
            ("used_memory_vm_total", lua + vmf),
            ("used_memory_vm_total_human", human_bytes(lua + vmf)),
            ("used_memory_functions", fmem), ("used_memory_scripts", scr + fmem),
            ("used_memory_scripts_human", human_bytes(scr + fmem))]


def human_bytes(n: int) -> str:
    d = float(n)
    for unit in ("B", "K", "M", "G", "T", "P"):
        if d < 1024 or unit == "P":
            return f"{int(d)}B" if unit == "B" else f"{d:.2f}{unit}"
        d /= 1024
    return f"{d:.2f}P"


def section_server(core: ServerCore) -> Fields:
    now = core.now_ms
    uptime = (now - core.start_ms) // 1000
    return [
        ("redis_version", core.redis_version),
        ("pyrepl_version", __version__),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", 0),
        ("redis_build_id", "0"),
        ("redis_mode", "standalone"),
        ("os", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("arch_bits", 64 if sys.maxsize > 2**32 else 32),
        ("monotonic_clock", "POSIX clock_gettime"),
        ("multiplexing_api", "epoll"),
        ("python_version", platform.python_version()),
        ("process_id", os.getpid()),
        ("process_supervised", core.supervised),
        ("run_id", core.run_id),
        ("tcp_port", core.config.port),
        ("server_time_usec", core.host.time_us()),
        ("uptime_in_seconds", uptime),
        ("uptime_in_days", uptime // 86400),
        ("hz", core.config.hz),
        ("configured_hz", core.config.hz),
        ("lru_clock", (now // 1000) & ((1 << 24) - 1)),   # Redis's LRU clock: seconds, 24 bits
        ("executable", sys.argv[0] if sys.argv else ""),
        ("config_file", core.config.source_file or ""),
        ("io_threads_active", 0),
        *([("shutdown_in_milliseconds", shutdown_in)]
          if (shutdown_in := core.shutdown.in_milliseconds()) is not None else []),
    ]


def section_clients(core: ServerCore) -> Fields:
    normal = sum(1 for c in core.clients.values() if c.kind != "replica")
    return [
        ("connected_clients", normal),
        ("cluster_connections", 2 * (len(core.cluster.nodes) - 1) if core.cluster else 0),
        ("maxclients", core.config.maxclients),
        ("client_recent_max_input_buffer", 0),
        ("client_recent_max_output_buffer", 0),
        ("blocked_clients", core.blocking.count()),
        ("tracking_clients", core.tracking.clients),
        ("clients_in_timeout_table", core.blocking.in_timeout_table()),
    ]


def section_memory(core: ServerCore) -> Fields:
    """Redis 7.0's INFO memory: used_memory is ``core.meter``'s (pyrepl/memacct.py: pymalloc's
    and libc's blocks as Redis's zmalloc counts its own, or the RSS where that cannot run:
    ``mem_allocator`` says which), read exactly here; the peak follows it (here and in the
    cron). The breakdown (overhead, dataset, not counted for eviction) is pyrepl/core/memory.py's.
    """
    from pyrepl.core.memory import overhead  # (memory.py's MEMORY STATS reads this section)

    meter = core.meter
    used = meter.used(fresh=True)
    rss = meter.rss()
    if used > core.used_memory_peak:
        core.used_memory_peak = used
    peak = core.used_memory_peak
    maxmemory = core.config.maxmemory
    total = int(core.host.process_info().get("total_system_memory", 0))
    parts = overhead(core, used)
    repl_fields = parts.repl_fields
    startup = core.used_memory_startup
    dataset = max(0, used - parts.total)
    net = used - startup
    return [
        ("used_memory", used),
        ("used_memory_human", human_bytes(used)),
        ("used_memory_rss", rss),
        ("used_memory_rss_human", human_bytes(rss)),
        ("used_memory_peak", peak),
        ("used_memory_peak_human", human_bytes(peak)),
        ("used_memory_peak_perc", f"{used * 100 / peak:.2f}%" if peak else "0.00%"),
        ("used_memory_overhead", parts.total),
        ("used_memory_startup", startup),
        ("used_memory_dataset", dataset),
        ("used_memory_dataset_perc", f"{dataset * 100 / net:.2f}%" if net > 0 else "0.00%"),
        ("total_system_memory", total),
        ("total_system_memory_human", human_bytes(total)),
        *parts.scripts,
        ("maxmemory", maxmemory),
        ("maxmemory_human", human_bytes(maxmemory)),
        ("maxmemory_policy", core.config.maxmemory_policy),
        ("mem_fragmentation_ratio", f"{rss / used:.2f}" if used else "0.00"),
        ("mem_fragmentation_bytes", rss - used),
        ("mem_not_counted_for_evict", parts.not_counted),
        *repl_fields,
        ("mem_clients_normal", parts.clients_normal),
        ("mem_cluster_links", sum(lk.out_bytes + lk.reader.buffered()
                                  for lk in core.cluster.links) if core.cluster else 0),
        ("mem_aof_buffer", parts.aof_buffer),
        ("mem_allocator", ALLOCATOR_NAME.get(meter.kind, meter.kind)),
        ("used_memory_interpreter", core.used_memory_interpreter),   # (pyrepl's: not counted)
        ("used_memory_interpreter_human", human_bytes(core.used_memory_interpreter)),
        ("active_defrag_running", 0),
        ("lazyfree_pending_objects", core.lazyfree.pending()),
        ("lazyfreed_objects", core.lazyfree.freed()),
    ]


def section_persistence(core: ServerCore) -> Fields:
    now = core.now_ms
    child = core.rdb_child_pid != -1    # the one child: RDB (to disk or sockets) or AOF
    in_progress = child and core.rdb_child_purpose != "aof"
    progress = core.save_progress
    processed = progress.get() if progress is not None and child else 0
    total = core.save_keys_total if progress is not None and child else 0
    fields: Fields = [
        ("loading", int(core.loading)),
        ("async_loading", int(core.async_loading)),
        ("current_cow_peak", core.cow.peak),
        ("current_cow_size", core.cow.size),
        ("current_cow_size_age", (now - core.cow.at_ms) // 1000 if core.cow.at_ms else 0),
        ("current_fork_perc", f"{processed * 100 / total:.2f}" if total else "0.00"),
        ("current_save_keys_processed", processed),
        ("current_save_keys_total", total),
        ("rdb_changes_since_last_save", core.dirty),
        ("rdb_bgsave_in_progress", int(in_progress)),
        ("rdb_last_save_time", core.persistence.lastsave_ms // 1000),
        ("rdb_last_bgsave_status", "ok" if core.persistence.ok else "err"),
        ("rdb_last_bgsave_time_sec", core.persistence.last_duration_ms // 1000
         if core.persistence.last_duration_ms >= 0 else -1),
        ("rdb_current_bgsave_time_sec", (now - core.persistence.started_ms) // 1000
         if in_progress else -1),
        ("rdb_saves", core.persistence.saves),
        ("rdb_last_cow_size", core.persistence.last_cow_size),
        ("rdb_last_load_keys_expired", core.persistence.last_load_keys_expired),
        ("rdb_last_load_keys_loaded", core.persistence.last_load_keys_loaded),
        *core.aof.info_fields(now),
        ("module_fork_in_progress", 0),
        ("module_fork_last_cow_size", 0),
    ]
    if core.config.appendonly:   # (server.aof_enabled: the directive, not the state)
        fields += core.aof.enabled_fields()
    p = core.persistence
    if core.loading and p.loading_total_bytes:      # (the RDB file loading at start)
        total, done = p.loading_total_bytes, p.loading_loaded_bytes
        perc = min(done / total * 100, 99.99) if total else 0.0
        elapsed = now // 1000 - p.loading_start_s
        eta = 1 if elapsed == 0 else elapsed * (total - done) // (done + 1)
        fields += [("loading_start_time", p.loading_start_s), ("loading_total_bytes", total),
                   ("loading_rdb_used_mem", 0), ("loading_loaded_bytes", done),
                   ("loading_loaded_perc", f"{perc:.2f}"), ("loading_eta_seconds", eta)]
    return fields


def section_stats(core: ServerCore) -> Fields:
    s = core.stats
    exceeded = core.evictor.exceeded_ms()
    return [
        ("total_connections_received", s.total_connections_received),
        ("total_commands_processed", core.total_commands_processed()),
        ("instantaneous_ops_per_sec", s.instantaneous_ops),
        ("total_net_input_bytes", s.net_input_bytes),
        ("total_net_output_bytes", s.net_output_bytes),
        ("total_net_repl_input_bytes", s.net_repl_input_bytes),
        ("total_net_repl_output_bytes", s.net_repl_output_bytes),
        ("instantaneous_input_kbps", _kbps(s, "net_input_bytes")),
        ("instantaneous_output_kbps", _kbps(s, "net_output_bytes")),
        ("instantaneous_input_repl_kbps", _kbps(s, "net_repl_input_bytes")),
        ("instantaneous_output_repl_kbps", _kbps(s, "net_repl_output_bytes")),
        ("rejected_connections", s.rejected_connections),
        ("sync_full", s.sync_full),
        ("sync_partial_ok", s.sync_partial_ok),
        ("sync_partial_err", s.sync_partial_err),
        ("expired_keys", s.expired_keys),
        ("expired_stale_perc", "0.00"),
        ("expired_time_cap_reached_count", 0),
        ("expire_cycle_cpu_milliseconds", s.expire_cycle_cpu_ns // 1_000_000),
        ("evicted_keys", s.evicted_keys),
        ("evicted_clients", s.evicted_clients),
        ("total_eviction_exceeded_time", exceeded[0]),
        ("current_eviction_exceeded_time", exceeded[1]),
        ("keyspace_hits", s.keyspace_hits),
        ("keyspace_misses", s.keyspace_misses),
        ("pubsub_channels", len(core.pubsub.channels)),
        ("pubsub_patterns", len(core.pubsub.patterns)),
        ("pubsubshard_channels", len(core.pubsub.shard_channels)),
        ("latest_fork_usec", core.latest_fork_usec),
        ("total_forks", core.total_forks),
        ("migrate_cached_sockets", core.host.migrate_links()),
        ("slave_expires_tracked_keys", len(core.replica_keys_with_expire)),
        ("active_defrag_hits", 0),
        ("active_defrag_misses", 0),
        ("active_defrag_key_hits", 0),
        ("active_defrag_key_misses", 0),
        ("total_active_defrag_time", 0),
        ("current_active_defrag_time", 0),
        *core.tracking.info_fields(),
        ("unexpected_error_replies", s.unexpected_error_replies),
        ("total_error_replies", s.total_error_replies),
        ("dump_payload_sanitizations", 0),
        ("total_reads_processed", s.total_reads_processed),
        ("total_writes_processed", s.total_writes_processed),
        ("io_threaded_reads_processed", 0),
        ("io_threaded_writes_processed", 0),
        ("reply_buffer_shrinks", 0),
        ("reply_buffer_expands", 0),
        ("client_query_buffer_limit_disconnections", s.client_qbuf_limit_disconnections),
        ("client_output_buffer_limit_disconnections", s.client_outbuf_limit_disconnections),
        # pyrepl's: the replicas' full-sync streams spilled to disk (master side)
        ("total_repl_spilled_bytes", s.repl_spilled_bytes),
        # pyrepl's: cut full syncs resumed (master side) and the payload not sent again
        ("sync_full_resumed", s.repl_resumed_syncs),
        ("total_repl_resumed_bytes", s.repl_resumed_bytes),
    ]


def _kbps(s: Stats, name: str) -> str:
    return f"{s.instant[name].rate() / 1024:.2f}"


def section_replication(core: ServerCore) -> Fields:
    repl = core.replication
    if repl is not None:
        return repl.info_fields()
    return [
        ("role", "master"),
        ("connected_slaves", 0),
        ("master_failover_state", "no-failover"),
        ("master_replid", core.replid),
        ("master_replid2", "0" * 40),
        ("master_repl_offset", 0),
        ("second_repl_offset", -1),
        ("repl_backlog_active", 0),
        ("repl_backlog_size", core.config.repl_backlog_size),
        ("repl_backlog_first_byte_offset", 0),
        ("repl_backlog_histlen", 0),
    ]


def section_cpu(core: ServerCore) -> Fields:
    pi = core.host.process_info()
    return [
        ("used_cpu_sys", f"{pi.get('cpu_sys', 0.0):.6f}"),
        ("used_cpu_user", f"{pi.get('cpu_user', 0.0):.6f}"),
        ("used_cpu_sys_children", f"{pi.get('cpu_sys_children', 0.0):.6f}"),
        ("used_cpu_user_children", f"{pi.get('cpu_user_children', 0.0):.6f}"),
        ("used_cpu_sys_main_thread", f"{pi.get('cpu_sys_main_thread', 0.0):.6f}"),
        ("used_cpu_user_main_thread", f"{pi.get('cpu_user_main_thread', 0.0):.6f}"),
    ]


def section_cluster(core: ServerCore) -> Fields:
    return [("cluster_enabled", int(core.cluster is not None))]


def section_keyspace(core: ServerCore) -> Fields:
    out: Fields = []
    for db in core.dbs:
        if db.data:
            out.append((f"db{db.id}", f"keys={len(db.data)},expires={len(db.expires)},"
                        f"avg_ttl={_avg_ttl(core, db)}"))
    return out


def _avg_ttl(core: ServerCore, db: object) -> int:
    expires = db.expires  # type: ignore[attr-defined]
    if not expires:
        return 0
    now = core.now_ms
    sample = list(expires.values())[:100]
    ttls = [w - now for w in sample if w > now]
    return sum(ttls) // len(ttls) if ttls else 0


def _empty(core: ServerCore) -> Fields:
    return []


def section_commandstats(core: ServerCore) -> Fields:
    out: Fields = []
    for cmd, st in sorted(core.cmdstats.items(), key=lambda item: item[0].name):
        if not (st.calls or st.rejected or st.failed):
            continue
        usec, per_call = st.usec()
        out.append((f"cmdstat_{cmd.name}", f"calls={st.calls},usec={usec},"
                    f"usec_per_call={per_call:.2f},rejected_calls={st.rejected},"
                    f"failed_calls={st.failed}"))
    return out


def section_latencystats(core: ServerCore) -> Fields:
    if not core.config.latency_tracking:
        return []
    wanted = core.config.latency_tracking_info_percentiles
    names = fmt_percentiles(wanted).split(" ") if wanted else []
    out: Fields = []
    for cmd, st in sorted(core.cmdstats.items(), key=lambda item: item[0].name):
        h = st.latency
        if not h.counts:
            continue
        out.append((f"latency_percentiles_usec_{cmd.name}",
                    ",".join(f"p{name}={h.value_at(p) / 1000:.3f}"
                             for name, p in zip(names, wanted, strict=True))))
    return out


def section_errorstats(core: ServerCore) -> Fields:
    return [(f"errorstat_{code}", f"count={n}") for code, n in sorted(core.errorstats.items())]


SECTIONS: dict[str, Callable[[ServerCore], Fields]] = {
    "server": section_server,
    "clients": section_clients,
    "memory": section_memory,
    "persistence": section_persistence,
    "stats": section_stats,
    "replication": section_replication,
    "cpu": section_cpu,
    "modules": _empty,
    "errorstats": section_errorstats,
    "commandstats": section_commandstats,
    "latencystats": section_latencystats,
    "cluster": section_cluster,
    "keyspace": section_keyspace,
}


def generate_info(core: ServerCore, args: list[bytes]) -> str:
    wanted: list[str] = []
    if not args:
        wanted = list(DEFAULT_SECTIONS)
    for a in args:
        name = a.decode("utf-8", "replace").lower()
        if name == "default":
            wanted.extend(DEFAULT_SECTIONS)
        elif name in ("all", "everything"):
            wanted.extend(ALL_SECTIONS)
        else:
            wanted.append(name)
    seen: set[str] = set()
    parts: list[str] = []
    for name in wanted:
        if name in seen or name not in SECTIONS:
            continue
        seen.add(name)
        fields = SECTIONS[name](core)
        title = "CPU" if name == "cpu" else name.capitalize()
        body = "".join(f"{k}:{v}\r\n" for k, v in fields)
        parts.append(f"# {title}\r\n{body}")
    return "\r\n".join(parts)
