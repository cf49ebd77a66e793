"""Runs of plain commands, applied in one pass (shared helper: the replica's master-stream
loop and a pipelining client's dispatch both use it).

Theory of operation: a reader hands over a request and the requests it parsed behind it
(``queue``, last first). ``select`` takes the longest leading run of them whose commands
are all *plain* (``Command.plain``: O(1), never blocking, touching only the keyspace and
the selected db, so the per-command checks of ``ServerCore.execute`` cannot change within
the run and the caller makes them once) and whose argument counts fit their arity (checked
for all at C speed: a run ends before the first that does not, which then takes the full
path and gets its error there). The common run is one command repeated (one spelling: a
client or a master sends its commands as it spells them). ``start`` makes once the checks
that hold for the whole run. ``account`` counts the run in INFO commandstats: every call,
and the run timed as a whole, each command type in it recorded once at the run's mean time
per call (the one-by-one path samples one call in 16 of these commands the same way).
"""

from __future__ import annotations

from collections import Counter
from itertools import islice, repeat, takewhile
from operator import and_, attrgetter, ge, itemgetter, le
from sys import maxsize
from typing import Any

from pyrepl import native
from pyrepl.keyspace.hashslot import key_hash_slot

_name = itemgetter(0)
_plain = attrgetter("plain")
_min_args = attrgetter("min_args")
_max_args = attrgetter("max_args")


class _Unknown:
    """A name not in the command cache: ends a run."""

    plain = False


_UNKNOWN = _Unknown()


def run_length_reference(rest: list[list[bytes]], name: bytes, min_args: int,
                         max_args: int) -> int:
    """How many requests, taken from the end of ``rest`` (last first), have ``name`` as their
    first argument and between ``min_args`` and ``max_args`` arguments, stopping at the first
    that does not (``_plainrun.run_length`` in C)."""
    k = 0
    for r in reversed(rest):
        if not isinstance(r, list):
            break
        n = len(r)
        if n < 1 or n < min_args or n > max_args or r[0] != name:
            break
        k += 1
    return k


_native = native.load("pyrepl._plainrun")
run_length = run_length_reference if _native is None else _native.run_length


def start(core: Any, c: Any, first: list[bytes], rest: list[list[bytes]]
          ) -> tuple[list[Any], list[list[bytes]], bool] | None:
    """The run that ``first`` starts for client ``c`` (``select``), or None when it does
    not qualify and the full path must run it. Checked once for the run, as ``execute``
    and ``call`` check per command: no gate (busy script, MISCONF, pause), nothing waiting
    on keys, no key tracking, no MULTI, no CLIENT REPLY, and no call timed one by one
    (MONITOR, slowlog-log-slower-than 0, the latency monitor; a command's first call, which
    makes its stats, takes the full path too)."""
    cmd0 = core.name_cache.get(first[0])
    if cmd0 is None or not cmd0.plain or (core.gated and core.served_slots is None) or \
            core.keys_waited or core.tracking_on or c.in_multi or c.reply_mode:
        return None
    if core.maxmemory and not core.evictor.room_for_run():
        return None      # (near the limit: each command is checked, and may evict, alone)
    st0 = core.cmdstats.get(cmd0)
    if st0 is None or not st0.timing:
        return None
    run = select(core.name_cache, cmd0, first, rest)
    if not run[1]:
        return None
    return served_run(core.served_slots, c, run) if core.gated else run


NOT_SERVED = -2


def served_slot(table: bytearray, cmd: Any, argv: list[bytes]) -> int:
    """Cluster mode: the slot of ``argv``'s keys when the cluster redirect
    (pyrepl/core/cluster.py) runs the command here with no other move than setting the
    client's ``cluster_slot``: every key in one slot whose byte in ``table`` (the slots
    served with no check: pyrepl/cluster/served.py) is 1; -1 for a command without keys
    (run anywhere); ``NOT_SERVED`` otherwise (keys found by a function, or of another slot:
    the redirect says what). ``served_slot`` in pyrepl/_served.h is its C."""
    if cmd.keys_fn is not None or cmd.first_key < 0 or cmd.step < 0:
        return NOT_SERVED
    if cmd.first_key == 0:
        return -1
    slot = -1
    for i in cmd.key_positions(argv):
        key = argv[i]
        if type(key) is not bytes:
            return NOT_SERVED
        s = key_hash_slot(key)
        if slot < 0:
            if not table[s]:
                return NOT_SERVED
            slot = s
        elif s != slot:
            return NOT_SERVED
    return slot


