"""A pyrepl replica following the pyrepl master through the RDB channel, under a write load:
the master's ``mem_total_replication_buffers`` stays at backlog size while the replica buffers
the stream (``replica_full_sync_buffer_peak``), the datasets end identical; the same run with the
replica's ``repl-rdb-channel no`` (classic diskless) shows the master holding the writes instead.

Both processes are started and stopped by each test (by their Popen objects); the master's
snapshot child is slowed down with ``rdb-key-save-delay`` so the transfer lasts a few seconds.
The figures are printed (``-s``).
"""

from __future__ import annotations

import time

import pytest

from tests.support.procs import start_pyrepl
from tests.support.resp import RawClient, parse_reply
from tests.support.syncload import BACKLOG, info, loaded_master
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

KEYS = 20000


def digest(port: int) -> bytes:
    with RawClient(port) as c:
        d = parse_reply(c.call("DEBUG", "DIGEST"))
    assert isinstance(d, bytes)
    return d


def sync_under_load(rdb_channel: str) -> dict[str, object]:
    states: list[str] = []
    with loaded_master(KEYS) as (master, load, sampler):
        t0 = time.monotonic()
        replica = start_pyrepl("--loglevel", "notice", "--master", f"127.0.0.1:{master.port}",
                               "--repl-rdb-channel", rdb_channel, role="replica")
        try:
            def sample_state() -> None:
                s = info(master.port, "replication").get("slave0", "")
                state = s.split("state=")[1].split(",")[0] if s else ""
                if state and (not states or states[-1] != state):
                    states.append(state)

            def link_up() -> bool:
                sample_state()
                return info(replica.port, "replication")["master_link_status"] == "up"

            wait_for(link_up, 60, interval=0.05, what="the link to come up")
            t_up = time.monotonic() - t0
            load.finish()

            def caught_up() -> bool:
                sample_state()
                mo = info(master.port, "replication")["master_repl_offset"]
                return info(replica.port, "replication")["slave_repl_offset"] == mo

            wait_for(caught_up, 60, interval=0.05, what="the replica to catch up")
            t_caught = time.monotonic() - t0
            sampler.finish()
            assert digest(master.port) == digest(replica.port)
            rinfo = info(replica.port, "replication")
            return {"peak": sampler.peak, "states": states, "t_up": t_up,
                    "t_caught": t_caught,
                    "replica_peak": int(rinfo["replica_full_sync_buffer_peak"]),
                    "master_log": master.log(), "replica_log": replica.log()}
        finally:
            replica.stop()


def test_pyrepl_replica_over_the_rdb_channel_under_load() -> None:
    """The same sync with the replica's rdb channel on, then off (classic diskless): what the
    master logs, the replica's states on the master, and where the writes were buffered."""
    rdbch = sync_under_load("yes")
    classic = sync_under_load("no")
    print(f"\npyrepl master -> pyrepl replica, full sync of {KEYS} keys under ~7 MB/s of "
          f"writes (backlog {BACKLOG} bytes):\n"
          f"  rdb channel      : master mem_total_replication_buffers peak "
          f"{rdbch['peak']:>12,}  replica_full_sync_buffer_peak {rdbch['replica_peak']:>12,}"
          f"  link up {rdbch['t_up']:.2f} s, caught up {rdbch['t_caught']:.2f} s\n"
          f"  classic diskless : master mem_total_replication_buffers peak "
          f"{classic['peak']:>12,}  replica_full_sync_buffer_peak {classic['replica_peak']:>12,}"
          f"  link up {classic['t_up']:.2f} s, caught up {classic['t_caught']:.2f} s")
    log = str(rdbch["master_log"])
    assert "Full sync will continue with dedicated rdb channel." in log
    assert "Starting BGSAVE for SYNC with target: replicas sockets (rdb-channel)" in log
    assert "rdb channel" not in str(classic["master_log"])
    assert rdbch["states"][-1] == "online" and "send_bulk_and_stream" in rdbch["states"]
    assert "send_bulk_and_stream" not in classic["states"]
    # the master's buffers stay at backlog size with the rdb channel; the replica buffered
    assert rdbch["peak"] <= BACKLOG + (1 << 20)
    assert int(rdbch["replica_peak"]) > 0 and classic["replica_peak"] == 0
    assert int(classic["peak"]) > 3 * int(rdbch["peak"])
