"""The README's main command: a pyrepl master from conf/master.conf, some data, its INFO.

Starts real processes on loopback, talks to them with redis-py, and stops them again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_ping(port: int, timeout: float = 15.0) -> redis.Redis:
    deadline = time.monotonic() + timeout
    r = redis.Redis(port=port, socket_timeout=5)
    while time.monotonic() < deadline:
        try:
            if r.ping():
                return r
        except redis.exceptions.ConnectionError:
            time.sleep(0.1)
    raise SystemExit(f"server on port {port} did not start")


def start(args: list[str], log: str) -> subprocess.Popen:
    os.makedirs(os.path.dirname(log), exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "pyrepl.cli.main", *args],
                            cwd=ROOT, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def show(title: str, text: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))
    print(text.rstrip())


def main() -> int:
    port = 6380
    procs: list[subprocess.Popen] = []
    try:
        master = start(["master", "--config", "conf/master.conf"], "var/master/master.log")
        procs.append(master)
        r = wait_ping(port)
        r.flushall()
        print(f"master pid {master.pid} listening on 127.0.0.1:{port} (conf/master.conf)")
        r.execute_command("DEBUG", "POPULATE", "10000", "key", "100")
        pipe = r.pipeline(transaction=False)
        for i in range(1000):
            pipe.set(f"user:{i}", f"name-{i}", ex=3600)
            pipe.hset(f"profile:{i}", mapping={"visits": i, "plan": "free"})
            pipe.zadd("leaderboard", {f"user:{i}": i * 1.5})
            pipe.rpush("events", f"login:{i}")
        pipe.execute()
        r.incr("counter", 41)
        r.incr("counter")
        show("data", f"DBSIZE = {r.dbsize()}  counter = {r.get('counter').decode()}  "
             f"top = {r.zrevrange('leaderboard', 0, 2, withscores=True)}")
        r.save()
        info = r.execute_command("INFO", "server", "persistence", "replication", "keyspace")
        show("INFO server persistence replication keyspace", info if isinstance(info, str)
             else info.decode())
        show("DEBUG DIGEST", str(r.execute_command("DEBUG", "DIGEST")))
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    sys.exit(main())
