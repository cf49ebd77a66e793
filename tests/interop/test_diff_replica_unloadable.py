"""A pyrepl replica of a master whose dataset holds a type pyrepl cannot load (a module value).

The refusal is clear (Redis's "Failed trying to load the MASTER synchronization DB" line with
the type's name), reported as a ``sync_failed`` event with reason ``rdb-unsupported``, and the
retries back off instead of a full sync every second; once the key is gone the next attempt
syncs. A real Redis needs the module loaded to hold such a value, so the master here is a
minimal one on a socket that answers the handshake and serves a crafted RDB with an
RDB_TYPE_MODULE_2 value (streams, which this test used before, now load).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.support.procs import free_port, start_pyrepl, sync_events
from tests.support.resp import RawClient, info
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def _rdb(with_module: bool) -> bytes:
    body = b"REDIS0010\xfe\x00"
    if with_module:
        # type 7, key "m", module id (64-bit length), one UINT, module EOF
        body += b"\x07\x01m" + b"\x81" + (0x1234567890ABC << 10).to_bytes(8, "big") + \
            b"\x02\x05\x00"
    body += b"\x00\x01k\x01v\xff"
    return body + bytes(8)                     # a zero checksum: "not computed"


class FakeMaster:
    """Answers PING / REPLCONF / PSYNC (+FULLRESYNC and the current RDB) on each connection."""

    def __init__(self) -> None:
        self.port = free_port()
        self.rdb = _rdb(True)
        self.sock = socket.create_server(("127.0.0.1", self.port))
        self.sock.settimeout(0.2)
        self.stop_flag = False
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 120
        while not self.stop_flag and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buf = b""
        try:
            for _ in range(20):
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                while b"\r\n" in buf:
                    text = buf.decode("latin-1")
                    if not text.startswith("*"):
                        buf = buf.split(b"\r\n", 1)[1]
                        continue
                    n = int(text[1:text.index("\r\n")])
                    parts = buf.split(b"\r\n")
                    if len(parts) < 1 + 2 * n + 1:
                        break
                    argv = [parts[2 + 2 * i] for i in range(n)]
                    buf = b"\r\n".join(parts[1 + 2 * n:])
                    name = argv[0].upper()
                    if name == b"PING":
                        conn.sendall(b"+PONG\r\n")
                    elif name == b"PSYNC":
                        rdb = self.rdb
                        conn.sendall(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n$%d\r\n" % len(rdb)
                                     + rdb)
                    else:
                        conn.sendall(b"+OK\r\n")
        except OSError:
            return

    def close(self) -> None:
        self.stop_flag = True
        self.thread.join(timeout=5)
        for c in self.conns:
            c.close()
        self.sock.close()


def test_unloadable_dataset_backs_off_then_syncs() -> None:
    master = FakeMaster()
    replica = start_pyrepl("--replicaof", "127.0.0.1", str(master.port), "--sync-log-file",
                           "sync.ndjson")
    try:
        time.sleep(8)
        log = replica.log()
        assert "Unsupported RDB object type 7" in log and "module" in log
        failed = [e for e in sync_events(replica) if e["event"] == "sync_failed"]
        assert failed and all(e["reason"] == "rdb-unsupported" for e in failed)
        # 1 + 2 + 4 s of waits: at most 4 attempts in 8 s, where one a second would be 8
        assert 2 <= len(failed) <= 4, [e["ts"] for e in failed]
        with RawClient(replica.port) as r:
            assert info(r, "replication")["master_link_status"] == "down"
            master.rdb = _rdb(False)
            wait_for(lambda: info(r, "replication")["master_link_status"] == "up", timeout=30,
                     what="the sync once the module value is gone")
            assert r.call("GET", "k") == b"$1\r\nv\r\n"
    finally:
        replica.stop()
        master.close()
