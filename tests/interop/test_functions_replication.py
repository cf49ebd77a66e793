"""Function libraries across replication with a real redis-server 7.0.15, both ways.

A Redis master's libraries reach a pyrepl replica in the full sync's RDB (its
``RDB_OPCODE_FUNCTION2`` entries) and then through the stream (FUNCTION LOAD / DELETE / FLUSH /
RESTORE as Redis propagates them); FCALL runs on the replica, a function's writes on the
master arrive as effects. The other way, pyrepl's RDB carries its libraries so that a real
replica loads them, and its stream carries the FUNCTION commands. Both sides end with equal
``FUNCTION LIST WITHCODE`` and equal DEBUG DIGESTs. A pyrepl master's libraries also survive
SAVE and a restart.
"""

from __future__ import annotations

import pytest
import redis

from tests.support.lua import LIB
from tests.support.procs import start_pyrepl, start_redis
from tests.support.realpair import digest, wait_in_sync
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

LIB2 = ("#!lua name=lib2\n"
        "redis.register_function{function_name='hello', callback=function() return 'hello' end, "
        "flags={'no-writes'}}")


def listing(r: redis.Redis) -> list:
    """FUNCTION LIST WITHCODE with each library's functions in name order."""
    out = []
    for lib in r.execute_command("FUNCTION", "LIST", "WITHCODE"):
        d = dict(zip(lib[0::2], lib[1::2], strict=True)) if isinstance(lib, list) else dict(lib)
        fns = d[b"functions"]
        d[b"functions"] = sorted(
            (sorted((dict(zip(f[0::2], f[1::2], strict=True)) if isinstance(f, list)
                     else dict(f)).items(), key=repr) for f in fns), key=repr)
        out.append(sorted(d.items(), key=repr))
    return sorted(out, key=repr)


def same_functions(m: redis.Redis, rep: redis.Redis) -> None:
    wait_for(lambda: listing(rep) == listing(m), 20, what="the replica's libraries")


