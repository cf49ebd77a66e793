"""End to end: real pyrepl master and replicas provoke partial syncs and full syncs for each
reason, then ``pyrepl metrics`` (a separate process, as an operator runs it) reads their sync
logs, and the counts and reasons it reports are the ones provoked.

Theory of operation: three pyrepl processes log to their own ``sync.ndjson``. M (backlog 16kb)
has replicas R1 and R2, both fresh (``PSYNC ? -1``: no-history x2). Killing M's replica links
twice gives 4 partial syncs. Stopping R2 (SIGSTOP), killing the links (R1 resumes: partial
no. 5) and writing 1 MB puts R2's offset outside M's backlog: when R2 runs again it gets a full
sync for offset-before-backlog. R1 is promoted, M takes more writes, then follows R1: its
history diverged, replid-mismatch; R2, dropped by M and asking M for M's old id, gets a
replid-mismatch too. R2 restarts without an RDB: no-history. A raw client asks R1 for an offset
past its end: offset-ahead. The master side of every decision is logged by the node that
decided, the replica side by the replica, and the job must join them.
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.support.load import write_keys
from tests.support.procs import start_pyrepl
from tests.support.redispy import in_sync, kill_replica_links, r, repl
from tests.support.resp import RawClient
from tests.support.waits import wait_for, wait_offsets

pytestmark = pytest.mark.slow

COMMON = ("--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1",
          "--sync-log-file", "sync.ndjson")



def start(tmp_path, name: str, *extra: str, master: int | None = None, port: int | None = None):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    if master is None:
        return start_pyrepl(*COMMON, *extra, tmpdir=str(d), port=port)
    return start_pyrepl("--master", f"127.0.0.1:{master}", *COMMON, *extra, role="replica",
                        tmpdir=str(d), port=port)


def cells(row: str) -> list[str]:
    """The text of a report table row's cells."""
    return [html.unescape(x) for x in re.findall(r"<t[dh]>(.*?)</t[dh]>", row)]


def run_metrics(tmp_path, names: tuple[str, ...], out) -> dict:
    """``pyrepl metrics`` in its own process over the nodes' logs; the summary it wrote."""
    logs = [str(tmp_path / n / "sync.ndjson*") for n in names]  # globs: the directories also
    # hold the servers' own logs
    env = {**os.environ, "CI": "1"}
    res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics", *logs, "--out",
                          str(out), "--spark-master", "local[2]", "--conf",
                          "spark.sql.shuffle.partitions=2"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "report: " in res.stdout and (out / "report.html").exists()
    with open(out / "summary.json") as f:
        return json.load(f)


