"""TLS: clients (redis-py, redis-cli's peers), replication both ways with Debian's
redis-server 7.0.15 (built with TLS), the rdb channel between pyrepl nodes, and the tls-*
directives answering as Redis's do.

Certificates are made per module with the ``openssl`` command line, as Redis's
utils/gen-test-certs.sh makes them: a CA, a certificate it signed for the servers (also used
as the replicas' client certificate), and one signed by another CA that must be refused.
Control connections (INFO, DEBUG DIGEST) use each server's plain port; what is tested goes
over its TLS port.
"""

from __future__ import annotations

import os
import shutil
import ssl
from pathlib import Path

import pytest
import redis

from tests.support.procs import free_port, start_pyrepl, start_redis
from tests.support.realpair import AS_REPL, REPL_USER, events, start_master
from tests.support.tlscerts import make_certs
from tests.support.tlscerts import server_args as tls_args
from tests.support.waits import wait_for, wait_synced

pytestmark = [pytest.mark.slow, pytest.mark.interop]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is missing (the test command installs it)")
    d = tmp_path_factory.mktemp("tls")
    return make_certs(d)


def tls_client(d: Path, port: int, cert: str | None = "redis", **kw: object) -> redis.Redis:
    extra: dict[str, object] = {}
    if cert is not None:
        extra = {"ssl_certfile": str(d / f"{cert}.crt"), "ssl_keyfile": str(d / f"{cert}.key")}
    return redis.Redis(port=port, ssl=True, ssl_ca_certs=str(d / "ca.crt"),
                       ssl_check_hostname=False, socket_timeout=20, **extra, **kw)


def both(certs: Path, *extra: str):  # -> (pyrepl, redis) processes with a TLS port each
    ours_tls, theirs_tls = free_port(), free_port()
    ours = start_pyrepl(*tls_args(certs, ours_tls), *extra)
    ours.tls_port = ours_tls
    theirs = start_redis(*tls_args(certs, theirs_tls), *extra)
    theirs.tls_port = theirs_tls
    return ours, theirs


# -- clients ------------------------------------------------------------------------------------

def test_redis_py_over_tls(certs: Path) -> None:
    """Commands, a pipeline, a transaction and pub/sub over TLS; the client is refused without
    a certificate or with one from another CA, and the plain port still serves."""
    tls_port = free_port()
    srv = start_pyrepl(*tls_args(certs, tls_port))
    try:
        c = tls_client(certs, tls_port, protocol=3)
        assert c.set("k", "v") and c.get("k") == b"v"
        big = os.urandom(3 << 20)               # larger than any TLS record or buffer
        c.set("big", big)
        assert c.get("big") == big
        p = c.pipeline(transaction=True)
        for _ in range(1000):
            p.incr("n")
        assert p.execute()[-1] == 1000
        sub = tls_client(certs, tls_port).pubsub()
        sub.subscribe("ch")
        wait_for(lambda: sub.get_message(timeout=0.1) is not None, 5, what="subscribed")
        assert c.publish("ch", "hello") == 1
        msg = None

        def got() -> bool:
            nonlocal msg
            msg = sub.get_message(timeout=0.1)
            return msg is not None
        wait_for(got, 5, what="the message")
        assert msg["data"] == b"hello"
        sub.close()
        for cert in (None, "stranger"):         # tls-auth-clients yes (the default)
            with pytest.raises(redis.ConnectionError):
                tls_client(certs, tls_port, cert=cert).ping()
        assert redis.Redis(port=srv.port).get("k") == b"v"
        c.close()
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", ["no", "optional"])
def test_tls_auth_clients(certs: Path, mode: str) -> None:
    """tls-auth-clients no / optional: a client without a certificate is served; with
    ``optional`` a certificate from another CA is still refused (as OpenSSL's VERIFY_PEER)."""
    tls_port = free_port()
    srv = start_pyrepl(*tls_args(certs, tls_port, tls_auth_clients=mode))
    try:
        assert tls_client(certs, tls_port, cert=None).ping()
        if mode == "optional":
            with pytest.raises(redis.ConnectionError):
                tls_client(certs, tls_port, cert="stranger").ping()
        assert tls_client(certs, tls_port).ping()
    finally:
        srv.stop()


