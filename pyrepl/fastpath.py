"""A request's entry points into the core, in C when pyrepl runs its extensions
(pyrepl/native.py), else their Python references.

- ``execute(core, c, argv)``: ``ServerCore.execute(c, argv)``, whose common case
  pyrepl/_dispatch.c runs (bound by pyrepl/core/server.py); a queued MULTI command's too.
- ``call(core, c, cmd, argv)``: ``ServerCore.call(c, cmd, argv)`` (EXEC's call of each
  queued command), whose common case pyrepl/_dispatch.c runs.
- ``start_run(core, c, first, rest)`` and ``account_run(core, c, cmds, one, ns)``:
  ``plainrun.start`` and ``plainrun.account``, whose common case (a run of one command)
  pyrepl/_plainrun.c runs.
- ``propagating``: ``_plainrun.propagating(core, c, cmds, reqs, replies)``, the C of
  ``dispatch.propagating_loop`` (a run's loop with a backlog), or None (dispatch runs its
  Python).
"""

from __future__ import annotations

from typing import Any

from pyrepl import native, plainrun


def execute_reference(core: Any, c: Any, argv: list[bytes]) -> None:
    """``core.execute(c, argv)``: what ``_dispatch.execute`` does outside its common case."""
    core.execute(c, argv)


def call_reference(core: Any, c: Any, cmd: Any, argv: list[bytes]) -> object:
    """``core.call(c, cmd, argv)``: what ``_dispatch.call`` does outside its common case."""
    return core.call(c, cmd, argv)


_dispatch = native.load("pyrepl._dispatch")
_plainrun = native.load("pyrepl._plainrun")

execute = execute_reference if _dispatch is None else _dispatch.execute
call = call_reference if _dispatch is None else _dispatch.call
start_run = plainrun.start if _plainrun is None else _plainrun.start
account_run = plainrun.account if _plainrun is None else _plainrun.account
propagating = None if _plainrun is None else _plainrun.propagating
