"""Benchmark of ``pyrepl metrics`` (the PySpark sync-analytics job) on synthetic fleet logs.

Theory of operation: ``tests/analytics/synth.py`` writes a fleet's sync logs in the real schema
(75 nodes: 25 masters with 2 replicas each, one day, rotated files per node) at 1M, 5M and 20M
events, with lag samples as pyrepl writes them (compact; ``--lag-format v1``: as it wrote them
before, ~253 bytes a line instead of ~165); ``pyrepl metrics --convert-to parquet`` converts
each once. Every run is the real
command in its own process on ``local[2]`` with the default 1 GB driver, timed from launch to
exit (so the 5-15 s of JVM and session start-up count), while a sampler adds up the memory
(PSS: resident pages, shared ones split) of the process tree (the Python driver and its JVM)
every 0.2 s, each address space once (see ``tree_rss``). The cluster path is measured the same
way: a standalone Spark master and one worker (2 cores, 1 GB executor) are started from the
pyspark installation's own ``bin/spark-class`` on loopback, and the job is sent to them with
``spark-submit pyrepl/analytics/submit.py``. Only the processes started here are stopped, by
their PIDs. Goals (issue 16): 20M NDJSON <= 45 s, 20M Parquet <= 20 s, an incident's few
thousand lines (``--small``) <= 15 s; peak memory <= 1.5 GB.

    .venv/bin/python bench/bench_analytics.py [--sizes 1,5,20] [--data DIR] [--no-cluster]
        [--small] [--lag-format compact|v1] [--repeat N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from common import write_json  # noqa: E402

from tests.analytics.synth import FleetSpec, spec_for_events, write_fleet  # noqa: E402

# issue 16: 20M events in 45 s from NDJSON, 20 s from Parquet; an incident's few thousand
# lines in 15 s, JVM start included
GOALS = {("ndjson", 20): 45.0, ("parquet", 20): 20.0}
SMALL_GOAL = 15.0
MEM_GOAL = 1.5 * 1024 ** 3


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _proc_kb(pid: int, name: str, key: str) -> int | None:
    """The ``key:`` line of /proc/PID/NAME in bytes (the kernel writes kB), or None."""
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _pss(pid: int) -> int:
    """Bytes of PSS of one process (RSS with shared pages split among their sharers), or its
    VmRSS where smaps_rollup is missing."""
    pss = _proc_kb(pid, "smaps_rollup", "Pss:")
    return pss if pss is not None else _proc_kb(pid, "status", "VmRSS:") or 0


# kcmp(2)'s syscall number (KCMP_VM: do two processes share one address space?)
_KCMP = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
_libc = None


def same_address_space(a: int, b: int) -> bool | None:
    """Whether processes ``a`` and ``b`` share one address space (Linux ``kcmp(KCMP_VM)``);
    None when that cannot be told (no kcmp here, a process gone, no permission)."""
    global _libc
    if _KCMP is None:
        return None
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    r = _libc.syscall(_KCMP, a, b, 1, 0, 0)  # 1: KCMP_VM
    return None if r < 0 else r == 0


def tree_rss(root: int) -> int:
    """Bytes of memory of ``root`` and all its descendants: the sum of their PSS, each address
    space once. (Summing RSS would count a JVM twice for the instant a forked helper exists
    before its exec. PSS splits the pages a fork shares, but not those of a child made with
    ``CLONE_VM``: the JVM starts every helper process (Hadoop's ``chmod`` of each file it
    writes, ``rm`` at exit) with ``posix_spawn``, whose child runs in the JVM's own memory until
    it execs, and reads as the JVM's whole PSS again. Such a child, told by ``kcmp``, is not
    counted: a sampler that met one saw ~2 GiB at 20M events for ~1 GiB used.)"""
    kids = _children()
    total, todo = 0, [(root, None)]
    while todo:
        pid, parent = todo.pop()
        todo.extend((k, pid) for k in kids.get(pid, []))
        if parent is not None and same_address_space(pid, parent):
            continue
        total += _pss(pid)
    return total


def measure(argv: list[str], env: dict[str, str] | None = None, timeout: float = 1800,
            extra_pids: list[int] | None = None) -> dict[str, object]:
    """Run argv; wall time, peak tree memory (plus ``extra_pids``' trees), exit code, output."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss = tree_rss(p.pid) + sum(tree_rss(x) for x in (extra_pids or []))
            peak[0] = max(peak[0], rss)
            done.wait(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    done.set()
    th.join()
    return {"seconds": round(time.monotonic() - t0, 1), "peak_mem": peak[0],
            "rc": p.returncode, "stdout": out, "stderr": err}


def phases(stderr: str) -> dict[str, float]:
    """The command's progress lines ("[  12.3s] lag") as {phase: seconds since start}."""
    out = {}
    for m in re.finditer(r"^\[\s*([\d.]+)s\] (.*)$", stderr, re.M):
        out[m.group(2).split(",")[0][:40]] = float(m.group(1))
    return out


def data_dir(data: str, kind: str, millions: int, lag_format: str) -> str:
    """Where the data of one size and lag format lives (``ndjson-20m``, ``parquet-v1-20m``)."""
    tag = "" if lag_format == "compact" else f"{lag_format}-"
    return os.path.join(data, f"{kind}-{tag}{millions}m")


def ensure_data(data: str, millions: int, lag_format: str = "compact") -> dict[str, object]:
    nd = data_dir(data, "ndjson", millions, lag_format)
    marker = os.path.join(nd, "_generated.json")
    if os.path.exists(marker):
        with open(marker) as f:
            return json.load(f)
    shutil.rmtree(nd, ignore_errors=True)
    t = time.monotonic()
    stats = write_fleet(spec_for_events(millions * 1_000_000, lag_format=lag_format), nd,
                        processes=2)
    stats["generate_s"] = round(time.monotonic() - t, 1)
    with open(marker, "w") as f:
        json.dump(stats, f)
    return stats


SMALL_INPUTS = {
    # an incident: one master, two replicas, an hour (~1.6k events)
    "small": FleetSpec(masters=1, replicas_per_master=2, duration_s=3600, lag_period_s=5,
                       incidents_per_hour=6.0, seed=3),
    # about the demo's own logs (a few dozen events)
    "tiny": FleetSpec(masters=1, replicas_per_master=1, duration_s=600, lag_period_s=60,
                      incidents_per_hour=12.0, seed=3),
}


def small_run(data: str, repeat: int = 1) -> list[dict[str, object]]:
    """``pyrepl metrics`` over an incident's worth of lines and a demo's, launch to exit."""
    rows: list[dict[str, object]] = []
    for name, spec in SMALL_INPUTS.items():
        nd = os.path.join(data, f"ndjson-{name}")
        shutil.rmtree(nd, ignore_errors=True)
        stats = write_fleet(spec, nd)
        for _ in range(max(1, repeat)):
            load = os.getloadavg()[0]
            res = measure(metrics_argv([nd], os.path.join(data, f"out-{name}"),
                                       "--spark-master", "local[2]"))
            print(f"{name} ({stats['events']} events): {res['seconds']:6.1f} s, peak mem "
                  f"{res['peak_mem'] / 2**20:6.0f} MiB rc={res['rc']} load {load:.1f} "
                  f"(goal {SMALL_GOAL:.0f} s)", flush=True)
            if res["rc"] != 0:
                print(res["stderr"][-3000:], file=sys.stderr)
            rows.append({"what": f"local[2] {name}", "format": "ndjson",
                         "millions": stats["events"] / 1e6, "events": stats["events"],
                         "input_bytes": stats["bytes"], "seconds": res["seconds"],
                         "peak_mem": res["peak_mem"], "rc": res["rc"], "load_before": load,
                         "goal_s": SMALL_GOAL, "phases": phases(res["stderr"])})
    return rows


def metrics_argv(paths: list[str], out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pyrepl.cli.main", "metrics", *paths, "--out", out,
            "--progress", "--conf", "spark.ui.showConsoleProgress=false", *extra]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


def cluster_run(paths: list[str], out: str, workdir: str) -> dict[str, object]:
    """A standalone master + worker from pyspark's bin/spark-class, then spark-submit."""
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": os.path.join(workdir, "work"),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    cls = os.path.join(home, "bin", "spark-class")
    mport, mui, wui = free_port(), free_port(), free_port()
    logs = []
    procs: list[subprocess.Popen] = []
    try:
        for name, argv in (
                ("master", [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                            "--port", str(mport), "--webui-port", str(mui)]),
                ("worker", [cls, "org.apache.spark.deploy.worker.Worker",
                            f"spark://127.0.0.1:{mport}", "--host", "127.0.0.1", "--cores", "2",
                            "--memory", "1g", "--webui-port", str(wui)])):
            log = open(os.path.join(workdir, f"{name}.log"), "w")  # noqa: SIM115
            logs.append(log)
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env))
            if name == "master":
                wait_port(mport)
        wait_port(wui)  # the worker is up (and registered right after)
        submit = os.path.join(home, "bin", "spark-submit")
        import pyrepl.analytics.submit as entry

        log4j = os.path.join(ROOT, "pyrepl", "analytics", "log4j2.properties")
        argv = [submit, "--master", f"spark://127.0.0.1:{mport}",
                "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.memory=1g",
                "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false",
                "--driver-java-options", f"-Dlog4j2.configurationFile=file:{log4j}",
                entry.__file__, *paths, "--out", out, "--progress"]
        res = measure(argv, env=env, extra_pids=[p.pid for p in procs])
        res["master"] = f"spark://127.0.0.1:{mport}"
        return res
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for log in logs:
            log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,5,20", help="millions of events, comma separated")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(),
                                                   "pyrepl-bench-analytics"))
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument("--cluster-size", type=int, default=5, help="millions for the cluster run")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--small", action="store_true",
                    help="also time an incident-sized input (one master, two replicas, an "
                         "hour: ~2k events)")
    ap.add_argument("--lag-format", choices=("compact", "v1"), default="compact",
                    help="lag samples as pyrepl writes them (compact) or wrote them before (v1)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time each metrics run N times (the machine is shared: the spread "
                         "shows the disturbance)")
    args = ap.parse_args()
    os.makedirs(args.data, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    results: dict[str, object] = {"cpus": os.cpu_count(), "load_before": load, "runs": []}
    runs: list[dict[str, object]] = results["runs"]  # type: ignore[assignment]
    if args.small:
        runs.extend(small_run(args.data, args.repeat))
    for n in sizes:
        stats = ensure_data(args.data, n, args.lag_format)
        nd = data_dir(args.data, "ndjson", n, args.lag_format)
        pq = data_dir(args.data, "parquet", n, args.lag_format)
        if not os.path.exists(os.path.join(pq, "_SUCCESS")):
            conv = measure([sys.executable, "-m", "pyrepl.cli.main", "metrics", nd,
                            "--convert-to", "parquet", pq, "--spark-master", "local[2]",
                            "--quiet"])
            runs.append({"what": "convert", "format": "ndjson->parquet", "millions": n,
                         "lag_format": args.lag_format, "load_before": os.getloadavg()[0],
                         "seconds": conv["seconds"], "peak_mem": conv["peak_mem"],
                         "rc": conv["rc"]})
            print(f"convert {n}M: {conv['seconds']} s rc={conv['rc']}", flush=True)
            if conv["rc"] != 0:
                print(conv["stderr"][-3000:], file=sys.stderr)
                shutil.rmtree(pq, ignore_errors=True)
        for fmt, path in (("ndjson", nd), ("parquet", pq)):
            if not os.path.exists(path):
                continue
            out = os.path.join(args.data, f"out-{fmt}-{n}m")
            for _ in range(max(1, args.repeat)):
                load = os.getloadavg()[0]
                res = measure(metrics_argv([path], out, "--spark-master", "local[2]"))
                row = {"what": "local[2]", "format": fmt, "millions": n,
                       "lag_format": args.lag_format, "events": stats["events"],
                       "input_bytes": stats["bytes"], "seconds": res["seconds"],
                       "peak_mem": res["peak_mem"], "rc": res["rc"], "load_before": load,
                       "phases": phases(res["stderr"])}
                goal = GOALS.get((fmt, n))
                if goal:
                    row["goal_s"] = goal
                runs.append(row)
                print(f"{fmt:7s} {n:3d}M: {res['seconds']:6.1f} s, peak mem "
                      f"{res['peak_mem'] / 2**20:6.0f} MiB rc={res['rc']} load {load:.1f}"
                      + (f" (goal {goal:.0f} s)" if goal else ""), flush=True)
                if res["rc"] != 0:
                    print(res["stderr"][-3000:], file=sys.stderr)
    if not args.no_cluster:
        n = args.cluster_size
        stats = ensure_data(args.data, n, args.lag_format)
        work = tempfile.mkdtemp(prefix="pyrepl-spark-standalone-")
        out = os.path.join(args.data, f"out-cluster-{n}m")
        load = os.getloadavg()[0]
        res = cluster_run([data_dir(args.data, "ndjson", n, args.lag_format)], out, work)
        runs.append({"what": "spark-submit standalone (1 worker, 2 cores)", "format": "ndjson",
                     "millions": n, "lag_format": args.lag_format, "load_before": load,
                     "events": stats["events"], "seconds": res["seconds"],
                     "peak_mem": res["peak_mem"], "rc": res["rc"], "master": res["master"],
                     "phases": phases(res["stderr"])})
        print(f"cluster {n}M: {res['seconds']} s (driver + master + worker + executor PSS "
              f"{res['peak_mem'] / 2**20:.0f} MiB) rc={res['rc']}", flush=True)
        if res["rc"] != 0:
            print(res["stderr"][-3000:], file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    print("\n| run | format | events | input | time | peak memory (PSS) | load |\n"
          "|---|---|---|---|---|---|---|")
    for r in runs:
        size = f"{r['input_bytes'] / 2**30:.2f} GiB" if r.get("input_bytes") else "-"
        print(f"| {r['what']} | {r['format']} | {r['millions']}M | {size} | {r['seconds']} s "
              f"| {r['peak_mem'] / 2**20:.0f} MiB | {r.get('load_before', float('nan')):.1f} |")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
