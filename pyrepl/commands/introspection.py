"""Introspection commands: SLOWLOG, MONITOR, LATENCY, MEMORY, LOLWUT, MODULE.

Theory of operation: the slow log lives in ``pyrepl.core.slowlog`` (``core.slowlog``, filled by
``ServerCore.call``), MONITOR's feed in ``pyrepl.core.monitor`` (``core.monitors``), the latency
monitor in ``pyrepl.core.latency`` (``core.latency``) and the memory figures in ``pyrepl.core.memory``;
these handlers only read, reset or register. pyrepl loads no modules: MODULE LIST is empty and
MODULE LOAD fails as Redis does for a module it cannot load.
"""

from __future__ import annotations

import gc
from typing import Any

from pyrepl.commands.table import command, container, find_command
from pyrepl.commands.util import (
    help_command,
    parse_int,
    parse_long_range,
    subcommand_error,
)
from pyrepl.core import memory
from pyrepl.core.latency import histogram_cdf
from pyrepl.errors import SYNTAX
from pyrepl.resp.types import NO_REPLY, OK, Map, ReplyError, Verbatim

container("slowlog", group="server", summary="A container for slow log commands",
          since="2.2.12")


@command("slowlog|get", -2, "admin loading stale", group="server", since="2.2.12",
         summary="Get the slow log's entries")
