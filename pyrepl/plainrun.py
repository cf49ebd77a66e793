"""Runs of plain commands, applied in one pass (shared helper: the replica's master-stream
loop and a pipelining client's dispatch both use it).

Theory of operation: a reader hands over a request and the requests it parsed behind it
(``queue``, last first). ``select`` takes the longest leading run of them whose commands
are all *plain* (``Command.plain``: O(1), never blocking, touching only the keyspace and
the selected db, so the per-command checks of ``ServerCore.execute`` cannot change within
the run and the caller makes them once) and whose argument counts fit their arity (checked
for all at C speed: a run ends before the first that does not, which then takes the full
path and gets its error there). The common run is one command repeated (one spelling: a
client or a master sends its commands as it spells them). ``account`` counts the run in INFO commandstats: every call, and the run timed as
a whole, each command type in it recorded once at the run's mean time per call (the one-by-one
path samples one call in 16 of these commands the same way).
"""

from __future__ import annotations

from collections import Counter
from itertools import islice, repeat, takewhile
from operator import and_, attrgetter, ge, itemgetter, le
from sys import maxsize
from typing import Any

_name = itemgetter(0)
_plain = attrgetter("plain")
_min_args = attrgetter("min_args")
_max_args = attrgetter("max_args")


class _Unknown:
    """A name not in the command cache: ends a run."""

    plain = False


_UNKNOWN = _Unknown()


def select(name_cache: dict[bytes, Any], cmd0: Any, first: list[bytes],
           rest: list[list[bytes]]) -> tuple[list[Any], list[list[bytes]], bool]:
    """The run that starts with ``first`` (whose command ``cmd0`` the caller found plain)
    and goes on with ``rest`` (last first): its commands (one per request, or ``[cmd0]``
    when ``one``: every request is ``cmd0``) and its requests; none when ``first`` itself
    has a wrong argument count."""
    reqs = [first]
    cmds = [cmd0]
    name = first[0]
    one = rest[-1][0] == name
    if one:
        # The names are compared a window at a time (a memcmp per name, no call), the window
        # growing 4x while all match: the work stays proportional to the run taken, so a
        # caller that alternates runs and other commands never rescans the whole queue.
        size = 16
        while True:
            window = rest if len(rest) <= size else rest[-size:]
            names = list(map(_name, reversed(window)))
            if names.count(name) != len(names):
                reqs += islice(reversed(window), len(list(takewhile(name.__eq__, names))))
                break
            if window is rest:
                reqs += reversed(rest)
                break
            size *= 4
    else:
        cmds += takewhile(_plain, map(name_cache.get, map(_name, reversed(rest)),
                                      repeat(_UNKNOWN)))
        reqs += islice(reversed(rest), len(cmds) - 1)
        one = cmds.count(cmd0) == len(cmds)
    n = len(reqs)
    fit = _arity_fit(cmd0 if one else cmds, reqs)
    if fit < n:
        del cmds[fit:], reqs[fit:]
    return cmds, reqs, one


def _arity_fit(cmds: Any, reqs: list[list[bytes]]) -> int:
    """How many leading requests have an argument count their command accepts (``cmds``: a
    list of one command per request, or one command for all)."""
    if type(cmds) is not list:
        cmd = cmds
        if cmd.max_args == maxsize:
            if min(map(len, reqs)) >= cmd.min_args:
                return len(reqs)
        else:
            lens = list(map(len, reqs))
            if min(lens) >= cmd.min_args and max(lens) <= cmd.max_args:
                return len(reqs)
        cmds = [cmd] * len(reqs)
    lens = list(map(len, reqs))
    fits = list(map(and_, map(le, map(_min_args, cmds), lens),
                    map(ge, map(_max_args, cmds), lens)))
    return fits.index(False) if False in fits else len(reqs)


def account(core: Any, c: Any, cmds: list[Any], one: bool, n: int, ns: int) -> None:
    """Count a run of ``n`` calls that took ``ns`` in all (INFO commandstats, the client's
    command count and last command)."""
    c.commands += n
    c.last_cmd = cmds[-1]
    per_call = ns // n
    tracking = core.config.latency_tracking
    cmdstats = core.cmdstats
    if one:
        st = cmdstats.get(cmds[0]) or core.command_stat(cmds[0])
        st.calls += n
        st.record(per_call, tracking)
        return
    for cmd, calls in Counter(cmds).items():
        st = cmdstats.get(cmd) or core.command_stat(cmd)
        st.calls += calls
        st.record(per_call, tracking)


def failed_at(reqs: list[list[bytes]], argv: list[bytes]) -> int:
    """The index of ``argv`` in ``reqs`` (the request a run stopped at on an exception)."""
    return next(i for i, r in enumerate(reqs) if r is argv)
