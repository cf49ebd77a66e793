"""Sans-io tests of the server core: bytes in, bytes out, a fake clock, no sockets."""

from __future__ import annotations

from collections import deque

import pytest

import pyrepl.commands  # noqa: F401
from pyrepl.core.server import ServerCore
from tests.support.cores import make_core, run
from tests.support.resp import encode_command as cmd


@pytest.fixture
def core() -> ServerCore:
    return make_core()


def test_ping_echo_inline_and_pipelined(core: ServerCore) -> None:
    c = core.connection_made("127.0.0.1:1", "127.0.0.1:6379")
    assert run(c, "PING") == b"+PONG\r\n"
    c.receive_data(b"PING\r\nECHO hello\r\n" + cmd("PING", "x"))
    assert c.data_to_send() == b"+PONG\r\n$5\r\nhello\r\n$1\r\nx\r\n"
    # a command split across reads
    data = cmd("ECHO", "split")
    for i in range(len(data)):
        c.receive_data(data[i:i + 1])
    assert c.data_to_send() == b"$5\r\nsplit\r\n"


def test_unknown_command_and_arity_errors_are_redis_texts(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "NOPE", "a", "b") == \
        b"-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n"
    assert run(c, "ECHO") == b"-ERR wrong number of arguments for 'echo' command\r\n"
    assert run(c, "CONFIG") == b"-ERR wrong number of arguments for 'config' command\r\n"
    assert run(c, "CONFIG", "NOPE") == b"-ERR unknown subcommand 'NOPE'. Try CONFIG HELP.\r\n"
    assert run(c, "CONFIG", "GET") == b"-ERR wrong number of arguments for 'config|get' command\r\n"


def test_hello_switches_protocol_per_connection(core: ServerCore) -> None:
    a = core.connection_made()
    b = core.connection_made()
    reply = run(a, "HELLO", "3")
    assert reply.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n")
    assert b"$5\r\nproto\r\n:3\r\n" in reply
    assert run(a, "DEBUG", "DIGEST-VALUE", "missing").startswith(b"*1\r\n")
    # RESP3 null vs RESP2 null on the same missing key
    assert run(a, "CLIENT", "GETNAME") == b"_\r\n"
    assert run(b, "CLIENT", "GETNAME") == b"$-1\r\n"
    assert run(a, "HELLO", "4") == b"-NOPROTO unsupported protocol version\r\n"
    assert run(a, "HELLO", "x") == \
        b"-ERR Protocol version is not an integer or out of range\r\n"


def test_requirepass_gates_commands_until_auth() -> None:
    core = make_core(("requirepass", ["s3cret"]))
    c = core.connection_made()
    assert run(c, "PING") == b"-NOAUTH Authentication required.\r\n"
    assert run(c, "AUTH", "wrong") == \
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    assert run(c, "HELLO", "3").startswith(b"-NOAUTH HELLO must be called")
    assert run(c, "AUTH", "default", "s3cret") == b"+OK\r\n"
    assert run(c, "PING") == b"+PONG\r\n"
    d = core.connection_made()
    assert run(d, "HELLO", "3", "AUTH", "default", "s3cret").startswith(b"%7\r\n")


def test_select_and_db_isolation(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "SELECT", "16") == b"-ERR DB index is out of range\r\n"
    assert run(c, "SELECT", "x") == b"-ERR value is not an integer or out of range\r\n"
    assert run(c, "SELECT", "3") == b"+OK\r\n"
    core.dbs[3].set(b"k", b"v")
    assert run(c, "DBSIZE") == b":1\r\n"
    assert run(c, "SELECT", "0") == b"+OK\r\n"
    assert run(c, "DBSIZE") == b":0\r\n"


def test_multi_exec_queues_and_execabort(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "MULTI") == b"+OK\r\n"
    assert run(c, "PING") == b"+QUEUED\r\n"
    assert run(c, "ECHO", "x") == b"+QUEUED\r\n"
    assert run(c, "MULTI") == b"-ERR MULTI calls can not be nested\r\n"
    assert run(c, "EXEC") == b"*2\r\n+PONG\r\n$1\r\nx\r\n"
    assert run(c, "EXEC") == b"-ERR EXEC without MULTI\r\n"
    run(c, "MULTI")
    assert run(c, "ECHO") == b"-ERR wrong number of arguments for 'echo' command\r\n"
    assert run(c, "EXEC") == \
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    assert run(c, "DISCARD") == b"-ERR DISCARD without MULTI\r\n"


