"""The key property of the RDB channel, measured on the pyrepl master process: under a write
load during a full sync, ``mem_total_replication_buffers`` stays at backlog size with the rdb
channel (the writes stream on the main connection at once, from the snapshot offset), while the
classic diskless sync holds every write made during the transfer until the replica's first ACK.

The same master setup, dataset and write load run in both modes; the snapshot child is slowed
down with ``rdb-key-save-delay`` so the transfer lasts a few seconds. The replica is raw sockets
reading what a Redis 8 replica (rdb channel) or a Redis 7 replica (classic) reads: the rdb
channel's RDB, the main channel's stream into a local buffer. INFO memory is sampled every 50 ms
from the PSYNC to the moment the replica has received everything; the peak is printed (``-s``)
next to the bytes written during the sync.
"""

from __future__ import annotations

import time

import pytest

from tests.support.rawreplica import Chan, RdbchReplica, Reader
from tests.support.resp import encode_command
from tests.support.syncload import BACKLOG, info, loaded_master
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

KEYS = 40000


def full_sync_under_load(mode: str) -> dict[str, int]:
    with loaded_master(KEYS, "--repl-ping-replica-period", "3600") as (srv, load, sampler):
        readers: list[Reader] = []
        chans: list[Chan] = []
        try:
            start_off = int(info(srv.port, "replication")["master_repl_offset"])
            if mode == "rdbchannel":
                rep = RdbchReplica(srv.port)
                chans += [rep.main]
                rep.handshake()
                main = Reader(rep.main)
                main.start()
                readers.append(main)
                rep.open_rdb()
                chans.append(rep.rdb)  # type: ignore[arg-type]
                _, _, snap_off = rep.read_fullresync()
                rep.read_rdb()
                ack_chan = rep.main
            else:
                main_chan = Chan(srv.port)
                chans.append(main_chan)
                main_chan.send(encode_command("REPLCONF", "listening-port", "7777")
                               + encode_command("REPLCONF", "capa", "eof", "capa", "psync2"))
                main_chan.read_exact(b"+OK\r\n+OK\r\n")
                main_chan.send(encode_command("PSYNC", "?", "-1"))
                parts = main_chan.read_line().split()
                assert parts[0] == b"+FULLRESYNC"
                snap_off = int(parts[2])
                eof = main_chan.read_line()
                mark = eof[5:]
                main_chan.recv_until(lambda b: mark in b, 120)
                rest = bytes(main_chan.buf).split(mark, 1)[1]
                main_chan.buf[:] = rest
                main = Reader(main_chan)
                main.start()
                readers.append(main)
                ack_chan = main_chan
            end_of_rdb_off = int(info(srv.port, "replication")["master_repl_offset"])
            ack_chan.send(encode_command("REPLCONF", "ACK", snap_off))
            load.finish()
            final = int(info(srv.port, "replication")["master_repl_offset"])
            received = [0]
            last_ack = [time.monotonic()]

            def caught_up() -> bool:
                received[0] += len(main.take())
                if time.monotonic() - last_ack[0] >= 1.0:
                    # a real replica ACKs every second (replicationCron): the first ACK may
                    # reach the master before it has reaped the child that wrote the RDB
                    ack_chan.send(encode_command("REPLCONF", "ACK", snap_off + received[0]))
                    last_ack[0] = time.monotonic()
                return received[0] >= final - snap_off

            wait_for(caught_up, 60, interval=0.05, what="the replica to receive the whole stream")
            sampler.finish()
            return {"peak": sampler.peak, "peak_clients": sampler.peak_clients,
                    "written_during_sync": end_of_rdb_off - start_off,
                    "stream_received": received[0], "expected": final - snap_off,
                    "samples": sampler.samples}
        finally:
            for r in readers:
                r.finish()
            for ch in chans:
                ch.close()


def test_master_buffers_stay_at_backlog_size_with_the_rdb_channel() -> None:
    rdbch = full_sync_under_load("rdbchannel")
    classic = full_sync_under_load("classic")
    print(f"\nmem_total_replication_buffers peak during a full sync under write load "
          f"(backlog {BACKLOG} bytes, {KEYS} keys, rdb-key-save-delay 50us):\n"
          f"  rdb channel      : peak {rdbch['peak']:>12,} bytes  (replica buffers "
          f"{rdbch['peak_clients']:,}; {rdbch['written_during_sync']:,} bytes written during "
          f"the sync, {rdbch['samples']} samples)\n"
          f"  classic diskless : peak {classic['peak']:>12,} bytes  (replica buffers "
          f"{classic['peak_clients']:,}; {classic['written_during_sync']:,} bytes written "
          f"during the sync, {classic['samples']} samples)")
    for r in (rdbch, classic):
        assert r["stream_received"] == r["expected"]  # nothing lost, nothing doubled
        assert r["written_during_sync"] > 4 * BACKLOG  # the load really ran during the sync
    # the goal: master peak <= backlog size + 1 MB with the rdb channel
    assert rdbch["peak"] <= BACKLOG + (1 << 20)
    # classic holds (most of) what was written during the transfer
    assert classic["peak"] >= classic["written_during_sync"] // 2
    assert classic["peak"] > 3 * rdbch["peak"]

