"""The C's check that an object's slots are set (pyrepl/_slots.h, ``slots_all_set``), and the
``_whole`` slot it leaves its answer in.

Every C entry checks, before it reads a slot at its offset, that the slot is set: an unset one
sends the call to the Python reference. The classes every request checks (ServerCore, Client,
Command) carry a ``_whole`` slot: the first check walks the object's whole layout and leaves
True there when every slot is set, False when one is not (checked slot by slot from then on).
These tests hold the classes to setting every slot in ``__init__`` (else the walk answers False
and the saving is lost), and the walk to its answers.
"""

from __future__ import annotations

import pytest

from pyrepl import native
from pyrepl.commands.table import COMMANDS, Command
from pyrepl.core.client import Client
from pyrepl.core.server import ServerCore
from pyrepl.resp.fastreader import first
from tests.support.cores import cmd
from tests.support.execpaths import warm_server


def _layout(cls: type) -> list[str]:
    names: list[str] = []
    for k in cls.__mro__:
        s = k.__dict__.get("__slots__", ())
        names += [s] if isinstance(s, str) else [n for n in s
                                                 if n not in ("__dict__", "__weakref__")]
    return names


def _unset(o: object) -> list[str]:
    return [n for n in _layout(type(o)) if not hasattr(o, n)]


def test_the_checked_classes_set_every_slot_in_init() -> None:
    core, c = warm_server(False)
    assert "_whole" in _layout(ServerCore) and _unset(core) == []
    assert "_whole" in _layout(Client) and _unset(c) == []
    fresh = Client(core, 99)
    assert _unset(fresh) == [] and fresh._whole is None
    assert "_whole" in _layout(Command)
    assert {name: _unset(command) for name, command in COMMANDS.items()
            if _unset(command)} == {}


_dispatch = native.load("pyrepl._dispatch")


@pytest.mark.skipif(_dispatch is None, reason="the C dispatch is not built "
                    f"({native.WHY_PURE})")
def test_the_first_check_leaves_its_answer_in_whole() -> None:
    assert _dispatch is not None
    core, c = warm_server(False)
    other = Client(core, 77)
    del other.lib_ver               # (a slot no C reads: the walk sees it, the lists do not)
    for client in (c, other):
        client._whole = None
    set_cmd = COMMANDS[b"set"]      # (not run here: left as it was found)
    set_cmd._whole = None
    COMMANDS[b"incr"]._whole = None
    for client in (c, other):
        client.data_to_send()
        argv = first(client.reader, cmd("INCR", "n"))
        assert argv is not None
        _dispatch.execute(core, client, argv)
    # every slot set: True; one unset: False, and the C ran the request all the same
    assert c._whole is True and core._whole is True and set_cmd._whole is None
    assert COMMANDS[b"incr"]._whole is True
    assert other._whole is False
    assert (c.data_to_send(), other.data_to_send()) == (b":1\r\n", b":2\r\n")
    # a second request reads the answers as they are
    argv = first(other.reader, cmd("INCR", "n"))
    assert argv is not None
    _dispatch.execute(core, other, argv)
    assert other._whole is False and other.data_to_send() == b":3\r\n"