def test_watch_aborts_exec_when_key_touched(core: ServerCore) -> None:
    a = core.connection_made()
    b = core.connection_made()
    assert run(a, "WATCH", "k") == b"+OK\r\n"
    run(a, "MULTI")
    run(a, "PING")
    core.dbs[0].set(b"k", b"changed")  # another client's write touches k
    assert run(a, "EXEC") == b"*-1\r\n"
    # after EXEC the watch is gone
    run(a, "MULTI")
    core.dbs[0].set(b"k", b"again")
    assert run(a, "EXEC") == b"*0\r\n"
    # FLUSHALL touches watched keys that existed
    run(a, "WATCH", "k")
    run(b, "FLUSHALL")
    run(a, "MULTI")
    assert run(a, "EXEC") == b"*-1\r\n"
    assert run(a, "MULTI") == b"+OK\r\n"
    assert run(a, "WATCH", "x") == b"-ERR WATCH inside MULTI is not allowed\r\n"


def test_watched_key_expiring_aborts_exec(core: ServerCore) -> None:
    db = core.dbs[0]
    db.set(b"k", b"v")
    db.set_expire(b"k", core.now_ms + 1000)
    a = core.connection_made()
    run(a, "WATCH", "k")
    run(a, "MULTI")
    core.now_ms += 2000
    assert run(a, "EXEC") == b"*-1\r\n"


def test_lazy_expiry_deletes_and_propagates_del(core: ServerCore) -> None:
    fed: list[tuple[int, list[bytes]]] = []
    core.repl_feed = lambda db, argv, data=None: fed.append((db, argv))
    core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
    db = core.dbs[0]
    db.set(b"k", b"v")
    db.set_expire(b"k", core.now_ms + 10)
    assert db.lookup(b"k") == b"v"
    core.now_ms += 11
    assert db.lookup(b"k") is None
    assert b"k" not in db.data and b"k" not in db.expires
    assert fed == [(0, [b"DEL", b"k"])]
    assert core.stats.expired_keys == 1


def test_replica_mode_hides_but_keeps_expired_keys(core: ServerCore) -> None:
    core.expiry_deletes = False
    db = core.dbs[0]
    core.applying_master_stream = True     # the TTL comes from the master's stream
    db.set(b"k", b"v")
    db.set_expire(b"k", core.now_ms + 10)
    core.applying_master_stream = False
    core.now_ms += 11
    assert db.lookup(b"k") is None
    assert b"k" in db.data  # only the master's DEL removes it
    core.tick(core.now_ms)
    assert b"k" in db.data


def test_writable_replica_expires_its_clients_keys(core: ServerCore) -> None:
    core.expiry_deletes = False
    for i in (0, 2):
        db = core.dbs[i]
        db.set(b"mine", b"v")
        db.set_expire(b"mine", core.now_ms + 10 * (i + 1))     # db 0: +10, db 2: +30
    core.dbs[0].set(b"kept", b"v")
    core.dbs[0].set_expire(b"kept", core.now_ms + 1000)
    assert core.replica_keys_with_expire == {b"mine": 0b101, b"kept": 0b1}
    core.now_ms += 20
    core.tick(core.now_ms)
    assert b"mine" not in core.dbs[0].data and b"mine" in core.dbs[2].data
    assert core.replica_keys_with_expire == {b"mine": 0b100, b"kept": 0b1}
    core.dbs[0].persist(b"kept")     # no TTL any more: no longer tracked after the next pass
    core.now_ms += 20
    core.tick(core.now_ms)
    assert core.replica_keys_with_expire == {}
    assert b"mine" not in core.dbs[2].data and b"kept" in core.dbs[0].data
    assert core.stats.expired_keys == 2
    assert not core._pending           # a replica propagates none of it


def test_active_expiry_cycle_removes_keys_without_access(core: ServerCore) -> None:
    db = core.dbs[1]
    for i in range(1000):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, core.now_ms + (10 if i % 2 else 10_000_000))
    core.now_ms += 100
    for _ in range(20):
        core.tick(core.now_ms)
    assert len(db.data) == 500
    assert all(int(k[1:]) % 2 == 0 for k in db.data)
    assert core.stats.expired_keys == 500