def stream_writes_then_load(m: redis.Redis, rep: redis.Redis) -> None:
    """Five FCALLs that write (propagated as their effects), then FUNCTION LOAD of LIB2: the
    replica follows and can call the new library."""
    for i in range(5):
        m.execute_command("FCALL", "put", "1", f"k{i}", str(i))
    m.execute_command("FUNCTION", "LOAD", LIB2)
    wait_in_sync(m, rep)
    same_functions(m, rep)
    assert rep.execute_command("FCALL", "hello", "0") == b"hello"


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_pyrepl_replica_of_a_redis_master_with_libraries(tmp_path, diskless: str) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "r").mkdir()
    master = start_redis("--enable-debug-command", "yes", "--repl-diskless-sync", diskless,
                         "--repl-diskless-sync-delay", "0", tmpdir=str(tmp_path / "m"))
    try:
        m = redis.Redis(port=master.port, protocol=2)
        m.execute_command("FUNCTION", "LOAD", LIB)
        m.execute_command("FCALL", "put", "1", "before", "1")
        replica = start_pyrepl("--master", f"127.0.0.1:{master.port}", role="replica",
                               tmpdir=str(tmp_path / "r"))
        try:
            rep = redis.Redis(port=replica.port, protocol=2)
            wait_in_sync(m, rep)
            # the library came with the RDB
            assert listing(rep) == listing(m) and len(listing(m)) == 1
            assert rep.execute_command("FCALL_RO", "get", "1", "before") == b"1"
            assert rep.execute_command("FCALL", "get", "1", "before") == b"1"
            with pytest.raises(redis.ResponseError, match="read only replica"):
                rep.execute_command("FCALL", "put", "1", "x", "y")
            with pytest.raises(redis.ResponseError, match="read only replica"):
                rep.execute_command("FUNCTION", "LOAD", LIB2)
            # the stream: a function's writes (effects), then the FUNCTION commands
            stream_writes_then_load(m, rep)
            assert rep.get("k4") == b"4" and rep.get("calls") == b"6"
            payload = m.execute_command("FUNCTION", "DUMP")
            m.execute_command("FUNCTION", "DELETE", "lib")
            wait_in_sync(m, rep)
            same_functions(m, rep)
            assert len(listing(rep)) == 1
            m.execute_command("FUNCTION", "RESTORE", payload, "REPLACE")
            wait_in_sync(m, rep)
            same_functions(m, rep)
            assert len(listing(rep)) == 2
            assert digest(m) == digest(rep)
            m.execute_command("FUNCTION", "FLUSH")
            wait_in_sync(m, rep)
            assert listing(rep) == []
            # a new full sync replaces the replica's libraries with the master's
            m.execute_command("FUNCTION", "LOAD", LIB2)
            rep.execute_command("REPLICAOF", "NO", "ONE")
            rep.execute_command("FUNCTION", "LOAD", LIB)
            rep.execute_command("REPLICAOF", "127.0.0.1", str(master.port))
            wait_in_sync(m, rep)
            same_functions(m, rep)
            assert [dict(zip(x[0::2], x[1::2], strict=True))[b"library_name"]
                    for x in rep.execute_command("FUNCTION", "LIST")] == [b"lib2"]
            assert digest(m) == digest(rep)
        finally:
            replica.stop()
    finally:
        master.stop()


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_redis_replica_of_a_pyrepl_master_with_libraries(tmp_path, diskless: str) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "r").mkdir()
    master = start_pyrepl("--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0",
                          tmpdir=str(tmp_path / "m"))
    try:
        m = redis.Redis(port=master.port, protocol=2)
        assert m.execute_command("FUNCTION", "LOAD", LIB) == b"lib"
        m.execute_command("FCALL", "put", "1", "before", "1")
        replica = start_redis("--replicaof", "127.0.0.1", str(master.port),
                              "--enable-debug-command", "yes", tmpdir=str(tmp_path / "r"))
        try:
            rep = redis.Redis(port=replica.port, protocol=2)
            wait_in_sync(m, rep)
            assert listing(rep) == listing(m) and len(listing(m)) == 1   # from the RDB
            assert rep.execute_command("FCALL_RO", "get", "1", "before") == b"1"
            stream_writes_then_load(m, rep)
            payload = m.execute_command("FUNCTION", "DUMP")
            m.execute_command("FUNCTION", "FLUSH")
            wait_in_sync(m, rep)
            assert listing(rep) == []
            m.execute_command("FUNCTION", "RESTORE", payload)
            m.execute_command("FUNCTION", "DELETE", "lib2")
            wait_in_sync(m, rep)
            same_functions(m, rep)
            assert len(listing(rep)) == 1
            assert digest(m) == digest(rep)
        finally:
            replica.stop()
    finally:
        master.stop()


def test_pyrepl_libraries_survive_save_and_restart(tmp_path) -> None:
    d = tmp_path / "p"
    d.mkdir()
    srv = start_pyrepl(tmpdir=str(d))
    port = srv.port
    try:
        r = redis.Redis(port=port, protocol=2)
        r.execute_command("FUNCTION", "LOAD", LIB)
        r.execute_command("FUNCTION", "LOAD", LIB2)
        r.execute_command("FCALL", "put", "1", "k", "v")
        before = listing(r)
        assert r.save()
        r.close()
    finally:
        srv.stop()
    # a real Redis loads the file pyrepl wrote, libraries included
    with start_redis("--dbfilename", "dump.rdb", tmpdir=str(d)) as real:
        rr = redis.Redis(port=real.port, protocol=2)
        assert listing(rr) == before
        assert rr.execute_command("FCALL", "get", "1", "k") == b"v"
        rr.execute_command("FUNCTION", "DELETE", "lib2")
        assert rr.save()
        after_redis = listing(rr)
    # and pyrepl loads the file Redis wrote
    with start_pyrepl(tmpdir=str(d), port=port) as srv:
        r = redis.Redis(port=srv.port, protocol=2)
        assert listing(r) == after_redis and len(after_redis) == 1
        assert r.execute_command("FCALL_RO", "get", "1", "k") == b"v"
        assert r.execute_command("FCALL", "put", "1", "k", "w") == 2