def test_metrics_report_what_was_provoked(tmp_path, spark) -> None:
    procs = []
    stopped = None
    try:
        m = start(tmp_path, "m", "--repl-backlog-size", "16kb")
        procs.append(m)
        write_keys(m.port, "init", 200)
        r1 = start(tmp_path, "r1", master=m.port)
        procs.append(r1)
        r2 = start(tmp_path, "r2", master=m.port)
        procs.append(r2)
        wait_offsets(m.port, r1.port, r2.port)  # no-history x2

        for round_ in range(2):  # partial syncs x4
            assert kill_replica_links(m.port) == 2
            wait_for(lambda: repl(m.port)["connected_slaves"] == 2, 30, what="relinked")
            wait_offsets(m.port, r1.port, r2.port)
            write_keys(m.port, f"k{round_}", 20)
            wait_offsets(m.port, r1.port, r2.port)

        # offset-before-backlog for R2 (R1 continues: partial no. 5)
        stopped = r2
        r2.proc.send_signal(signal.SIGSTOP)
        assert kill_replica_links(m.port) == 2
        wait_for(lambda: in_sync(m.port, r1.port) and repl(m.port)["connected_slaves"] == 1,
                 30, what="R1 relinked")
        write_keys(m.port, "big", 1000, 1000)
        wait_offsets(m.port, r1.port)
        r2.proc.send_signal(signal.SIGCONT)
        stopped = None
        wait_offsets(m.port, r1.port, r2.port)

        # promotion: R1 becomes the master, M diverges and follows it (replid-mismatch x2)
        with r(r1.port) as c:
            assert c.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        write_keys(m.port, "diverged", 50)
        with r(m.port) as c:
            assert c.execute_command("REPLICAOF", "127.0.0.1", str(r1.port)) == b"OK"
        wait_offsets(r1.port, m.port)
        wait_offsets(m.port, r2.port)

        # R2 restarts with no RDB: PSYNC ? -1 again
        r2.stop()
        dump = os.path.join(r2.dir, "dump.rdb")
        if os.path.exists(dump):
            os.unlink(dump)
        r2b = start(tmp_path, "r2", master=m.port, port=r2.port)
        procs.append(r2b)
        wait_offsets(m.port, r2b.port)

        # offset-ahead: a raw replica asks R1 for bytes it never wrote
        info = repl(r1.port)
        with RawClient(r1.port) as raw:
            assert raw.call("REPLCONF", "listening-port", "1") == b"+OK\r\n"
            raw.send("PSYNC", info["master_replid"], info["master_repl_offset"] + 100_000)
            assert raw.read_reply().startswith(b"+FULLRESYNC")
        wait_for(lambda: repl(r1.port)["connected_slaves"] == 1, 30, what="raw replica gone")
        write_keys(r1.port, "end", 10)
        wait_offsets(r1.port, m.port)
        wait_offsets(m.port, r2b.port)
    finally:
        if stopped is not None:
            stopped.proc.send_signal(signal.SIGCONT)
        for p in reversed(procs):
            p.stop()

    out = tmp_path / "report"
    s = run_metrics(tmp_path, ("m", "r1", "r2"), out)

    assert s["input"]["malformed_lines"] == 0
    ps = s["psync"]
    assert ps["partial"] == 5, ps
    assert s["full_syncs"]["by_reason"] == {"no-history": 3, "offset-before-backlog": 1,
                                            "replid-mismatch": 2, "offset-ahead": 1}, s
    assert ps["full"] == 7 and ps["syncs"] == 12
    assert ps["partial_ratio"] == pytest.approx(5 / 12)
    assert sum(ps["by_result"].values()) == 12
    assert s["full_syncs"]["failed"] <= 1  # only the raw replica that hung up can fail

    # every decision but the raw client's has its replica half, joined from another log
    syncs = [x.asDict() for x in spark.read.parquet(str(out / "tables" / "syncs.parquet"))
             .collect()]
    assert len(syncs) == 12
    lonely = [x for x in syncs if x["r_sync_id"] is None]
    assert [x["reason"] for x in lonely] == ["offset-ahead"]
    assert all(x["m_sync_id"] for x in syncs)
    obb = [x for x in syncs if x["reason"] == "offset-before-backlog"]
    assert len(obb) == 1 and obb[0]["replica"] == f"127.0.0.1:{r2.port}"
    need = obb[0]["backlog_need"]
    assert need == obb[0]["backlog_histlen"] + obb[0]["gap"] and need > 16 * 1024
    assert s["backlog"]["advice_bytes"]["p50"] == need
    assert s["backlog"]["current_backlog_bytes"]["min"] == 16 * 1024
    done = [x for x in syncs if x["kind"] == "full" and x["status"] == "ok"
            and x["r_sync_id"] is not None]
    assert len(done) == 6 and all(x["total_ms"] is not None and x["total_ms"] >= 0
                                  for x in done)
    assert all(x["rdb_bytes"] and x["rdb_bytes"] > 0 for x in done)
    rec = s["recovery"]
    assert rec["partial_ms"]["count"] >= 5  # the link kills, each recovered partially
    assert s["links"]["link_downs"] >= 6
    assert s["lag"]["samples"] > 0
    assert s["fleet"]["masters"] >= 2 and s["fleet"]["replicas"] >= 3


