"""A cut full sync resumes, pyrepl <-> pyrepl, with real processes (issue 40, part 3).

The master paces the transfer (``repl-sync-max-bandwidth``) so that it lasts seconds; a write
load runs; halfway the replica's connection is killed on the master (``CLIENT KILL TYPE
replica``). The replica kept what it had loaded and asks to resume; the master kept the
snapshot (its file in disk mode, the copy the diskless child wrote in ``dir``) and the stream
from the snapshot offset. The sync ends with one full sync counted, the rest of the payload
sent from the byte where it stopped, and equal digests. With ``repl-full-sync-resume-window 0``
the same cut starts the sync over.
"""

from __future__ import annotations

import re
from contextlib import ExitStack

import pytest

from tests.support.load import LoadWriter
from tests.support.procs import start_pyrepl, sync_events
from tests.support.redispy import r, repl
from tests.support.waits import wait_for, wait_synced

pytestmark = pytest.mark.slow

KEYS = 40_000     # DEBUG POPULATE: an RDB of about 1.2 MB, 5 s at 256kb/s


def _stats(port: int) -> dict:
    with r(port) as c:
        return c.info("stats")


@pytest.mark.parametrize("diskless", ["yes", "no", "follow"])
def test_a_full_sync_cut_halfway_resumes_from_where_it_stopped(tmp_path, diskless: str) -> None:
    """``follow``: diskless, the child slowed down (``rdb-key-save-delay``) so that it still
    writes the copy when the replica comes back: the copy is sent as it grows."""
    dm, dr = tmp_path / "m", tmp_path / "r"
    dm.mkdir()
    dr.mkdir()
    slow = ["--rdb-key-save-delay", "150"] if diskless == "follow" else []
    with start_pyrepl("--repl-diskless-sync", "no" if diskless == "no" else "yes",
                      "--repl-diskless-sync-delay", "0", *slow,
                      "--repl-sync-max-bandwidth", "256kb", "--repl-backlog-size", "1mb",
                      "--sync-log-file", "sync.ndjson", tmpdir=str(dm)) as m, \
            ExitStack() as stack:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", str(KEYS), "key", "100")
        writer = stack.enter_context(LoadWriter(m.port, max_ops=200_000, max_seconds=60))
        writer.start()
        rep = stack.enter_context(start_pyrepl("--master", f"127.0.0.1:{m.port}",
                                               "--repl-rdb-channel", "no", "--sync-log-file",
                                               "sync.ndjson", role="replica", tmpdir=str(dr)))
        wait_for(lambda: int(repl(rep.port).get("master_sync_read_bytes", 0)) > 300_000, 30,
                 what="a third of the transfer")
        with r(m.port) as c:
            assert c.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        wait_for(lambda: "resumed: snapshot" in m.log(), 30, what="the resume")
        writer.finish()
        wait_synced(m.port, rep.port, timeout=60)
        assert _stats(m.port)["sync_full"] == 1           # one full sync, resumed once
        have = int(re.search(r"resumed: snapshot \w+ from byte (\d+)", m.log()).group(1))
        assert have > 300_000
        assert "resuming snapshot" in rep.log()
        if diskless != "yes":   # (an unslowed child may or may not have ended by then)
            assert ("as its child writes the copy" in m.log()) == (diskless == "follow")
        # the resumed transfer sent the rest only: its header and the payload from ``have``
        # (the replica counts the whole payload, what it kept and what it got)
        (sent,) = [e for e in sync_events(m) if e["event"] == "fullsync_rdb_sent"]
        (got,) = [e for e in sync_events(rep) if e["event"] == "rdb_received"]
        assert sent["bytes"] == len(b"$RESUME:%d\r\n" % have) + got["bytes"] - have


def test_a_cut_rdb_channel_sync_resumes_with_the_stream_it_buffered(tmp_path) -> None:
    """The default between pyrepl nodes (diskless, rdb channel): both connections are killed
    halfway; the replica kept the payload and its main channel's buffer, and the resumed sync
    sends the payload's rest and the stream from where that buffer ended."""
    dm, dr = tmp_path / "m", tmp_path / "r"
    dm.mkdir()
    dr.mkdir()
    with start_pyrepl("--repl-diskless-sync-delay", "0", "--repl-sync-max-bandwidth", "256kb",
                      "--repl-backlog-size", "1mb", "--sync-log-file", "sync.ndjson",
                      tmpdir=str(dm)) as m, ExitStack() as stack:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", str(KEYS), "key", "100")
        writer = stack.enter_context(LoadWriter(m.port, max_ops=200_000, max_seconds=60))
        writer.start()
        rep = stack.enter_context(start_pyrepl("--master", f"127.0.0.1:{m.port}",
                                               "--sync-log-file", "sync.ndjson",
                                               role="replica", tmpdir=str(dr)))
        wait_for(lambda: int(repl(rep.port).get("master_sync_read_bytes", 0)) > 300_000, 30,
                 what="a third of the transfer")
        with r(m.port) as c:
            assert c.execute_command("CLIENT", "KILL", "TYPE", "replica") >= 1
        wait_for(lambda: "resumed: snapshot" in m.log(), 30, what="the resume")
        writer.finish()
        wait_synced(m.port, rep.port, timeout=60)
        assert _stats(m.port)["sync_full"] == 1           # one full sync, resumed once
        kept = re.search(r"keeping the (\d+) bytes received of snapshot (\w+) and (\d+) bytes "
                         r"of its stream", rep.log())
        assert kept is not None and int(kept.group(1)) > 300_000 and int(kept.group(3)) > 0
        resumed = re.search(r"resumed: snapshot (\w+) from byte (\d+), the stream from offset "
                            r"(\d+)", m.log())
        assert resumed.group(1) == kept.group(2) and resumed.group(2) == kept.group(1)
        st = _stats(m.port)
        assert (st["sync_full_resumed"], st["total_repl_resumed_bytes"]) == (
            1, int(kept.group(1)))
        (first,) = [e for e in sync_events(m) if e["event"] == "fullsync_fork"]
        assert int(resumed.group(3)) == first["offset"] + 1 + int(kept.group(3))
        assert first["mode"] == "rdb-channel"


def test_without_the_window_the_cut_sync_starts_over(tmp_path) -> None:
    dm, dr = tmp_path / "m", tmp_path / "r"
    dm.mkdir()
    dr.mkdir()
    with start_pyrepl("--repl-diskless-sync-delay", "0", "--repl-sync-max-bandwidth", "256kb",
                      "--repl-full-sync-resume-window", "0", tmpdir=str(dm)) as m, \
            ExitStack() as stack:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", str(KEYS), "key", "100")
        rep = stack.enter_context(start_pyrepl("--master", f"127.0.0.1:{m.port}",
                                               "--repl-rdb-channel", "no", role="replica",
                                               tmpdir=str(dr)))
        wait_for(lambda: int(repl(rep.port).get("master_sync_read_bytes", 0)) > 300_000, 30,
                 what="a third of the transfer")
        with r(m.port) as c:
            c.execute_command("CLIENT", "KILL", "TYPE", "replica")
        wait_synced(m.port, rep.port, timeout=60)
        assert _stats(m.port)["sync_full"] == 2
        assert "resumed" not in m.log()
