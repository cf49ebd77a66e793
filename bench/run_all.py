"""Run the side-by-side benchmarks (pyrepl vs redis-server in the same run) and print them.

    .venv/bin/python bench/run_all.py            # what `make bench` runs
"""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = ["bench_throughput.py", "bench_dataset.py", "bench_replication.py",
           "bench_dispatch.py", "bench_resp_reader.py", "bench_aof.py", "bench_analytics.py"]


def main() -> int:
    rc = 0
    for s in SCRIPTS:
        print(f"\n##### {s}", flush=True)
        rc |= subprocess.call([sys.executable, os.path.join(HERE, s)], cwd=HERE)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