def test_write_propagation_and_multi_wrapping(core: ServerCore) -> None:
    fed: list[tuple[int, list[bytes]]] = []
    core.repl_feed = lambda db, argv, data=None: fed.append((db, argv))
    core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
    c = core.connection_made()
    run(c, "SWAPDB", "0", "1")
    assert fed == [(0, [b"SWAPDB", b"0", b"1"])]
    fed.clear()
    run(c, "MULTI")
    run(c, "SWAPDB", "0", "1")
    run(c, "PING")
    run(c, "FLUSHDB")
    assert fed == []  # nothing leaves before EXEC
    run(c, "EXEC")
    assert [argv[0] for _, argv in fed] == [b"MULTI", b"SWAPDB", b"FLUSHDB", b"EXEC"]
    fed.clear()
    run(c, "PING")
    run(c, "DBSIZE")
    assert fed == []  # reads are not propagated


def test_maxclients_refuses_with_redis_error() -> None:
    core = make_core(("maxclients", ["2"]))
    a = core.connection_made()
    b = core.connection_made()
    c = core.connection_made()
    assert c.data_to_send() == b"-ERR max number of clients reached\r\n"
    assert c.close_after_reply
    assert run(a, "PING") == b"+PONG\r\n" and run(b, "PING") == b"+PONG\r\n"
    assert core.stats.rejected_connections == 1


def test_protocol_error_closes_only_that_connection(core: ServerCore) -> None:
    a = core.connection_made()
    b = core.connection_made()
    a.receive_data(b"*1\r\n+PING\r\n")
    assert a.data_to_send() == b"-ERR Protocol error: expected '$', got '+'\r\n"
    assert a.close_after_reply
    assert run(b, "PING") == b"+PONG\r\n"


def test_proto_max_bulk_len_is_enforced() -> None:
    core = make_core(("proto-max-bulk-len", ["1mb"]))
    c = core.connection_made()
    c.receive_data(b"*2\r\n$4\r\nECHO\r\n$2000000\r\n")
    assert c.data_to_send() == b"-ERR Protocol error: invalid bulk length\r\n"
    assert c.close_after_reply


def test_debug_populate_matches_redis_format(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "DEBUG", "POPULATE", "3", "key", "10") == b"+OK\r\n"
    assert core.dbs[0].data[b"key:2"] == b"value:2\x00\x00\x00"
    run(c, "DEBUG", "POPULATE", "2", "p")
    assert core.dbs[0].data[b"p:1"] == b"value:1"
    assert run(c, "DBSIZE") == b":5\r\n"


def test_client_commands(core: ServerCore) -> None:
    c = core.connection_made("127.0.0.1:5000", "127.0.0.1:6379")
    other = core.connection_made("127.0.0.1:5001", "127.0.0.1:6379")
    assert run(c, "CLIENT", "ID") == b":%d\r\n" % c.id
    assert run(c, "CLIENT", "SETNAME", "bad name") == \
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
    assert run(c, "CLIENT", "SETNAME", "app") == b"+OK\r\n"
    assert run(c, "CLIENT", "GETNAME") == b"$3\r\napp\r\n"
    assert run(c, "CLIENT", "SETINFO", "LIB-NAME", "redis-py") == b"+OK\r\n"
    listing = run(c, "CLIENT", "LIST")
    assert b"name=app" in listing and b"lib-name=redis-py" in listing
    assert b"addr=127.0.0.1:5001" in listing
    assert run(c, "CLIENT", "KILL", "127.0.0.1:9") == b"-ERR No such client\r\n"
    assert run(c, "CLIENT", "KILL", "ID", str(other.id)) == b":1\r\n"
    assert other.close_after_reply


def test_info_sections_have_redis_field_names(core: ServerCore) -> None:
    c = core.connection_made()
    core.dbs[0].set(b"a", b"1")
    text = run(c, "INFO").decode()
    for field in ("redis_version:", "pyrepl_version:", "connected_clients:", "used_memory:",
                  "rdb_changes_since_last_save:", "total_commands_processed:", "role:master",
                  "master_replid:", "master_repl_offset:", "cluster_enabled:0",
                  "db0:keys=1,expires=0,avg_ttl=0"):
        assert field in text, field
    repl = run(c, "INFO", "replication").decode()
    assert "# Replication" in repl and "# Server" not in repl


def test_command_count_info_docs(core: ServerCore) -> None:
    c = core.connection_made()
    n = int(run(c, "COMMAND", "COUNT")[1:-2])
    assert n > 20
    info = run(c, "COMMAND", "INFO", "ping", "nope")
    assert info.startswith(b"*2\r\n*10\r\n$4\r\nping\r\n:-1\r\n") and info.endswith(b"$-1\r\n")
    docs = run(c, "COMMAND", "DOCS", "echo")
    assert b"summary" in docs and b"connection" in docs
    assert run(c, "COMMAND", "GETKEYS", "WATCH", "a", "b") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"