def _handshake(certs: Path, port: int, **ctx_settings: object) -> tuple[str, str]:
    """(protocol version, cipher) a TLS handshake with the server on ``port`` agrees on."""
    import socket

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(certs / "ca.crt"))
    ctx.load_cert_chain(str(certs / "redis.crt"), str(certs / "redis.key"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    for k, v in ctx_settings.items():
        setattr(ctx, k, v)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw) as s:
        return s.version(), s.cipher()[0]


def test_protocols_and_ciphers_as_redis(certs: Path) -> None:
    """tls-protocols, tls-ciphers and tls-ciphersuites select what Redis's select, set at
    start or with CONFIG SET; bad values get Redis's error and change nothing."""
    ours, theirs = both(certs)
    try:
        servers = [(redis.Redis(port=s.port, decode_responses=True), s.tls_port)
                   for s in (ours, theirs)]

        def agreed(**ctx_settings: object) -> list[tuple[str, str]]:
            return [_handshake(certs, port, **ctx_settings) for _, port in servers]

        def config_set(*args: str) -> list[object]:
            out = []
            for c, _ in servers:
                try:
                    out.append(c.config_set(*args))
                except redis.ResponseError as e:
                    out.append(str(e))
            return out

        default = agreed()
        assert default[0] == default[1] and default[0][0] == "TLSv1.3"
        assert config_set("tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256") == [True, True]
        assert agreed() == [("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256")] * 2
        assert config_set("tls-protocols", "TLSv1.2") == [True, True]
        assert config_set("tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256") == [True, True]
        assert agreed() == [("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")] * 2
        for name, bad in (("tls-protocols", "TLSv1.9"), ("tls-ciphers", "NO-SUCH-CIPHER"),
                          ("tls-ciphersuites", "TLS_NOPE"), ("tls-cert-file", "/nonexistent"),
                          ("tls-key-file", str(certs / "stranger.key")),
                          ("tls-ca-cert-file", "/nonexistent")):
            replies = config_set(name, bad)
            assert replies[0] == replies[1], (name, replies)
            assert "Unable to update TLS configuration" in replies[0]
            assert agreed() == [("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")] * 2, name
            assert [c.config_get(name) for c, _ in servers][0] == \
                [c.config_get(name) for c, _ in servers][1]
        moved = free_port()
        assert config_set("tls-port", str(moved))[0] is True
        assert _handshake(certs, moved)[0] == "TLSv1.2"
        with pytest.raises(OSError):
            _handshake(certs, ours.tls_port)
    finally:
        ours.stop()
        theirs.stop()


def test_start_without_a_certificate_fails_as_redis(certs: Path) -> None:
    for start in (start_pyrepl, start_redis):
        with pytest.raises(RuntimeError) as info:
            start("--tls-port", str(free_port()))
        assert "Failed to configure TLS. Check logs for more info." in str(info.value)
        assert "No tls-cert-file configured!" in str(info.value)


# -- replication ------------------------------------------------------------------------------

def _populate(c: redis.Redis) -> None:
    c.execute_command("DEBUG", "POPULATE", 30000, "key", 100)
    c.set("big", os.urandom(2 << 20))
    c.rpush("list", *range(5000))
    c.hset("hash", mapping={f"f{i}": i for i in range(2000)})


def _write_more(c: redis.Redis) -> None:
    p = c.pipeline(transaction=False)
    for i in range(3000):
        p.set(f"after:{i}", i)
    p.incrby("counter", 7)
    p.execute()


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_real_redis_replica_over_tls(certs: Path, diskless: str) -> None:
    """A redis-server 7.0.15 replica with tls-replication syncs from a pyrepl master's TLS
    port as a restricted ACL user, diskless (the child's snapshot relayed by the parent) and
    from disk, then follows the stream; the master's log shows the full sync it made."""
    tls_port = free_port()
    master = start_master(*tls_args(certs, tls_port), "--repl-diskless-sync", diskless,
                          "--repl-diskless-sync-delay", "0", *REPL_USER)
    replica = None
    try:
        mc = redis.Redis(port=master.port)
        _populate(mc)
        replica = start_redis(*tls_args(certs), "--tls-replication", "yes",
                              "--enable-debug-command", "yes", *AS_REPL,
                              "--replicaof", "127.0.0.1", str(tls_port))
        wait_synced(master.port, replica.port)
        _write_more(mc)
        wait_synced(master.port, replica.port)
        assert "user=repl" in mc.execute_command("CLIENT", "LIST", "TYPE", "replica").decode()
        # the master reports the transfer when it reaps the child, which may come after
        # the replica has loaded the snapshot and caught up
        full = wait_for(lambda: events(master, "fullsync_rdb_sent"), 30,
                        what="the master's fullsync_rdb_sent event")
        assert full and full[-1]["mode"] == ("diskless" if diskless == "yes" else "disk"), full
        assert "MASTER <-> REPLICA sync: Finished with success" in replica.log()
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_pyrepl_replica_of_real_redis_over_tls(certs: Path, diskless: str) -> None:
    """A pyrepl replica with tls-replication follows a redis-server 7.0.15 master's TLS port
    as a restricted ACL user: full sync, the stream, then a partial resync over TLS after the
    link is killed."""
    tls_port = free_port()
    master = start_redis(*tls_args(certs, tls_port), "--repl-diskless-sync", diskless,
                         "--enable-debug-command", "yes", *REPL_USER,
                         "--repl-diskless-sync-delay", "0")
    replica = None
    try:
        mc = redis.Redis(port=master.port)
        _populate(mc)
        replica = start_pyrepl(*tls_args(certs), "--tls-replication", "yes", *AS_REPL,
                               "--master", f"127.0.0.1:{tls_port}", role="replica")
        wait_synced(master.port, replica.port)
        _write_more(mc)
        wait_synced(master.port, replica.port)
        assert "user=repl" in mc.execute_command("CLIENT", "LIST", "TYPE", "replica").decode()
        syncs = int(mc.info("stats")["sync_full"])
        assert mc.client_kill_filter(_type="replica") == 1
        _write_more(mc)
        wait_synced(master.port, replica.port)
        stats = mc.info("stats")
        assert int(stats["sync_full"]) == syncs and int(stats["sync_partial_ok"]) >= 1
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


def test_pyrepl_replica_of_pyrepl_rdb_channel_over_tls(certs: Path) -> None:
    """Between pyrepl nodes the rdb channel (a second TLS connection, the snapshot relayed by
    the master's parent process) and the main channel both run over TLS."""
    tls_port = free_port()
    master = start_master(*tls_args(certs, tls_port), "--repl-diskless-sync-delay", "0")
    replica = None
    try:
        mc = redis.Redis(port=master.port)
        _populate(mc)
        replica = start_pyrepl(*tls_args(certs), "--tls-replication", "yes",
                               "--master", f"127.0.0.1:{tls_port}", role="replica")
        wait_synced(master.port, replica.port)
        _write_more(mc)
        wait_synced(master.port, replica.port)
        # the master reports the transfer when it reaps the child, which may come after
        # the replica has loaded the snapshot and caught up
        full = wait_for(lambda: events(master, "fullsync_rdb_sent"), 30,
                        what="the master's fullsync_rdb_sent event")
        assert full and full[-1]["mode"] == "rdb-channel", full
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


def test_replica_refuses_a_master_from_another_ca(certs: Path) -> None:
    """A master whose certificate the replica's CA did not sign is never synced from: the
    link stays down and the replica logs why."""
    tls_port = free_port()
    master = start_pyrepl("--tls-port", str(tls_port),
                          "--tls-cert-file", str(certs / "stranger.crt"),
                          "--tls-key-file", str(certs / "stranger.key"),
                          "--tls-ca-cert-file", str(certs / "other-ca.crt"),
                          "--tls-auth-clients", "no")
    replica = None
    try:
        replica = start_pyrepl(*tls_args(certs), "--tls-replication", "yes",
                               "--master", f"127.0.0.1:{tls_port}", role="replica")
        wait_for(lambda: "certificate verify failed" in replica.log().lower()
                 or "certificate_verify_failed" in replica.log().lower(), 15,
                 what="the replica's log of the refused certificate")
        rc = redis.Redis(port=replica.port, decode_responses=True)
        assert rc.info("replication")["master_link_status"] == "down"
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


def test_tls_replica_lost_mid_transfer(certs: Path) -> None:
    """Two Redis replicas take one diskless snapshot over TLS; one is killed while the
    (slowed) child writes: the master drops it, the other finishes and follows the stream."""
    tls_port = free_port()
    master = start_master(*tls_args(certs, tls_port), "--repl-diskless-sync-delay", "1",
                          "--rdb-key-save-delay", "100")
    replicas = []
    try:
        mc = redis.Redis(port=master.port)
        mc.execute_command("DEBUG", "POPULATE", 20000, "key", 500)
        for _ in range(2):
            replicas.append(start_redis(*tls_args(certs), "--tls-replication", "yes",
                                        "--enable-debug-command", "yes",
                                        "--replicaof", "127.0.0.1", str(tls_port)))
        wait_for(lambda: events(master, "fullsync_fork"), 20, what="the snapshot child")
        replicas[0].kill()
        wait_for(lambda: events(master, "replica_lost"), 30, what="the lost replica")
        mc.config_set("rdb-key-save-delay", 0)
        wait_synced(master.port, replicas[1].port)
        _write_more(mc)
        wait_synced(master.port, replicas[1].port)
        assert int(mc.info("replication")["connected_slaves"]) == 1
    finally:
        for rp in replicas:
            rp.stop()
        master.stop()
