"""Redis 7 functions, sans-io: FUNCTION * and FCALL driven through a ServerCore in-process
(real Lua 5.1), the library rules, the busy-function hook, the RDB and DUMP payload formats."""

from __future__ import annotations

import pytest

from pyrepl.core.server import ServerCore
from pyrepl.rdb.crc64 import crc64
from pyrepl.rdb.decoder import FunctionSkipped, RdbError, load_rdb_file
from pyrepl.rdb.dump import PayloadError, functions_payload, read_functions_payload
from pyrepl.rdb.encoder import encode_rdb_bytes
from pyrepl.scripting.functions import (
    FunctionLoadError,
    _je,
    install_libraries,
    parse_metadata,
    prepare_libraries,
    rdb_libraries,
    valid_name,
)
from tests.support.cores import make_core, run, step_clock
from tests.support.lua import LIB


@pytest.fixture
def core() -> ServerCore:
    return make_core()


def bulk(s: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(s), s)


def test_load_call_and_propagate(core: ServerCore) -> None:
    c = core.connection_made()
    fed: list[list[bytes]] = []
    core.repl_feed = lambda db, argv, data=None: fed.append(list(argv))
    core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
    assert run(c, "FUNCTION", "LOAD", LIB) == bulk(b"lib")
    assert fed == [[b"FUNCTION", b"LOAD", LIB.encode()]]
    fed.clear()
    assert run(c, "FCALL", "PUT", "1", "k", "v") == b":1\r\n"
    assert fed == [[b"MULTI"], [b"set", b"k", b"v"], [b"incr", b"calls"], [b"EXEC"]]
    fed.clear()
    assert run(c, "FCALL_RO", "get", "1", "k") == bulk(b"v")
    assert run(c, "FCALL_RO", "put", "1", "k", "v") == \
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n"
    assert fed == []
    assert run(c, "FUNCTION", "LOAD", LIB) == b"-ERR Library 'lib' already exists\r\n"
    assert run(c, "FUNCTION", "DELETE", "lib") == b"+OK\r\n"
    assert fed == [[b"FUNCTION", b"DELETE", b"lib"]]
    assert run(c, "FCALL", "put", "0") == b"-ERR Function not found\r\n"
    assert run(c, "FUNCTION", "DELETE", "lib") == b"-ERR Library not found\r\n"


def test_fcall_errors_and_arguments(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "FUNCTION", "LOAD", "#!lua name=t\nredis.register_function('f', "
                               "function(keys, args) return {keys, args, #keys} end)\n"
                               "redis.register_function('e', function() error('x') end)\n"
                               "redis.register_function('k', function() return KEYS end)")
    assert run(c, "FCALL", "f", "2", "a", "b", "c") == \
        b"*3\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n*1\r\n$1\r\nc\r\n:2\r\n"
    assert run(c, "FCALL", "f", "x") == b"-ERR Bad number of keys provided\r\n"
    assert run(c, "FCALL", "f", "3", "a") == \
        b"-ERR Number of keys can't be greater than number of args\r\n"
    assert run(c, "FCALL", "f", "-1") == b"-ERR Number of keys can't be negative\r\n"
    assert run(c, "FCALL", "e", "0") == \
        b"-ERR user_function:3: x script: e, on @user_function:3.\r\n"
    assert run(c, "FCALL", "k", "0") == (
        b"-ERR user_function:4: Script attempted to access nonexistent global variable 'KEYS' "
        b"script: k, on @user_function:4.\r\n")


