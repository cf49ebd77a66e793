"""The follower's chart workers (``chartpool.ChartPool``) end with the process that started
them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILLED = """
import os, signal, sys, time
from pyrepl.analytics.chartpool import ChartPool
if __name__ == "__main__":
    pool = ChartPool()
    pool.start()
    deadline = time.monotonic() + 60
    while len(pool.pids()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    print(" ".join(map(str, pool.pids())), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_end_when_their_parent_is_killed(tmp_path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    out = tmp_path / "pids"
    with open(out, "w") as f:
        rc = subprocess.run([sys.executable, str(script)], cwd=ROOT, stdout=f, timeout=120,
                            check=False).returncode
    assert rc == -signal.SIGKILL
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == 2
    try:
        deadline = time.monotonic() + 20
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pids), [p for p in pids if alive(p)]
    finally:
        for p in pids:
            if alive(p):
                os.kill(p, signal.SIGKILL)
