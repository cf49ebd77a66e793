"""A pyrepl replica of a real Redis master whose dataset holds a type pyrepl cannot load yet.

The refusal is clear (Redis's "Failed trying to load the MASTER synchronization DB" line with
the type's name), reported as a ``sync_failed`` event with reason ``rdb-unsupported``, and the
retries back off instead of a full sync every second; once the key is gone the next attempt
syncs.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from support import RawClient, info, start_pyrepl, start_redis, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def test_unloadable_dataset_backs_off_then_syncs() -> None:
    master = start_redis("--repl-diskless-sync-delay", "0")
    m = RawClient(master.port)
    m.call("XADD", "s", "*", "f", "v")      # a stream: pyrepl cannot load it yet
    m.call("SET", "k", "v")
    replica = start_pyrepl("--replicaof", "127.0.0.1", str(master.port), "--sync-log-file",
                           "sync.ndjson")
    try:
        time.sleep(8)
        log = replica.log()
        assert "Unsupported RDB object type" in log and "stream" in log
        with open(os.path.join(replica.dir, "sync.ndjson"), encoding="utf-8") as fh:
            events = [json.loads(line) for line in fh if line.strip()]
        failed = [e for e in events if e["event"] == "sync_failed"]
        assert failed and all(e["reason"] == "rdb-unsupported" for e in failed)
        # 1 + 2 + 4 s of waits: at most 4 attempts in 8 s, where one a second would be 8
        assert 2 <= len(failed) <= 4, [e["ts"] for e in failed]
        with RawClient(replica.port) as r:
            assert info(r, "replication")["master_link_status"] == "down"
            m.call("DEL", "s")
            wait_for(lambda: info(r, "replication")["master_link_status"] == "up", timeout=30,
                     what="the sync once the stream is gone")
            assert r.call("GET", "k") == b"$1\r\nv\r\n"
    finally:
        m.close()
        replica.stop()
        master.stop()