def served_run(table: bytearray, c: Any, run: tuple[list[Any], list[list[bytes]], bool]
               ) -> tuple[list[Any], list[list[bytes]], bool] | None:
    """Cluster mode with no other gate up (``core.served_slots``, dispatch.refresh_gate):
    ``run`` cut before its first request that ``served_slot`` leaves to the redirect, None
    when that is the first, or when the client sent ASKING or READONLY (each of its commands
    goes through the redirect); our master's are never redirected. ``c.cluster_slot`` is left
    as the redirect of the run's last command leaves it."""
    if c.cluster_flags:
        return None
    cmds, reqs, one = run
    slot = -1
    if c.kind != "master":
        for i, (cmd, argv) in enumerate(zip(cmds, reqs, strict=True)):
            s = served_slot(table, cmd, argv)
            if s == NOT_SERVED:
                if i == 0:
                    return None
                del cmds[i:], reqs[i:]
                break
            slot = s
    c.cluster_slot = slot
    return cmds, reqs, one


def select(name_cache: dict[bytes, Any], cmd0: Any, first: list[bytes],
           rest: list[list[bytes]]) -> tuple[list[Any], list[list[bytes]], bool]:
    """The run that starts with ``first`` (whose command ``cmd0`` is plain) and goes on with
    ``rest`` (last first): its commands and its requests (none when ``first`` itself has a
    wrong argument count), and ``one``: every command is ``cmd0``."""
    lo, hi = cmd0.min_args, cmd0.max_args
    if not lo <= len(first) <= hi:
        return [], [], True
    # The common run: ``first``'s command repeated, each with an argument count it accepts
    # (counted in C, from the end of ``rest``, stopping at the first that is not).
    k = run_length(rest, first[0], lo, hi)
    if k:
        reqs = rest[-k:]
        reqs.append(first)
        reqs.reverse()
        return [cmd0] * (k + 1), reqs, True
    reqs = [first]
    cmds = [cmd0]
    cmds += takewhile(_plain, map(name_cache.get, map(_name, reversed(rest)),
                                  repeat(_UNKNOWN)))
    reqs += islice(reversed(rest), len(cmds) - 1)
    one = cmds.count(cmd0) == len(cmds)
    fit = _arity_fit(cmds, reqs, one)
    del cmds[fit:], reqs[fit:]
    return cmds, reqs, one


def _arity_fit(cmds: list[Any], reqs: list[list[bytes]], one: bool) -> int:
    """How many leading requests have an argument count their command accepts."""
    if one:
        cmd = cmds[0]
        if cmd.max_args == maxsize:   # (SET, HSET ...: the fewest arguments is the test)
            if min(map(len, reqs)) >= cmd.min_args:
                return len(reqs)
        else:
            lens = list(map(len, reqs))
            if min(lens) >= cmd.min_args and max(lens) <= cmd.max_args:
                return len(reqs)
    lens = list(map(len, reqs))
    fits = list(map(and_, map(le, map(_min_args, cmds), lens),
                    map(ge, map(_max_args, cmds), lens)))
    return fits.index(False) if False in fits else len(reqs)


def account(core: Any, c: Any, cmds: list[Any], one: bool, ns: int) -> None:
    """Count a run of calls (``cmds``) that took ``ns`` in all (INFO commandstats, the
    client's command count and last command)."""
    n = len(cmds)
    c.commands += n
    c.last_cmd = cmds[-1]
    per_call = ns // n
    tracking = core.config.latency_tracking
    cmdstats = core.cmdstats
    for cmd, calls in ((cmds[0], n),) if one else Counter(cmds).items():
        st = cmdstats.get(cmd) or core.command_stat(cmd)
        st.calls += calls
        st.record(per_call, tracking)
