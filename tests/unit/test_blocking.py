"""The blocking mechanism (pyrepl.core.blocking) driven through the sans-io core with a fake clock.

Clients are ``ServerCore.connection_made`` clients fed RESP bytes; time only moves through
``core.tick(now)``, so deadlines are exact: a blocked client times out at the first cron tick
after its deadline (``deadline < now``), never before.
"""

from __future__ import annotations

import pytest

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.config import Config
from pyrepl.core.blocking import parse_timeout
from pyrepl.core.server import ServerCore
from pyrepl.resp.types import ReplyError
from tests.support.resp import encode_command

T0 = 1_000_000


@pytest.fixture
def core() -> ServerCore:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=T0)
    core.fed = []  # type: ignore[attr-defined]
    core.repl_feed = lambda db, argv, data=None: core.fed.append([bytes(a) for a in argv])  # type: ignore
    core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
    return core


def send(c, *argv: str) -> bytes:
    c.receive_data(encode_command(*argv))
    return c.data_to_send()


def info_field(core: ServerCore, field: str) -> str:
    c = core.connection_made()
    text = send(c, "INFO", "clients").decode()
    core.client_closed(c)
    return next(line.split(":", 1)[1] for line in text.split("\r\n")
                if line.startswith(field + ":"))


# -- timeouts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arg,ms", [
    (b"0", 0), (b"1", 1000), (b"0.001", 1), (b"0.0001", 1), (b"1.0005", 1001), (b"-0.0001", 0),
    (b"1e-300", 1), (b"0x10", 16000), (b"9223372036854775.807", 9223372036854775807),
])
def test_parse_timeout(arg, ms):
    got = parse_timeout(arg, 0)
    assert got == ms


@pytest.mark.parametrize("arg,err", [
    (b"x", "ERR timeout is not a float or out of range"), (b"", "ERR timeout is not a float or "
                                                               "out of range"),
    (b" 1", "ERR timeout is not a float or out of range"),
    (b"nan", "ERR timeout is not a float or out of range"),
    (b"-1", "ERR timeout is negative"), (b"inf", "ERR timeout is negative"),
    (b"1e300", "ERR timeout is negative"), (b"9223372036854775.808", "ERR timeout is negative"),
])
def test_parse_timeout_errors(arg, err):
    with pytest.raises(ReplyError) as e:
        parse_timeout(arg, 0)
    assert str(e.value) == err


def test_deadline_wraps_like_a_long_long():
    """A huge timeout plus now overflows (as in Redis): a negative deadline, due at once."""
    assert parse_timeout(b"9223372036854775", 10_000) < 0


def test_timeout_fires_at_the_first_tick_after_the_deadline(core):
    a = core.connection_made()
    b = core.connection_made()
    send(b, "HELLO", "3")
    assert send(a, "BLPOP", "k", "0.5") == b""
    assert send(b, "BZMPOP", "0.25", "1", "z", "MIN") == b""
    core.tick(T0 + 250)
    assert b.data_to_send() == b""          # deadline == now: not yet
    core.tick(T0 + 251)
    assert b.data_to_send() == b"_\r\n"     # RESP3 null
    core.tick(T0 + 500)
    assert a.data_to_send() == b""
    core.tick(T0 + 501)
    assert a.data_to_send() == b"*-1\r\n"   # RESP2 null array
    assert core.fed == []                   # a timeout propagates nothing
    assert info_field(core, "blocked_clients") == "0"