def slowlog_get(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3:
        raise subcommand_error(argv)
    count = 10
    if len(argv) == 3:
        count = parse_long_range(argv[2], -1, (1 << 63) - 1,
                                 "ERR count should be greater than or equal to -1")
    return c.core.slowlog.get(count)


@command("slowlog|len", 2, "admin loading stale", group="server", since="2.2.12",
         summary="Get the slow log's length")
def slowlog_len(c: Any, argv: list[bytes]) -> object:
    return len(c.core.slowlog.entries)


@command("slowlog|reset", 2, "admin loading stale", group="server", since="2.2.12",
         summary="Clear all entries from the slow log")
def slowlog_reset(c: Any, argv: list[bytes]) -> object:
    c.core.slowlog.reset()
    return OK


help_command("slowlog", (
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
), group="server", since="6.2.0")


@command("monitor", 1, "admin noscript loading stale", group="server",
         summary="Listen for all requests received by the server in real time")
def monitor(c: Any, argv: list[bytes]) -> object:
    """monitorCommand: not inside EXEC; a replica link or a monitor already gets no answer."""
    core = c.core
    if c.in_multi or core._call_depth:
        raise ReplyError("ERR MONITOR isn't allowed for DENY BLOCKING client")
    if c.kind in ("replica", "master") or c in core.monitors:
        return NO_REPLY
    core.monitors[c] = None
    core.resample()          # every call is timed (and fed) while a monitor listens
    return OK


# -- LATENCY ------------------------------------------------------------------------------------

container("latency", group="server", summary="A container for latency diagnostics commands",
          since="2.8.13")

_LATENCY = "admin noscript loading stale"


@command("latency|latest", 2, _LATENCY, group="server", since="2.8.13",
         summary="Return the latest latency samples for all events.")
def latency_latest(c: Any, argv: list[bytes]) -> object:
    return c.core.latency.latest()


@command("latency|history", 3, _LATENCY, group="server", since="2.8.13",
         summary="Return timestamp-latency samples for the event.")
def latency_history(c: Any, argv: list[bytes]) -> object:
    return c.core.latency.history(argv[2].decode("utf-8", "replace"))


@command("latency|reset", -2, _LATENCY, group="server", since="2.8.13",
         summary="Reset latency data for one or more events.")
def latency_reset(c: Any, argv: list[bytes]) -> object:
    names = [a.decode("utf-8", "replace") for a in argv[2:]] if len(argv) > 2 else None
    return c.core.latency.reset(names)


@command("latency|graph", 3, _LATENCY, group="server", since="2.8.13",
         summary="Return a latency graph for the event.")
def latency_graph(c: Any, argv: list[bytes]) -> object:
    """pyrepl's own drawing (Redis draws a sparkline): one row per sample, newest last."""
    event = argv[2].decode("utf-8", "replace")
    ts = c.core.latency.events.get(event)
    if ts is None:
        raise ReplyError(f"ERR No samples available for event '{event}'")
    high = max(ms for _, ms in ts.samples) or 1
    rows = [f"{event} - high {high} ms, low {min(ms for _, ms in ts.samples)} ms "
            f"(all time high {ts.max} ms)", "-" * 60]
    rows += [f"{t} {ms:>6} ms {'#' * max(1, ms * 40 // high)}" for t, ms in ts.samples]
    return Verbatim(("\n".join(rows) + "\n").encode())


@command("latency|doctor", 2, _LATENCY, group="server", since="2.8.13",
         summary="Return a human readable latency analysis report.")
def latency_doctor(c: Any, argv: list[bytes]) -> object:
    core = c.core
    if not core.config.latency_monitor_threshold:
        text = ("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis "
                "instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" "
                "in order to enable it. If we weren't in a deep space mission I'd suggest to "
                "take a look at https://redis.io/topics/latency-monitor.\n")
    elif not core.latency.events:
        text = ("Dave, no latency spike was observed during the lifetime of this Redis "
                "instance, not in the slightest bit. I honestly think you ought to sit down "
                "calmly, take a stress pill, and think things over.\n")
    else:
        lines = ["Dave, I have observed latency spikes in this Redis instance. You don't mind "
                 "talking about it, do you Dave?", ""]
        now = core.host.time_us() // 1_000_000
        for i, (name, ts) in enumerate(core.latency.events.items(), 1):
            values = [ms for _, ms in ts.samples]
            avg = sum(values) // len(values)
            mad = sum(abs(v - avg) for v in values) // len(values)
            period = max(1, now - ts.samples[0][0]) / len(values)
            lines.append(f"{i}. {name}: {len(values)} latency spikes (average {avg}ms, mean "
                         f"deviation {mad}ms, period {period:.2f} sec). Worst all time event "
                         f"{ts.max}ms.")
        # (Redis goes on with advice for some events; pyrepl gives none)
        text = "\n".join(lines) + "\n\nWhile there are latency events logged, I'm not able to " \
            "suggest any easy fix. Please use the Redis community to get some help, providing " \
            "this report in your help request.\n"
    return Verbatim(text.encode())


@command("latency|histogram", -2, _LATENCY, group="server", since="7.0.0",
         summary="Return the cumulative distribution of latencies of a subset of commands or "
                 "all.")
def latency_histogram(c: Any, argv: list[bytes]) -> object:
    """latencyAllCommandsFillCDF / latencySpecificCommandsFillCDF, from INFO latencystats'
    histograms (recorded while latency-tracking is on, one call in 16 of a fast command)."""
    core = c.core
    if len(argv) == 2:
        wanted = list(core.cmdstats)
    else:
        wanted = []
        for name in argv[2:]:
            cmd = find_command(name)
            if cmd is None:
                continue
            wanted += [cmd, *cmd.subcommands.values()]
    items = []
    for cmd in wanted:
        st = core.cmdstats.get(cmd)
        if st is None or not st.calls:
            continue
        counts = st.latency_counts(core.config.latency_tracking)
        if not counts:
            continue
        cdf = histogram_cdf(counts)
        items.append((cmd.name.encode(), Map([(b"calls", sum(counts.values())),
                                              (b"histogram_usec", Map(cdf))])))
    return Map(items)


help_command("latency", (
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the "
    "specified command names.",
    "    If no commands are specified then all histograms are replied.",
), group="server", since="2.8.13", summary="Show helpful text about the different subcommands.")


# -- MEMORY -------------------------------------------------------------------------------------

container("memory", group="server", summary="A container for memory diagnostics commands",
          since="4.0.0")


@command("memory|usage", -3, "readonly", keys=(2, 2, 1), group="server", since="4.0.0",
         summary="Estimate the memory usage of a key")
def memory_usage(c: Any, argv: list[bytes]) -> object:
    """MEMORY USAGE key [SAMPLES count]: what the key costs pyrepl (its value's Python objects
    and its slot in the keyspace), containers estimated from ``count`` sampled elements (5 by
    default, 0: all), as Redis's objectComputeSize samples."""
    samples = 5
    i = 3
    while i < len(argv):
        if argv[i].lower() == b"samples" and i + 1 < len(argv):
            samples = parse_int(argv[i + 1])
            if samples < 0:
                raise ReplyError(SYNTAX)
            if samples == 0:
                samples = 1 << 62
            i += 2
        else:
            raise ReplyError(SYNTAX)
    key = argv[2]
    value = c.db.lookup_read_nonotify(key) if hasattr(c.db, "lookup_read_nonotify") \
        else c.db.lookup_read(key)
    if value is None:
        return None
    return memory.key_size(key, value, samples, c.db)


@command("memory|stats", 2, "", group="server", since="4.0.0",
         summary="Show memory usage details")
def memory_stats(c: Any, argv: list[bytes]) -> object:
    return Map(memory.stats(c.core))


@command("memory|doctor", 2, "", group="server", since="4.0.0",
         summary="Outputs memory problems report")
def memory_doctor(c: Any, argv: list[bytes]) -> object:
    return Verbatim(memory.doctor(c.core).encode())


@command("memory|malloc-stats", 2, "", group="server", since="4.0.0",
         summary="Show allocator internal stats")
def memory_malloc_stats(c: Any, argv: list[bytes]) -> object:
    return Verbatim(b"Stats not supported for the current allocator")


@command("memory|purge", 2, "", group="server", since="4.0.0",
         summary="Ask the allocator to release memory")
def memory_purge(c: Any, argv: list[bytes]) -> object:
    gc.collect()
    return OK


help_command("memory", (
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
), group="server", since="4.0.0")


# -- LOLWUT, MODULE ------------------------------------------------------------------------------

@command("lolwut", -1, "readonly fast", group="server", since="5.0.0",
         summary="Display some computer art and the Redis version")
def lolwut(c: Any, argv: list[bytes]) -> object:
    """Redis 7.0's LOLWUT (its version has no drawing): the version line. pyrepl does not draw
    the art of LOLWUT VERSION 5 or 6 and answers the same line."""
    if len(argv) >= 3 and argv[1].lower() == b"version":
        parse_int(argv[2])
    return Verbatim(b"Redis ver. %s\n" % c.core.redis_version.encode())


container("module", group="server", summary="A container for module commands", since="4.0.0")


@command("module|list", 2, "admin noscript", group="server", since="4.0.0",
         summary="List all modules loaded by the server")
def module_list(c: Any, argv: list[bytes]) -> object:
    return []


def _no_modules(c: Any, argv: list[bytes]) -> object:
    c.core.log.warning(f"Module {argv[2].decode('utf-8', 'replace')} failed to load: pyrepl "
                       "loads no modules")
    raise ReplyError("ERR Error loading the extension. Please check the server logs.")


command("module|load", -3, "no-async-loading admin noscript protected", group="server",
        since="4.0.0", summary="Load a module")(_no_modules)
command("module|loadex", -3, "no-async-loading admin noscript protected", group="server",
        since="7.0.0", summary="Load a module with extended parameters")(_no_modules)


@command("module|unload", 3, "no-async-loading admin noscript protected", group="server",
         since="4.0.0", summary="Unload a module")
def module_unload(c: Any, argv: list[bytes]) -> object:
    raise ReplyError("ERR Error unloading module: no such module with that name")


help_command("module", (
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and "
    "optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
), group="server", since="5.0.0")
