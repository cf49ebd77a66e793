"""pyrepl.scripting.ldb without a server: the command parser (ldbReplParseCommand's rules),
replies shown as the debugger shows them, and a session's commands over a fake channel (the
one fake of LdbChannelPort). Whole conversations against Redis: tests/interop/
test_diff_lua_debugger.py."""

from __future__ import annotations

from pyrepl.scripting.ldb import Ldb, parse_command, protocol_to_human, repr_bytes


class FakeChannel:
    """Scripted input, recorded output."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)
        self.sent: list[bytes] = []

    def read(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


def test_parse_command_as_redis() -> None:
    assert parse_command(b"") == (None, False)
    assert parse_command(b"*2\r\n$1\r\ns\r\n$2\r\nab\r\n") == ([b"s", b"ab"], False)
    assert parse_command(b"junk*1\r\n$1\r\nc\r\n") == ([b"c"], False)   # (forgiving)
    assert parse_command(b"*2\r\n$1\r\ns\r\n") == (None, False)           # more to read
    assert parse_command(b"*1\r\n$3\r\nab") == (None, False)
    assert parse_command(b"PING\r\n") == (None, True)                     # no '*'
    assert parse_command(b"*0\r\n") == (None, True)
    assert parse_command(b"*1025\r\n") == (None, True)
    assert parse_command(b"*1\r\n$0\r\n\r\n") == (None, True)
    assert parse_command(b"*1\r\n$1025\r\n") == (None, True)
    assert parse_command(b"*1\r\n+x\r\n") == (None, True)
    assert parse_command(b"*1\r\n$1\r\nabc\r\n") == (None, True)          # no CRLF after it


def test_replies_and_strings_as_the_debugger_shows_them() -> None:
    assert repr_bytes(b'a"\\\n\r\t\x07\x08\x00\xff') == '"a\\"\\\\\\n\\r\\t\\a\\b\\x00\\xff"'
    assert protocol_to_human(b":5\r\n") == "5"
    assert protocol_to_human(b"$-1\r\n") == "NULL"
    assert protocol_to_human(b"*-1\r\n") == "NULL"
    assert protocol_to_human(b"+OK\r\n") == '"+OK"'
    assert protocol_to_human(b"-ERR x\r\n") == '"-ERR x"'
    assert protocol_to_human(b"*2\r\n$1\r\na\r\n:1\r\n") == '["a",1]'
    assert protocol_to_human(b"%1\r\n$1\r\nk\r\n#t\r\n") == '{"k" => #true}'
    assert protocol_to_human(b"~1\r\n,1.5\r\n") == "~((double) 1.5)"
    assert protocol_to_human(b"_\r\n") == "(null)"


def test_commands_of_a_session_over_a_channel() -> None:
    ch = FakeChannel(b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n", b"*1\r\n$1\r\nb\r\n",
                     b"*2\r\n$1\r\nb\r\n$2\r\n-2\r\n", b"*1\r\n$1\r\ns\r\n")
    ldb = Ldb(ch, b"local a = 1\nreturn a\n\n", forked=False)
    assert ldb.lines == [b"local a = 1", b"return a"]
    assert ldb.line(1, False) == "step over"
    assert ch.sent.pop() == (b"*2\r\n+* Stopped at 1, stop reason = step over\r\n"
                             b"+-> 1   local a = 1\r\n")
    for _ in range(3):
        got = ldb.read()
        assert got[0] == "cmd" and ldb.command(*got[1:]) == "done"
    assert ch.sent == [b"*2\r\n+-> 1   local a = 1\r\n+  #2   return a\r\n",
                       b"*2\r\n+1 breakpoints set:\r\n+  #2   return a\r\n",
                       b"*1\r\n+Breakpoint removed.\r\n"]
    got = ldb.read()
    assert ldb.command(*got[1:]) == "step" and ldb.step
    assert ldb.read() == ("lost",) and not ldb.step      # the client is gone: run to the end
    assert ldb.line(2, False) is None


def test_a_protocol_error_and_a_timeout_stop() -> None:
    ldb = Ldb(FakeChannel(b"PING\r\n"), b"while true do end", forked=False)
    assert ldb.read() == ("err", b"protocol error")
    ldb.step = False
    ldb.over_time = lambda: True
    assert ldb.line(1, True) == "timeout reached, infinite loop?"
    ldb.over_time = lambda: False
    assert ldb.line(1, True) is None