def test_zero_timeout_blocks_forever_and_idle_timeout_spares_blocked_clients(core):
    core.config.set("timeout", "1")
    a = core.connection_made()
    send(a, "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
    for i in range(1, 40):
        core.tick(T0 + i * 1000)
    assert a.blocked is not None and not a.close_after_reply
    assert send(core.connection_made(), "RPUSH", "k", "v") == b":1\r\n"
    assert a.data_to_send() == b"$1\r\nv\r\n"


# -- serving ----------------------------------------------------------------------------------

def test_fifo_order_and_propagation_after_the_push(core):
    a, b, c = (core.connection_made() for _ in range(3))
    send(a, "BLPOP", "k", "0")
    send(b, "BRPOP", "other", "k", "0")
    send(c, "BLMPOP", "0", "1", "k", "LEFT", "COUNT", "5")
    assert info_field(core, "blocked_clients") == "3"
    assert send(core.connection_made(), "RPUSH", "k", "1", "2", "3", "4") == b":4\r\n"
    assert a.data_to_send() == b"*2\r\n$1\r\nk\r\n$1\r\n1\r\n"
    assert b.data_to_send() == b"*2\r\n$1\r\nk\r\n$1\r\n4\r\n"
    assert c.data_to_send() == b"*2\r\n$1\r\nk\r\n*2\r\n$1\r\n2\r\n$1\r\n3\r\n"
    assert core.fed == [[b"RPUSH", b"k", b"1", b"2", b"3", b"4"], [b"LPOP", b"k"],
                        [b"RPOP", b"k"], [b"LPOP", b"k", b"2"]]
    assert "k" not in core.dbs[0].data and not core.keys_waited


def test_exec_serves_keys_in_the_order_they_became_ready(core):
    a, b = core.connection_made(), core.connection_made()
    send(a, "BLPOP", "k1", "k2", "0")
    send(b, "BLPOP", "k1", "0")
    p = core.connection_made()
    for argv in (("MULTI",), ("RPUSH", "k2", "x"), ("RPUSH", "k1", "y"), ("LPOP", "k1"),
                 ("RPUSH", "k1", "z")):
        send(p, *argv)
    assert a.data_to_send() == b""
    send(p, "EXEC")
    assert a.data_to_send() == b"*2\r\n$2\r\nk2\r\n$1\r\nx\r\n"
    assert b.data_to_send() == b"*2\r\n$2\r\nk1\r\n$1\r\nz\r\n"
    assert core.fed[-2:] == [[b"LPOP", b"k2"], [b"LPOP", b"k1"]]


def test_blmove_chain_and_its_propagation(core):
    a, b, c = (core.connection_made() for _ in range(3))
    send(a, "BLMOVE", "a", "b", "LEFT", "RIGHT", "0")
    send(b, "BRPOPLPUSH", "b", "c", "0")
    send(c, "BZPOPMIN", "c", "BLPOPc", "0")
    send(core.connection_made(), "RPUSH", "c", "list")   # c is a list: the zset waiter stays
    assert c.data_to_send() == b"" and c.blocked is not None
    send(core.connection_made(), "DEL", "c")
    core.fed.clear()
    send(core.connection_made(), "LPUSH", "a", "v")
    assert a.data_to_send() == b"$1\r\nv\r\n"
    assert b.data_to_send() == b"$1\r\nv\r\n"
    assert core.fed == [[b"LPUSH", b"a", b"v"], [b"LMOVE", b"a", b"b", b"left", b"right"],
                        [b"RPOPLPUSH", b"b", b"c"]]
    assert list(core.dbs[0].data[b"c"]) == [b"v"] and c.blocked is not None


def test_blmove_to_a_wrong_type_destination_answers_wrongtype(core):
    a, b = core.connection_made(), core.connection_made()
    send(core.connection_made(), "SET", "d", "s")
    send(a, "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
    send(b, "BLPOP", "k", "0")
    send(core.connection_made(), "RPUSH", "k", "v")
    assert a.data_to_send().startswith(b"-WRONGTYPE")
    assert b.data_to_send() == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n"


def test_pipelined_commands_run_after_the_unblock(core):
    a = core.connection_made()
    a.receive_data(encode_command("BLPOP", "k", "0") + encode_command("PING"))
    assert a.data_to_send() == b""
    send(core.connection_made(), "LPUSH", "k", "v")
    assert a.data_to_send() == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n+PONG\r\n"


def test_multi_does_not_block(core):
    a = core.connection_made()
    for argv in (("MULTI",), ("BLPOP", "k", "0"), ("BLMOVE", "k", "d", "LEFT", "LEFT", "0"),
                 ("BZMPOP", "0", "1", "z", "MIN")):
        send(a, *argv)
    assert send(a, "EXEC") == b"*3\r\n*-1\r\n$-1\r\n*-1\r\n"
    assert a.blocked is None and not core.blocking.clients


def test_swapdb_and_move_make_keys_ready(core):
    a = core.connection_made()
    send(a, "BZPOPMAX", "z", "0")
    p = core.connection_made()
    send(p, "SELECT", "1")
    send(p, "ZADD", "z", "1", "m")
    send(p, "SWAPDB", "0", "1")
    assert a.data_to_send() == b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n"


# -- CLIENT UNBLOCK, disconnects, role change -------------------------------------------------

def test_client_unblock(core):
    a = core.connection_made()
    p = core.connection_made()
    send(a, "BLPOP", "k", "0")
    assert b"flags=b " in send(p, "CLIENT", "LIST")
    assert send(p, "CLIENT", "UNBLOCK", str(a.id)) == b":1\r\n"
    assert a.data_to_send() == b"*-1\r\n"
    send(a, "BLPOP", "k", "0")
    assert send(p, "CLIENT", "UNBLOCK", str(a.id), "ERROR") == b":1\r\n"
    assert a.data_to_send() == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    assert send(p, "CLIENT", "UNBLOCK", str(a.id)) == b":0\r\n"
    assert core.errorstats.get("UNBLOCKED") == 1
    assert [st.failed for cmd, st in core.cmdstats.items() if cmd.name == "blpop"] == [2]
    assert send(p, "CLIENT", "UNBLOCK", "1", "x") == \
        b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"


def test_disconnect_while_blocked(core):
    a, b = core.connection_made(), core.connection_made()
    send(a, "BLPOP", "k", "0")
    send(b, "BLPOP", "k", "0")
    core.client_closed(a)
    assert info_field(core, "blocked_clients") == "1"
    send(core.connection_made(), "RPUSH", "k", "v")
    assert b.data_to_send() == b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    assert a.data_to_send() == b""
    core.client_closed(b)
    assert not core.keys_waited and not core.blocking.waiters


def test_turning_replica_unblocks_everyone(core):
    a = core.connection_made()
    send(a, "BZPOPMIN", "z", "0")
    core.tick(T0 + 100)
    assert a.blocked is not None
    core.expiry_deletes = False          # what the replication layer does on REPLICAOF, and
    core.blocking.disconnect_all()       # disconnectAllBlockedClients (replicationSetMaster)
    assert a.data_to_send() == (b"-UNBLOCKED force unblock from blocking operation, instance "
                                b"state changed (master -> replica?)\r\n")
    assert a.close_after_reply and a.blocked is None
    b = core.connection_made()           # a client blocking on the (writable) replica later
    send(b, "BLPOP", "k", "0")
    core.tick(T0 + 300)
    assert b.blocked is not None
