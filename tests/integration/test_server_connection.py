"""Server, connection and transaction commands through the real redis-py client, sync and
asyncio, RESP3 (redis-py 8's default) and RESP2."""

from __future__ import annotations

import asyncio
import socket

import pytest
import redis
import redis.asyncio

from tests.support.procs import start_pyrepl
from tests.support.resp import RawClient
from tests.support.waits import wait_for


def test_redis_py_default_connection_is_resp3(r) -> None:
    info = r.execute_command("CLIENT", "INFO")
    text = info if isinstance(info, str) else info.decode()
    assert "resp=3" in text
    assert r.ping() is True
    assert r.echo("hé") == "hé".encode()


def test_resp2_client(r2) -> None:
    text = r2.execute_command("CLIENT", "INFO")
    assert b"resp=2" in (text if isinstance(text, bytes) else text.encode())
    assert r2.set("a", "1") and r2.get("a") == b"1"


def test_hello_reply_shapes(pyrepl_server) -> None:
    with RawClient(pyrepl_server.port) as c:
        resp2 = c.call("HELLO")
        assert resp2.startswith(b"*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n")
        resp3 = c.call("HELLO", "3", "SETNAME", "me")
        assert resp3.startswith(b"%7\r\n") and b"$5\r\nproto\r\n:3\r\n" in resp3
        assert resp3.endswith(b"$7\r\nmodules\r\n*0\r\n")
        assert c.call("CLIENT", "GETNAME") == b"$2\r\nme\r\n"
        assert c.call("HELLO", "2", "SETNAME", "a b") == \
            b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
        assert c.call("HELLO", "3", "BOGUS") == b"-ERR Syntax error in HELLO option 'BOGUS'\r\n"


def test_inline_commands_like_telnet(pyrepl_server) -> None:
    with socket.create_connection(("127.0.0.1", pyrepl_server.port), timeout=5) as s:
        s.sendall(b"PING\r\nINFO replication\r\nECHO \"two words\"\n")
        data = b""
        while b"two words" not in data:
            chunk = s.recv(65536)
            assert chunk
            data += chunk
        assert data.startswith(b"+PONG\r\n$")
        assert b"role:master" in data and data.endswith(b"$9\r\ntwo words\r\n")


def test_transactions_with_redis_py(r) -> None:
    with r.pipeline(transaction=True) as p:
        p.set("a", "1").incr("a").get("a")
        assert p.execute() == [True, 2, b"2"]
    # optimistic locking: a concurrent change aborts the transaction
    other = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
    with r.pipeline() as p:
        p.watch("a")
        other.set("a", "changed")
        p.multi()
        p.set("a", "mine")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("a") == b"changed"
    other.close()


def test_execabort_and_errors_inside_exec(r) -> None:
    with r.pipeline(transaction=True) as p:
        p.set("s", "x").lpush("s", "y").get("s")
        res = p.execute(raise_on_error=False)
    assert res[0] is True and isinstance(res[1], redis.ResponseError)
    assert "WRONGTYPE" in str(res[1]) and res[2] == b"x"


def test_config_get_set_through_redis_py(r) -> None:
    assert r.config_get("maxclients") == {"maxclients": "10000"}
    assert r.config_set("hz", 20)
    assert r.config_get("hz")["hz"] == "20"
    with pytest.raises(redis.ResponseError, match="CONFIG SET failed"):
        r.config_set("hz", "nope")
    r.config_set("hz", 10)
    assert r.config_resetstat()


def test_info_parses_with_redis_py(r) -> None:
    r.set("k", "v")
    info = r.info()
    assert info["redis_version"] and info["role"] == "master"
    assert info["db0"]["keys"] == 1
    assert r.info("keyspace") == {"db0": {"keys": 1, "expires": 0, "avg_ttl": 0}}
    everything = r.info("everything")
    assert "used_memory" in everything and "cluster_enabled" in everything