@pytest.mark.parametrize(("body", "error"), [
    ("no shebang", "Missing library metadata"),
    ("#!lua name=x", "Invalid library metadata"),
    ("#!lua\nx", "Library name was not given"),
    ("#!lua name=a name=b\nx", "Invalid metadata value, name argument was given multiple times"),
    ("#!lua name=a foo=bar\nx", "Invalid metadata value given: foo=bar"),
    ("#!js name=a\nx", "Engine 'js' not found"),
    ("#!lua name=a-b\nx", "Library names can only contain letters, numbers, or underscores(_) "
                          "and must be at least one character long"),
    ("#!lua name=a\nreturn +", "Error compiling function: user_function:2: unexpected symbol "
                               "near '+'"),
    ("#!lua name=a\nreturn 1", "No functions registered"),
    ("#!lua name=a\nredis.call('ping')", "Error registering functions: ERR user_function:2: "
                                         "Script attempted to access nonexistent global "
                                         "variable 'call'"),
    ("#!lua name=a\na = 1", "Error registering functions: ERR user_function:2: Attempt to "
                            "modify a readonly table"),
    ("#!lua name=a\nredis.register_function()", "Error registering functions: ERR wrong "
                                                "number of arguments to "
                                                "redis.register_function"),
    ("#!lua name=a\nredis.register_function{function_name='f', callback=function() end, "
     "flags={'nope'}}", "Error registering functions: ERR unknown flag given"),
    ("#!lua name=a\nredis.register_function('f', function() end)\n"
     "redis.register_function('f', function() end)",
     "Error registering functions: ERR Function already exists in the library"),
])
def test_load_errors(core: ServerCore, body: str, error: str) -> None:
    c = core.connection_made()
    assert run(c, "FUNCTION", "LOAD", body) == b"-ERR " + error.encode() + b"\r\n"
    assert run(c, "FUNCTION", "LIST") == b"*0\r\n"


def test_metadata_and_names() -> None:
    assert parse_metadata(b'#!lua name="foo"\nbody') == (b"lua", b"foo", b"\nbody")
    assert valid_name(b"a_Z9") and not valid_name(b"") and not valid_name(b"a b")
    with pytest.raises(FunctionLoadError, match="Missing library metadata"):
        parse_metadata(b"x")
    assert [_je(n) for n in (1, 40, 70, 127, 129, 200)] == [8, 48, 80, 128, 160, 224]


def test_replace_failure_keeps_the_old_library_and_collisions(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "FUNCTION", "LOAD", "#!lua name=l1\nredis.register_function('f1', "
                               "function() return 1 end)")
    assert run(c, "FUNCTION", "LOAD", "REPLACE", "#!lua name=l1\nbad").startswith(
        b"-ERR Error compiling function")
    assert run(c, "FCALL", "f1", "0") == b":1\r\n"
    assert run(c, "FUNCTION", "LOAD", "#!lua name=l2\nredis.register_function('F1', "
                                      "function() return 2 end)") == \
        b"-ERR Function F1 already exists\r\n"
    assert run(c, "FUNCTION", "STATS") == (
        b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n"
        b"$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n")
    assert run(c, "FUNCTION", "FLUSH", "nope") == \
        b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n"
    assert run(c, "FUNCTION", "FLUSH", "ASYNC") == b"+OK\r\n"
    assert run(c, "FUNCTION", "LIST") == b"*0\r\n"