def test_full_sync_loop_from_the_output_buffer_limit_and_both_buffer_kinds(tmp_path, spark
                                                                           ) -> None:
    """A classic (diskless) replica whose master buffers more than its output limit while a
    slowed snapshot is made is dropped and starts over: full syncs caused by the output-buffer
    limit, a full-sync loop once it happens twice, and master-output buffer peaks above 80% of
    the limit. A second replica syncs over the rdb channel under writes: its buffer is the
    replica's own. The job must report what INFO counted."""
    import threading

    limit = 1024 * 1024  # the hard limit is at least repl-backlog-size (1mb), as in Redis
    procs = []
    try:
        m = start(tmp_path, "m", "--client-output-buffer-limit", "replica 1mb 0 0",
                  "--rdb-key-save-delay", "100")  # 20k keys: a ~2 s snapshot
        procs.append(m)
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", "20000", "key", "10")

        def drops() -> int:
            with r(m.port) as c:
                return int(c.info("stats")["client_output_buffer_limit_disconnections"])

        def writer() -> None:  # ~4 MB/s until the second drop (bounded: 120 s)
            with r(m.port) as c:
                deadline = time.monotonic() + 120
                i = 0
                while drops() < 2 and time.monotonic() < deadline:
                    p = c.pipeline(transaction=False)
                    for _ in range(100):
                        p.set(f"w:{i % 5000}", "x" * 1000)
                        i += 1
                    p.execute()
                    time.sleep(0.02)

        th = threading.Thread(target=writer, daemon=True)
        th.start()
        r1 = start(tmp_path, "r1", "--repl-rdb-channel", "no", master=m.port)
        procs.append(r1)
        th.join(130)
        assert drops() == 2
        wait_offsets(m.port, r1.port)  # the third attempt: no writes, no drop
        r2 = start(tmp_path, "r2", master=m.port)  # rdb channel (the default)
        procs.append(r2)
        # writes while R2 loads, in small batches (a burst past 1mb would drop the links)
        wait_for(lambda: repl(r2.port).get("master_sync_in_progress") == 1, 30,
                 what="R2 syncing")
        for k in range(10):
            write_keys(m.port, f"during-r2-{k}", 50, 1000)
            time.sleep(0.05)
        wait_offsets(m.port, r1.port, r2.port)
        dropped = drops()
        with r(m.port) as c:
            sync_full = int(c.info("stats")["sync_full"])
    finally:
        for p in reversed(procs):
            p.stop()

    s = run_metrics(tmp_path, ("m", "r1", "r2"), tmp_path / "report")
    assert s["input"]["malformed_lines"] == 0
    full = s["full_syncs"]
    # R1: two attempts dropped, the third made it; R2: one rdb-channel sync. All PSYNC ? -1
    # (a replica that never had data), two of them caused by the output-buffer limit
    assert dropped == 2 and full["count"] == sync_full == 4, (full, sync_full)
    assert full["by_reason"] == {"no-history": 4}
    assert full["by_cause"] == {"output-buffer-limit": 2, "no-history": 2}
    assert full["by_mode"] == {"diskless": 3, "rdb-channel": 1}
    assert full["failed"] == 2 and s["psync"]["partial"] == 0
    assert s["links"]["replica_lost_by_reason"]["output-buffer-limit"] == 2
    assert s["failures"]["full_sync_loops"] == 1  # no link_down: it was R1's first sync
    assert s["recovery"]["count"] == 0
    classic = s["buffers"]["master-output"]
    assert classic["syncs"] == 3 and classic["over_80pct"] >= 2
    assert classic["peak_bytes"]["max"] >= limit
    rdbch = s["buffers"]["replica"]
    assert rdbch["syncs"] == 1 and rdbch["peak_bytes"]["max"] > 0
    # the report: R1's loop, and its link's story: two full syncs dropped for the output
    # buffer, then one that made it (drawn in link_timeline.png)
    page = (tmp_path / "report" / "report.html").read_text()
    timeline, loops = page.split("<h2>Per-link timeline</h2>", 1)[1].split(
        "<h3>Full-sync loops</h3>", 1)
    (loop,) = [cells(row) for row in re.findall(r"<tr>(.*?)</tr>", loops)
               if f":{r1.port}</td>" in row]
    # two failed full syncs in three attempts, ended by a link up; the replica says why its
    # attempts failed (the master's reason is in the story below)
    assert loop[0].endswith(f":{r1.port}") and loop[4:6] == ["2", "3"] and loop[7] == "link up"
    assert loop[6] not in ("", "-")
    story = timeline.split(f":{r1.port}</h3>", 1)[1].split("</table>", 1)[0]
    whats = [cells(row)[1] for row in re.findall(r"<tr>(.*?)</tr>", story)[1:]]
    assert [w.split(",")[:3] for w in whats] == [
        ["full sync (diskless)", " failed", " cause no-history"],
        ["full sync (diskless)", " failed", " cause output-buffer-limit"],
        ["full sync (diskless)", " ok", " cause output-buffer-limit"]], whats
    assert all("master-output buffer peak" in w for w in whats)
    assert [("failed: output-buffer-limit" in w) for w in whats] == [True, True, False]
    assert (tmp_path / "report" / "link_timeline.png").stat().st_size > 0