def test_client_list_kill_and_setinfo(r) -> None:
    r.client_setname("main")
    victim = RawClient(r.connection_pool.connection_kwargs["port"])
    assert victim.call("CLIENT", "SETNAME", "victim") == b"+OK\r\n"
    assert victim.call("CLIENT", "SETINFO", "LIB-NAME", "mylib") == b"+OK\r\n"
    victim_id = int(victim.call("CLIENT", "ID")[1:-2])
    clients = {c["name"]: c for c in r.client_list()}
    assert {"main", "victim"} <= set(clients)
    assert clients["victim"]["lib-name"] == "mylib"
    assert r.client_kill_filter(_id=victim_id) == 1
    victim.sock.settimeout(5)
    assert victim.sock.recv(100) == b""  # the server closed it
    assert all(c["name"] != "victim" for c in r.client_list())
    victim.close()


def test_time_lastsave_dbsize_flush(r) -> None:
    secs, usecs = r.time()
    assert secs > 1_700_000_000 and 0 <= usecs < 1_000_000
    r.set("a", 1)
    r.execute_command("SELECT", 1)
    assert r.dbsize() == 0
    r.execute_command("SELECT", 0)
    assert r.dbsize() == 1
    assert r.flushdb() and r.dbsize() == 0


def test_command_count_and_docs_for_redis_cli(r) -> None:
    n = r.command_count()
    assert n >= 150
    with RawClient(r.connection_pool.connection_kwargs["port"]) as c:
        docs = c.call("COMMAND", "DOCS", "set")
    assert docs.startswith(b"*2\r\n$3\r\nset\r\n") and b"summary" in docs


def test_asyncio_client_pipelining_and_many_connections(pyrepl_server) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(port=pyrepl_server.port)
        await client.flushall()

        async def worker(i: int) -> None:
            for j in range(50):
                await client.incr(f"ctr:{i % 5}")
                await client.rpush("log", f"{i}:{j}")

        await asyncio.gather(*(worker(i) for i in range(20)))
        total = sum([int(await client.get(f"ctr:{i}")) for i in range(5)])
        assert total == 1000 and await client.llen("log") == 1000
        async with client.pipeline(transaction=False) as p:
            for i in range(1000):
                p.set(f"p:{i}", i)
            assert all(await p.execute())
        assert await client.dbsize() == 1006
        await client.aclose()

    asyncio.run(main())


@pytest.mark.slow
def test_requirepass_with_redis_py(tmp_path) -> None:
    srv = start_pyrepl("--requirepass", "s3cret", tmpdir=str(tmp_path))
    try:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=srv.port).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=srv.port, password="wrong").ping()
        assert redis.Redis(port=srv.port, password="s3cret").ping()
        assert redis.Redis(port=srv.port, password="s3cret", protocol=2).ping()
        assert redis.Redis(port=srv.port, username="default", password="s3cret").ping()
    finally:
        srv.stop()


@pytest.mark.slow
def test_maxclients_and_query_buffer_limit_close_only_that_connection(tmp_path) -> None:
    srv = start_pyrepl("--maxclients", "3", "--client-query-buffer-limit", "1mb",
                       tmpdir=str(tmp_path))
    try:
        keep = [RawClient(srv.port) for _ in range(3)]
        for k in keep:
            assert k.call("PING") == b"+PONG\r\n"
        extra = RawClient(srv.port)
        assert extra.read_reply() == b"-ERR max number of clients reached\r\n"
        extra.close()
        # a client that sends an unterminated 2 MB argument is closed; the others are fine
        big = keep.pop()
        big.send_raw(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n" + b"x" * 2_000_000)

        def closed() -> bool:
            try:
                big.sock.settimeout(0.2)
                return big.sock.recv(1024) == b""
            except TimeoutError:
                return False
            except OSError:
                return True

        wait_for(closed, 10, what="the oversized client to be closed")
        for k in keep:
            assert k.call("PING") == b"+PONG\r\n"
        stats = redis.Redis(port=srv.port).info("stats")
        assert stats["rejected_connections"] == 1
        for k in keep:
            k.close()
    finally:
        srv.stop()