def test_list_reply(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function{function_name='f', "
                               "callback=function() return 1 end, "
                               "flags={'allow-oom', 'NO-WRITES'}, description='d'}")
    run(c, "HELLO", "3")
    assert run(c, "FUNCTION", "LIST", "LIBRARYNAME", "L*") == (
        b"*1\r\n%3\r\n$12\r\nlibrary_name\r\n$3\r\nlib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n"
        b"$9\r\nfunctions\r\n*1\r\n%3\r\n$4\r\nname\r\n$1\r\nf\r\n$11\r\ndescription\r\n"
        b"$1\r\nd\r\n$5\r\nflags\r\n~2\r\n+no-writes\r\n+allow-oom\r\n")
    assert run(c, "FUNCTION", "LIST", "LIBRARYNAME", "x*") == b"*0\r\n"
    assert run(c, "FUNCTION", "LIST", "x\r\ny") == b"-ERR Unknown argument x  y\r\n"
    assert run(c, "FUNCTION", "LIST", "libraryname") == \
        b"-ERR library name argument was not given\r\n"


def test_dump_restore_policies(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "FUNCTION", "LOAD", LIB)
    payload = core.scripts.functions.codes()
    dump = functions_payload(payload)
    assert run(c, "FUNCTION", "DUMP") == bulk(dump)
    assert read_functions_payload(dump) == [LIB.encode()]
    assert run(c, "FUNCTION", "RESTORE", dump) == b"-ERR Library lib already exists\r\n"
    assert run(c, "FUNCTION", "RESTORE", dump, "REPLACE") == b"+OK\r\n"
    assert run(c, "FUNCTION", "RESTORE", dump, "nope") == (
        b"-ERR Wrong restore policy given, value should be either FLUSH, APPEND or "
        b"REPLACE.\r\n")
    assert run(c, "FUNCTION", "RESTORE", b"bad") == \
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    run(c, "FUNCTION", "FLUSH")
    run(c, "FUNCTION", "LOAD", "#!lua name=other\nredis.register_function('put', "
                               "function() return 0 end)")
    assert run(c, "FUNCTION", "RESTORE", dump, "REPLACE") == \
        b"-ERR Function put already exists\r\n"
    assert run(c, "FUNCTION", "RESTORE", dump, "FLUSH") == b"+OK\r\n"
    assert run(c, "FCALL_RO", "get", "1", "nokey") == b"$-1\r\n"
    # a 7.0-rc entry (RDB_OPCODE_FUNCTION: name, engine, description, body)
    body = b"\nredis.register_function('old', function() return 3 end)"
    rc = b"\xf6\x03rcl\x03LUA\x01\x04desc" + bytes([len(body)]) + body + b"\x0a\x00"
    rc += crc64(rc).to_bytes(8, "little")
    assert read_functions_payload(rc) == [b"#!LUA name=rcl\n" + body]
    assert run(c, "FUNCTION", "RESTORE", rc) == b"+OK\r\n"
    assert run(c, "FCALL", "old", "0") == b":3\r\n"
    bad = b"\x05\x00" + b"\x0a\x00"
    with pytest.raises(PayloadError, match="given type is not a function"):
        read_functions_payload(bad + crc64(bad).to_bytes(8, "little"))
    cut = b"\xf5\x30abc" + b"\x0a\x00"
    with pytest.raises(PayloadError, match="Failed loading library payload"):
        read_functions_payload(cut + crc64(cut).to_bytes(8, "little"))


def test_rdb_carries_libraries(core: ServerCore, tmp_path) -> None:
    c = core.connection_made()
    assert rdb_libraries(core) == []
    run(c, "FUNCTION", "LOAD", LIB)
    run(c, "SET", "k", "v")
    codes = rdb_libraries(core)
    rdb = encode_rdb_bytes(core.dbs, functions=codes, now_ms=0)
    assert b"\xf5" + bytes([0x40 | (len(LIB) >> 8), len(LIB) & 0xFF]) + LIB.encode() in rdb
    path = tmp_path / "dump.rdb"
    path.write_bytes(rdb)
    loaded = load_rdb_file(str(path), 16)
    assert loaded.functions == [LIB.encode()] and loaded.functions_skipped == 1
    # a fresh core loads them (and replaces whatever it had)
    other = make_core()
    oc = other.connection_made()
    run(oc, "FUNCTION", "LOAD", "#!lua name=mine\nredis.register_function('m', "
                                "function() return 1 end)")
    install_libraries(other, prepare_libraries(other, loaded.functions))
    assert rdb_libraries(other) == [LIB.encode()]
    assert run(oc, "FCALL_RO", "get", "1", "nokey") == b"$-1\r\n"
    install_libraries(other, prepare_libraries(other, []))
    assert rdb_libraries(other) == []
    with pytest.raises(RdbError, match="Failed loading library, Library 'lib' already exists"):
        prepare_libraries(other, [LIB.encode(), LIB.encode()])
    assert FunctionSkipped(b"x", b"n", b"LUA").library_code == b"#!LUA name=n\nx"


def test_info_memory_fields(core: ServerCore) -> None:
    c = core.connection_made()

    def fields() -> dict[bytes, bytes]:
        raw = run(c, "INFO", "memory")
        return dict(line.split(b":", 1) for line in raw.split(b"\r\n") if b":" in line)

    f = fields()
    assert f[b"number_of_functions"] == b"0" and f[b"used_memory_functions"] == b"200"
    run(c, "FUNCTION", "LOAD", "#!lua name=t\nredis.register_function('f', "
                               "function() return 1 end)")
    f = fields()
    # Redis 7.0.15's figures for this library
    assert (f[b"number_of_functions"], f[b"number_of_libraries"],
            f[b"used_memory_functions"]) == (b"1", b"1", b"440")
    assert int(f[b"used_memory_vm_functions"]) > 0
    assert int(f[b"used_memory_scripts"]) == 440 + int(f[b"used_memory_scripts_eval"])


def test_busy_function_kill_and_stats(core: ServerCore) -> None:
    """A function past busy-reply-threshold: FUNCTION STATS shows it, SCRIPT KILL refuses it,
    FUNCTION KILL stops it; others get the FUNCTION KILL flavour of -BUSY."""
    step_clock(core, 10**7)
    other = core.connection_made()
    served: list[object] = []

    class Host(type(core.host)):  # type: ignore[misc]
        def process_events_while_blocked(self, protected: object) -> None:
            if not served:
                served.append(protected)
                for cmd in (b"*1\r\n$4\r\nPING\r\n", b"*2\r\n$8\r\nFUNCTION\r\n$5\r\nSTATS\r\n",
                            b"*2\r\n$6\r\nSCRIPT\r\n$4\r\nKILL\r\n",
                            b"*2\r\n$8\r\nFUNCTION\r\n$4\r\nKILL\r\n"):
                    other.receive_data(cmd)

    core.host = Host()
    run(other, "CONFIG", "SET", "busy-reply-threshold", "100")
    run(other, "FUNCTION", "LOAD", "#!lua name=spin\nredis.register_function('spin', "
                                   "function() local i = 0 while true do i = i + 1 end end)")
    other.data_to_send()
    c = core.connection_made()
    reply = run(c, "FCALL", "spin", "0")
    assert reply == (b"-ERR Script killed by user with SCRIPT KILL... script: spin, on "
                     b"@user_function:2.\r\n")
    out = other.data_to_send()
    assert out.startswith(b"-BUSY Redis is busy running a script. You can only call FUNCTION "
                          b"KILL or SHUTDOWN NOSAVE.\r\n*4\r\n$14\r\nrunning_script\r\n*6\r\n"
                          b"$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n")
    assert out.endswith(b"-BUSY Redis is busy running a script. You can only call FUNCTION "
                        b"KILL or SHUTDOWN NOSAVE.\r\n+OK\r\n")
    assert run(other, "FUNCTION", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"


def test_load_timeout(core: ServerCore) -> None:
    step_clock(core, 10**8)  # 100 ms per read: the load is over 500 ms after a few hooks
    c = core.connection_made()
    assert run(c, "FUNCTION", "LOAD", "#!lua name=t\nlocal a = 1 while 1 do a = a + 1 end") == \
        b"-ERR Error registering functions: ERR FUNCTION LOAD timeout\r\n"
    # the functions engine still works afterwards
    assert run(c, "FUNCTION", "LOAD", "#!lua name=t\nredis.register_function('f', "
                                      "function() local x = 0 for i = 1, 300000 do x = x + 1 "
                                      "end return x end)") == bulk(b"t")
    assert run(c, "FCALL", "f", "0") == b":300000\r\n"


def test_script_flush_keeps_functions(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "FUNCTION", "LOAD", LIB)
    run(c, "SCRIPT", "FLUSH")
    run(c, "FLUSHALL")
    assert run(c, "FCALL", "put", "1", "a", "b") == b":1\r\n"
    assert run(c, "EVAL", "return redis.call('get', 'a')", "0") == bulk(b"b")
