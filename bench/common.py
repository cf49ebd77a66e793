"""Shared helpers for the side-by-side benchmarks: start pyrepl and real redis-server on free
loopback ports, run redis-benchmark, take medians, write results."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from support import ServerProcess, free_port, start_pyrepl, start_redis  # noqa: E402,F401


def redis_benchmark(port: int, tests: str, n: int, clients: int, pipeline: int,
                    extra: list[str] | None = None, timeout: float = 600) -> dict[str, float]:
    """Run redis-benchmark --csv; returns {test name: requests per second}."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", tests, "-n", str(n),
            "-c", str(clients), "-P", str(pipeline), "--csv", *(extra or [])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True).stdout
    res: dict[str, float] = {}
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0] != "test":
            try:
                res[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return res


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def tmpdir(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix)
