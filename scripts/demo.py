"""The README's main command: a master and a replica from conf/, data written on the master and
read back from the replica, the link cut and resumed with +CONTINUE, a promotion, and last the
sync-analytics job (``pyrepl metrics``) over the sync logs the two servers wrote.

Starts real processes on loopback (ports 6380 and 6381), talks to them with redis-py, shows
what INFO says at each step, and stops them again.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MASTER, REPLICA = 6380, 6381


def wait(cond, timeout: float = 30.0, what: str = "condition"):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except redis.exceptions.RedisError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"demo: timed out waiting for {what}")


def start(args: list[str], log: str) -> subprocess.Popen:
    os.makedirs(os.path.dirname(log), exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "pyrepl.cli.main", *args], cwd=ROOT,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
                            stdin=subprocess.DEVNULL)


def info(r: redis.Redis, section: str, *fields: str) -> str:
    i = r.info(section)
    return "  ".join(f"{f}={i.get(f)}" for f in fields)


def step(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 72 - len(title)), flush=True)


def main() -> int:
    for d in ("var/master", "var/replica", "var/metrics"):
        shutil.rmtree(os.path.join(ROOT, d), ignore_errors=True)
    procs: list[subprocess.Popen] = []
    # No diskless delay, and a snapshot child slowed by a 20 us sleep per key (Redis's own
    # testing knob; a sleep that short lasts ~0.1 ms) so the 100k-key snapshot takes seconds
    # and the writes made meanwhile are visible.
    # A lag sample (sync log) every second instead of every 10 s, for the metrics at the end.
    fast = ["--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "20",
            "--repl-ping-replica-period", "1"]
    try:
        step("master from conf/master.conf")
        procs.append(start(["master", "--config", "conf/master.conf", *fast],
                           "var/master/pyrepl.log"))
        m = redis.Redis(port=MASTER, socket_timeout=10)
        wait(m.ping, what="the master")
        m.execute_command("DEBUG", "POPULATE", "100000", "key", "100")
        pipe = m.pipeline(transaction=False)
        for i in range(1000):
            pipe.set(f"user:{i}", f"name-{i}", ex=3600)
            pipe.hset(f"profile:{i}", mapping={"visits": i, "plan": "free"})
            pipe.zadd("leaderboard", {f"user:{i}": i * 1.5})
            pipe.rpush("events", f"login:{i}")
        pipe.execute()
        print(f"master :{MASTER}  DBSIZE={m.dbsize()}  "
              + info(m, "replication", "role", "master_replid", "master_repl_offset"))

        step("replica from conf/replica.conf: full sync over the rdb channel, under writes")
        stop = threading.Event()
        states: list[str] = []
        peak = [0]

        def writer() -> None:
            w = redis.Redis(port=MASTER, socket_timeout=10)
            i = 0
            while not stop.is_set() and i < 200_000:
                p = w.pipeline(transaction=False)
                for _ in range(100):
                    p.set(f"during-sync:{i}", "x" * 64)
                    i += 1
                p.execute()

        def sampler() -> None:
            q = redis.Redis(port=MASTER, socket_timeout=10)
            while not stop.is_set():
                mem = q.info("memory")["mem_total_replication_buffers"]
                peak[0] = max(peak[0], mem)
                st = q.info("replication").get("slave0", {}).get("state")
                if st and (not states or states[-1] != st):
                    states.append(st)
                time.sleep(0.01)

        threads = [threading.Thread(target=writer), threading.Thread(target=sampler)]
        for t in threads:
            t.start()
        procs.append(start(["replica", "--master", f"127.0.0.1:{MASTER}", "--config",
                            "conf/replica.conf", "--repl-ping-replica-period", "1"],
                           "var/replica/pyrepl.log"))
        s = redis.Redis(port=REPLICA, socket_timeout=10)
        wait(lambda: s.info("replication")["master_link_status"] == "up", what="link up")
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(30)
        rinfo = s.info("replication")
        print(f"master slave0 states seen: {' -> '.join(states)}")
        print(f"master peak mem_total_replication_buffers: {peak[0]:,} bytes "
              f"(repl-backlog-size {m.info('replication')['repl_backlog_size']:,}): the writes "
              f"made during the sync streamed to the replica at once")
        print(f"replica replica_full_sync_buffer_peak: {rinfo['replica_full_sync_buffer_peak']:,}"
              f" bytes buffered on the replica while it loaded the snapshot; now "
              f"{rinfo['replica_full_sync_buffer_size']:,}")
        m.set("written-after-sync", "hello from the master")
        wait(lambda: s.get("written-after-sync"), what="the write to reach the replica")
        print("replica: " + info(s, "replication", "role", "master_link_status",
                                 "slave_repl_offset", "master_replid"))
        print(f"read back from the replica: written-after-sync = "
              f"{s.get('written-after-sync').decode()!r}, DBSIZE = {s.dbsize()}")
        wait(lambda: m.execute_command("DEBUG", "DIGEST") == s.execute_command("DEBUG", "DIGEST"),
             what="equal digests")
        print(f"DEBUG DIGEST master == replica: {m.execute_command('DEBUG', 'DIGEST')}")
        print("master: " + info(m, "stats", "sync_full", "sync_partial_ok", "sync_partial_err"))

        step("cut the link (CLIENT KILL TYPE replica), write, watch it resume with +CONTINUE")
        before = m.info("stats")["sync_partial_ok"]
        m.execute_command("CLIENT", "KILL", "TYPE", "replica")
        for _ in range(100):
            m.incr("during-the-cut")
        wait(lambda: m.info("stats")["sync_partial_ok"] == before + 1, what="partial resync")
        wait(lambda: s.get("during-the-cut") == b"100", what="the replica to catch up")
        print("master: " + info(m, "stats", "sync_full", "sync_partial_ok"))
        print(f"replica caught up: during-the-cut = {s.get('during-the-cut').decode()}")

        step("promotion: REPLICAOF NO ONE on the replica, old master follows it")
        s.execute_command("REPLICAOF", "NO", "ONE")
        print("promoted: " + info(s, "replication", "role", "master_replid", "master_replid2",
                                  "second_repl_offset"))
        s.set("written-on-the-new-master", "1")
        m.execute_command("REPLICAOF", "127.0.0.1", str(REPLICA))
        wait(lambda: m.info("replication").get("master_link_status") == "up", what="repoint")
        wait(lambda: m.get("written-on-the-new-master") == b"1", what="the stream")
        print("new master: " + info(s, "stats", "sync_full", "sync_partial_ok")
              + "   (the old master continued partially through replid2)")
        print("old master now: " + info(m, "replication", "role", "master_port",
                                        "master_link_status"))
        print("\nsync events logged to var/master/sync-events.ndjson and "
              "var/replica/sync-events.ndjson; server logs in var/*/pyrepl.log")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
    return metrics()


def metrics() -> int:
    """The demo's own sync logs through the analytics job (servers stopped: logs complete)."""
    step("pyrepl metrics over the demo's sync logs (PySpark, local[*])")
    logs = sorted(glob.glob(os.path.join(ROOT, "var", "*", "sync-events.ndjson*")))
    out = os.path.join(ROOT, "var", "metrics")
    argv = [sys.executable, "-m", "pyrepl.cli.main", "metrics", *logs, "--out", out]
    print("$ pyrepl metrics " + " ".join(os.path.relpath(x, ROOT) for x in logs)
          + " --out var/metrics", flush=True)
    rc = subprocess.call(argv, cwd=ROOT, stdin=subprocess.DEVNULL)
    if rc != 0:
        print(f"demo: pyrepl metrics exited with {rc}", file=sys.stderr)
        return rc
    print(f"\nreport: {os.path.join(out, 'report.html')}  (summary.json, the PNG charts and "
          f"tables/ beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
