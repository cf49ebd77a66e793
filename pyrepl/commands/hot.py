"""The hottest commands' common forms in C (pyrepl/commands/_hot.c): SET, GET, INCR, LPUSH,
RPUSH, HSET, ZADD, EXISTS, LPOP, RPOP, SADD, HINCRBY, EXPIRE, GEOADD, DEL, BITCOUNT, SETBIT,
PFCOUNT, MSET, XADD, ZPOPMIN, ZPOPMAX, PEXPIREAT, MULTI, EXEC, ZRANGEBYSCORE, SINTER, PFADD,
ZINCRBY, XREADGROUP, SPOP and GEOSEARCH get a C handler that does what the Python handler's fast path
does, and calls the Python handler, the reference, for everything else. ``REFERENCE`` keeps the Python
handlers (tests/unit/test_hot.py runs both); they are the handlers when pyrepl runs as plain
Python (pyrepl/native.py)."""

from __future__ import annotations

from collections import deque
from typing import Any

from pyrepl import native
from pyrepl.commands.bitmaps import bitcount, setbit
from pyrepl.commands.geo import geoadd
from pyrepl.commands.hashes import hincrby, hset
from pyrepl.commands.hyperloglog import pfadd, pfcount
from pyrepl.commands.keys import del_, exists, expire, pexpireat
from pyrepl.commands.lists import lpush, rpush
from pyrepl.commands.sets import sadd, sinter, spop
from pyrepl.commands.streams import xadd, xreadgroup
from pyrepl.commands.strings import get, incr, mset, set_
from pyrepl.commands.table import COMMANDS
from pyrepl.commands.transactions import exec_, multi
from pyrepl.commands.zsets import zadd
from pyrepl.core.client import Client
from pyrepl.keyspace.db import Database
from pyrepl.keyspace.stream import Consumer, Entries, Group, Nack, Node, Pel, Stream, _streamlp
from pyrepl.keyspace.zset import ADDED, ZSet
from pyrepl.resp.types import NULL_ARRAY, OK, Map

_hot = native.load("pyrepl.commands._hot")

REFERENCE = {"set": set_, "get": get, "incr": incr, "lpush": lpush, "rpush": rpush,
             "hset": hset, "zadd": zadd, "exists": exists,
             "lpop": COMMANDS[b"lpop"].handler, "rpop": COMMANDS[b"rpop"].handler,
             "sadd": sadd, "hincrby": hincrby, "expire": expire, "geoadd": geoadd,
             "del": del_, "bitcount": bitcount, "setbit": setbit, "pfcount": pfcount,
             "mset": mset, "xadd": xadd, "zpopmin": COMMANDS[b"zpopmin"].handler,
             "zpopmax": COMMANDS[b"zpopmax"].handler, "pexpireat": pexpireat,
             "multi": multi, "exec": exec_,
             "zrangebyscore": COMMANDS[b"zrangebyscore"].handler, "sinter": sinter,
             "pfadd": pfadd, "zincrby": COMMANDS[b"zincrby"].handler,
             "xreadgroup": xreadgroup, "spop": spop,
             "geosearch": COMMANDS[b"geosearch"].handler}


def bind(core_cls: type, stats_cls: type, handlers: dict[str, Any] = REFERENCE) -> None:
    """The classes whose slots the C handlers read (the core's given by pyrepl/core/server.py,
    which imports this package first), and the Python handlers they stand for."""
    if _hot is None:
        return
    _hot.bind(Client, Database, core_cls, stats_cls, deque, ZSet, OK, ADDED, Stream, Node,
              Entries, handlers)
    if _streamlp is not None:   # (else XREADGROUP's C handler runs its reference)
        _hot.bind_streams(Group, Consumer, Nack, Pel, _streamlp.history_reply, NULL_ARRAY, Map)


def install(c_handlers: bool = True) -> None:
    """Put the C handlers (or, for a test's reference server or as plain Python, the Python
    ones) in the table."""
    if _hot is None:
        c_handlers = False
    for name, fn in REFERENCE.items():
        COMMANDS[name.encode()].handler = getattr(_hot, name) if c_handlers else fn
