"""Conversions between command replies and Lua values, as Redis's script_lua.c does them.

Theory of operation: Redis runs a script's command on its Lua client, encodes the reply in
that client's protocol (RESP2 unless the script called ``redis.setresp(3)``) and parses it
back into Lua (``redisProtocolToLuaType_*``). Our handlers return reply values
(``pyrepl.resp.types``) instead of bytes, so :class:`ReplyToLua` maps each value straight to
the Lua value the RESP text would have produced in that protocol:

=================  ===========================  ==================================
reply value        RESP2 client                 RESP3 client
=================  ===========================  ==================================
bytes / int        string / number              string / number
None, NULL_ARRAY   false                        nil
Status             {ok=...}                     {ok=...}
ReplyError         {err=...}                    {err=...}
list               table (array)                table (array, nil holes kept)
Map                flat array                   {map={k=v...}}
SetReply           array                        {set={member=true...}}
float              string (%.17g)               {double=n}
bool               1 / 0                        true / false
Verbatim           string                       {verbatim_string={format=, string=}}
=================  ===========================  ==================================

``Raw`` replies (pre-encoded, e.g. +OK) are parsed from their RESP text. Lua -> Redis (the
script's return value) is done in Lua (``sandbox.BOOTSTRAP``'s ``conv``); :func:`lua_argv`
turns ``redis.call`` arguments into a command's argv (numbers as ``%.17g``).
"""

from __future__ import annotations

import math
from typing import Any

from pyrepl.resp.types import NULL_ARRAY, Map, Raw, ReplyError, SetReply, Status, Verbatim
from pyrepl.resp.writer import format_double

ARGS_ERR = "ERR Lua redis lib command arguments must be strings or integers"
NOARGS_ERR = "ERR Please specify at least one argument for this redis lib call"


def lua_argv(args: tuple[Any, ...]) -> list[bytes] | None:
    """luaArgsToRedisArgv: strings as they are, numbers as ``%.17g`` (C's: a NaN with its sign,
    "-nan" for Lua's 0/0 on x86); None for anything else."""
    for a in args:
        if type(a) is not bytes:
            break
    else:
        return list(args)      # (strings only, as they mostly are: copied at once)
    argv = []
    for a in args:
        t = type(a)
        if t is bytes:
            argv.append(a)
        elif t is int or t is float:
            argv.append(b"%.17g" % a if a == a else
                        b"-nan" if math.copysign(1.0, a) < 0 else b"nan")
        else:
            return None
    return argv


def error_text(raw: str) -> str:
    """luaPushErrorBuff: "-CODE msg" keeps its code, anything else gets "ERR "; the message is
    trimmed of CR/LF at both ends."""
    if raw.startswith("-"):
        code, sep, msg = raw[1:].partition(" ")
        if not sep:
            code, msg = "ERR", raw[1:]
    else:
        code, msg = "ERR", raw
    return f"{code} {msg.strip(chr(13) + chr(10))}"


class BigNumber:
    """A RESP3 big number (``(<digits>``) met in a pre-encoded reply."""

    __slots__ = ("digits",)

    def __init__(self, digits: bytes) -> None:
        self.digits = digits


class ReplyToLua:
    """Turns reply values into Lua values of one runtime (``lupa`` tables made there)."""

    def __init__(self, lua: Any) -> None:
        self.table_from = lua.table_from
        self.fill = lua.eval("function(src, n) local t = {} for i = 1, n do t[i] = src[i] end "
                             "return t end")

    def err_table(self, message: str) -> Any:
        return self.table_from({b"err": error_text("-" + message).encode("utf-8", "replace"),
                                b"ignore_error_stats_update": True})

    def convert(self, v: Any, resp: int) -> Any:
        t = type(v)
        if t is bytes or t is int:
            return v
        if v is None or v is NULL_ARRAY:
            return False if resp == 2 else None
        if t is Raw:
            data = v.data
            if data[:1] == b"+" and data.find(b"\r\n") == len(data) - 2:   # (+OK, +PONG)
                return self.table_from({b"ok": data[1:-2]})
            return self.convert(parse_resp(data), resp)
        if t is list or t is tuple:
            items = [self.convert(x, resp) for x in v]
            tbl = self.table_from(items)
            if None in items:   # nil holes: assign one by one, as Redis's lua_settable does
                tbl = self.fill(tbl, len(items))
            return tbl
        if t is Status:
            return self.table_from({b"ok": v.text.encode()})
        if isinstance(v, ReplyError):
            return self.err_table(v.message)
        if t is Map:
            if resp == 2:
                flat: list[object] = []
                for k, x in v.items:
                    flat.append(k)
                    flat.append(x)
                return self.convert(flat, 2)
            inner = self.table_from({})
            for k, x in v.items:
                lk = self.convert(k, 3)
                if lk is not None:
                    inner[lk] = self.convert(x, 3)
            return self.table_from({b"map": inner})
        if t is SetReply:
            if resp == 2:
                return self.convert(v.items, 2)
            inner = self.table_from({})
            for k in v.items:
                lk = self.convert(k, 3)
                if lk is not None:
                    inner[lk] = True
            return self.table_from({b"set": inner})
        if t is float:
            if resp == 2:
                return format_double(v)
            return self.table_from({b"double": v})
        if t is bool:
            if resp == 2:
                return 1 if v else 0
            return v
        if t is Verbatim:
            if resp == 2:
                return v.data
            return self.table_from({b"verbatim_string": self.table_from(
                {b"format": v.fmt[:3], b"string": v.data})})
        if t is BigNumber:
            if resp == 2:
                return v.digits
            return self.table_from({b"big_number": v.digits})
        if t is str:
            return v.encode()
        if isinstance(v, int):
            return int(v)
        return False if resp == 2 else None


def parse_resp(data: bytes) -> object:
    """The first reply of a pre-encoded RESP text as a reply value (Raw replies)."""
    if not data:
        return None
    value, _ = _parse(data, 0)
    return value


def _parse(data: bytes, pos: int) -> tuple[object, int]:
    end = data.index(b"\r\n", pos)
    kind, line = data[pos:pos + 1], data[pos + 1:end]
    pos = end + 2
    if kind == b"+":
        return Status(line.decode("utf-8", "replace")), pos
    if kind == b"-":
        return ReplyError(line.decode("utf-8", "replace")), pos
    if kind == b":":
        return int(line), pos
    if kind in (b"$", b"="):
        n = int(line)
        if n < 0:
            return None, pos
        body = data[pos:pos + n]
        if kind == b"=":
            return Verbatim(body[4:], body[:3]), pos + n + 2
        return body, pos + n + 2
    if kind == b"_":
        return None, pos
    if kind == b",":
        return float(line), pos
    if kind == b"#":
        return line == b"t", pos
    if kind == b"(":
        return BigNumber(line), pos
    if kind == b"|":   # attributes: Lua never sees them (redisProtocolToLuaType_Attribute)
        for _ in range(2 * int(line)):
            _, pos = _parse(data, pos)
        return _parse(data, pos)
    if kind in (b"*", b"~", b"%", b">"):
        n = int(line)
        if n < 0:
            return NULL_ARRAY, pos
        count = 2 * n if kind == b"%" else n
        items = []
        for _ in range(count):
            x, pos = _parse(data, pos)
            items.append(x)
        if kind == b"%":
            return Map(list(zip(items[0::2], items[1::2], strict=True))), pos
        if kind == b"~":
            return SetReply(items), pos
        return items, pos
    return line, pos