def test_values_are_plain_python_types(core: ServerCore) -> None:
    # The RDB and digest code rely on these representations.
    db = core.dbs[0]
    db.set(b"l", deque([b"a"]))
    assert db.lookup_typed(b"l", deque) == deque([b"a"])


# -- protected actions: enable-debug-command / enable-protected-configs -----------------------

DEBUG_REFUSED = (b'-ERR DEBUG command not allowed. If the enable-debug-command option is set to '
                 b'"local", you can run it from a local connection, otherwise you need to set '
                 b'this option in the configuration file, and then restart the server.\r\n')


@pytest.mark.parametrize(("setting", "addr", "unix", "allowed"), [
    ("no", "127.0.0.1:5000", False, False),
    ("no", "/tmp/p.sock:0", True, False),
    ("yes", "10.1.2.3:5000", False, True),
    ("local", "127.0.0.1:5000", False, True),
    ("local", "::1:5000", False, True),
    ("local", "/tmp/p.sock:0", True, True),
    ("local", "10.1.2.3:5000", False, False),
    ("local", "127.0.0.2:5000", False, False),     # Redis: exactly 127.0.0.1 or ::1
])
def test_debug_is_a_protected_command(setting: str, addr: str, unix: bool,
                                      allowed: bool) -> None:
    # (protected-mode off: a connection from outside the loopback interface is let in)
    core = make_core(("enable-debug-command", [setting]), ("protected-mode", ["no"]))
    c = core.connection_made(addr, "127.0.0.1:6379", 9, unix_socket=unix)
    reply = run(c, "DEBUG", "SLEEP", "0")
    assert reply == (b"+OK\r\n" if allowed else DEBUG_REFUSED)
    # arity is checked first, as Redis does; the refusal counts as an error reply
    assert run(c, "DEBUG").startswith(b"-ERR wrong number of arguments for 'debug' command")
    # queued in MULTI: refused at queue time, and EXEC then aborts
    run(c, "MULTI")
    queued = run(c, "DEBUG", "SLEEP", "0")
    assert queued == (b"+QUEUED\r\n" if allowed else DEBUG_REFUSED)
    assert run(c, "EXEC").startswith(b"*1" if allowed else b"-EXECABORT")


@pytest.mark.parametrize(("setting", "addr", "allowed"), [
    ("no", "127.0.0.1:5000", False), ("yes", "10.1.2.3:5000", True),
    ("local", "127.0.0.1:5000", True), ("local", "10.1.2.3:5000", False)])
def test_protected_configs_follow_enable_protected_configs(tmp_path: object, setting: str, addr: str,
                                                           allowed: bool) -> None:
    core = make_core(("enable-protected-configs", [setting]), ("protected-mode", ["no"]))
    c = core.connection_made(addr, "127.0.0.1:6379", 9)
    reply = run(c, "CONFIG", "SET", "dir", str(tmp_path))
    if allowed:
        assert reply == b"+OK\r\n" and core.config.dir == str(tmp_path)
        assert run(c, "CONFIG", "SET", "dbfilename", "other.rdb") == b"+OK\r\n"
    else:
        assert reply == (b"-ERR CONFIG SET failed (possibly related to argument 'dir') - can't "
                         b"set protected config\r\n")
    # immutable stays immutable whatever enable-protected-configs says
    assert run(c, "CONFIG", "SET", "daemonize", "yes") == (
        b"-ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set "
        b"immutable config\r\n")


def test_fields_beyond_redis_7_are_fields_pyrepl_shows(core: ServerCore) -> None:
    """The names the interop tests leave out of their comparisons with 7.0.15 (BEYOND_REDIS_7)
    are all INFO fields of a master or a replica: the list cannot hide a typo or a field that
    went."""
    from pyrepl.core.info import BEYOND_REDIS_7
    from tests.support.replica_side import synced_node

    def names(text: str) -> set[str]:
        return {ln.split(":")[0] for ln in text.split("\r\n") if ":" in ln}

    shown = names(run(core.connection_made(), "INFO", "everything").decode())
    replica = synced_node()
    shown |= names(run(replica.core.connection_made(), "INFO", "everything").decode())
    assert BEYOND_REDIS_7 <= shown, BEYOND_REDIS_7 - shown
