"""Benchmark of ``pyrepl metrics --follow``: does it keep up with a fleet's logs growing at
``--rate`` events a second, and how old is what it publishes?

Theory of operation: ``tests/analytics/synth.py`` writes a fleet's sync logs once (750
nodes over the run's seconds: its events' times advance as the writer's clock does, so each
micro-batch holds a few seconds of the fleet, as it would live); a writer thread then appends
them to the followed directory as a fleet would, ``--rate`` lines a second in ticks of 0.1 s,
every file its share of whole lines, for ``--seconds``, recording how many lines were written
when. The follower runs as the command does (its own process and JVM, ``local[2]``,
``--trigger``); the bench polls its summary.json and, for each trigger published, takes its
age: the time since the writer had written as many lines as the summary counts (the newest
line it holds). Each trigger's processing time comes from the follower's own lines. When the
writer stops, the follower must catch up within two triggers. For scale, the batch job
(``pyrepl metrics``, a process of its own) then reads the same files once, in the same run:
its events a second against the rate followed.

Times on a shared machine drift (the same commit's run has varied two-fold from one hour to
the next here), so the run also reports what drifts less: the follower's own CPU seconds (its
process tree's, from the writer's start to caught up) a million lines, and the share of the
machine's CPU time its hypervisor stole meanwhile.

    .venv/bin/python bench/bench_follow.py [--rate 50000] [--seconds 120] [--trigger 10]
        [--masters 250] [--incidents 30] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
TICK_S = 0.1


def line_offsets(path: str) -> list[int]:
    """The byte offset after each line of ``path``."""
    out, pos = [], 0
    with open(path, "rb") as f:
        for line in f:
            pos += len(line)
            out.append(pos)
    return out


class Writer(threading.Thread):
    """Appends the source files' lines to ``dest`` at ``rate`` lines a second."""

    def __init__(self, src: str, dest: str, rate: float, seconds: float) -> None:
        super().__init__(daemon=True)
        self.files = []
        for root, _, names in os.walk(src):
            for n in sorted(names):
                p = os.path.join(root, n)
                self.files.append((p, os.path.join(dest, os.path.relpath(p, src)),
                                   line_offsets(p)))
        self.total = sum(len(o) for _, _, o in self.files)
        self.rate, self.seconds = rate, seconds
        self.marks: list[tuple[float, int]] = []   # (time, lines written so far)
        self.written = 0

    def run(self) -> None:
        done = [0] * len(self.files)
        outs = []
        for _, d, _ in self.files:
            os.makedirs(os.path.dirname(d), exist_ok=True)
            outs.append(open(d, "ab"))  # noqa: SIM115 - closed below
        ins = [open(p, "rb") for p, _, _ in self.files]  # noqa: SIM115
        t0 = time.monotonic()
        k = 0
        try:
            while True:
                k += 1
                target = min(self.total, int(self.rate * TICK_S * k))
                for i, (_, _, offs) in enumerate(self.files):
                    want = min(len(offs), target * len(offs) // self.total)
                    if want > done[i]:
                        a = offs[done[i] - 1] if done[i] else 0
                        ins[i].seek(a)
                        outs[i].write(ins[i].read(offs[want - 1] - a))
                        outs[i].flush()
                        self.written += want - done[i]
                        done[i] = want
                self.marks.append((time.time(), self.written))
                if k * TICK_S >= self.seconds or self.written >= self.total:
                    break
                time.sleep(max(0.0, t0 + k * TICK_S - time.monotonic()))
        finally:
            for f in outs + ins:
                f.close()

    def written_at(self, lines: int) -> float | None:
        """When the writer had written ``lines`` lines."""
        for t, n in self.marks:
            if n >= lines:
                return t
        return None


def machine_cpu() -> list[int]:
    """/proc/stat's first line: the machine's CPU time by state, in ticks."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of process ``root`` and every process under it, with
    what their ended children had used."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(d)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))  # ppid, times
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
            todo += [p for p, (pp, _) in stats.items() if pp == pid]
    return total / tick


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * len(xs) + 0.5) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=50_000)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--trigger", type=float, default=10)
    ap.add_argument("--masters", type=int, default=250, help="masters of 2 replicas each")
    ap.add_argument("--incidents", type=float, default=30,
                    help="link incidents an hour, per link (syncs)")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "pyrepl-bfollow"))
    ap.add_argument("--json")
    args = ap.parse_args()
    from tests.analytics.synth import FleetSpec, write_fleet

    n = int(args.rate * args.seconds)
    # a fleet whose events span the run's own seconds (replayed in real time, as it would
    # have written them): 750 nodes, a lag sample of each of its 500 links every ~10 ms
    spec = FleetSpec(masters=args.masters, replicas_per_master=2, duration_s=args.seconds,
                     lag_period_s=args.masters * 2 * args.seconds * 0.985 / n,
                     incidents_per_hour=args.incidents, seed=1)
    src = os.path.join(args.data, f"src-{n}-{args.masters}-{args.incidents:g}")
    if not os.path.isdir(src):
        print(f"writing a fleet of ~{n:,} events to {src}", flush=True)
        write_fleet(spec, src + ".tmp", max_file_bytes=1 << 40, processes=2)
        os.rename(src + ".tmp", src)
    run_dir = os.path.join(args.data, "run")
    shutil.rmtree(run_dir, ignore_errors=True)
    follow, out, ckpt = (os.path.join(run_dir, d) for d in ("follow", "out", "ckpt"))
    os.makedirs(follow)
    writer = Writer(src, follow, args.rate, args.seconds)
    log_path = os.path.join(run_dir, "follower.log")
    argv = [sys.executable, "-m", "pyrepl.cli.main", "metrics", "--follow", follow, "--out", out,
            "--checkpoint", ckpt, "--trigger", f"{args.trigger:g}", "--progress"]
    env = {**os.environ, "CI": "1"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    published: list[tuple[float, int]] = []   # (time seen, events)
    try:
        deadline = time.monotonic() + 120
        while "following" not in open(log_path).read():
            assert proc.poll() is None and time.monotonic() < deadline, open(log_path).read()
            time.sleep(0.2)
        print(f"writing {writer.total:,} lines at {args.rate:,.0f}/s for {args.seconds:g} s",
              flush=True)
        cpu0, m0 = tree_cpu_s(proc.pid), machine_cpu()
        writer.start()
        last_mtime = 0.0
        summary_path = os.path.join(out, "summary.json")
        stop_at = None
        while True:
            assert proc.poll() is None, open(log_path).read()[-3000:]
            try:
                m = os.stat(summary_path).st_mtime
            except OSError:
                m = 0.0
            if m != last_mtime:
                last_mtime = m
                with open(summary_path) as f:
                    ev = json.load(f)["input"]["events"]
                published.append((time.time(), ev))
            if not writer.is_alive():
                stop_at = stop_at or time.monotonic()
                if published and published[-1][1] >= writer.written:
                    break
                if time.monotonic() - stop_at > 4 * args.trigger + 120:
                    raise SystemExit("the follower did not catch up")
            time.sleep(0.1)
        caught_up_s = time.monotonic() - stop_at
        follower_cpu = tree_cpu_s(proc.pid) - cpu0
        dm = [b - a for a, b in zip(m0, machine_cpu(), strict=True)]
    finally:
        proc.terminate()
        proc.wait(60)
    text = open(log_path).read()
    trig = [float(x) for x in re.findall(r"trigger \d+: [\d,]+ events.*\(([\d.]+) s\)", text)]
    ages = []
    for t, ev in published:
        w = writer.written_at(ev)
        if w is not None and ev > 0:
            ages.append(t - w)
    span = writer.marks[-1][0] - writer.marks[0][0]
    achieved = writer.written / span if span > 0 else 0.0
    # the batch job over the same files, once
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics", follow, "--out",
                    os.path.join(run_dir, "batch"), "--quiet"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    batch_s = time.monotonic() - t0
    res = {
        "rate_asked": args.rate, "rate_written": round(achieved), "lines": writer.written,
        "trigger_s": args.trigger, "triggers": len(trig),
        "processing_s": {"p50": statistics.median(trig[1:] or trig), "max": max(trig[1:] or trig),
                         "first": trig[0]},
        "age_s": {"p50": statistics.median(ages), "p90": pct(ages, 0.9), "max": max(ages)},
        "caught_up_after_stop_s": caught_up_s,
        "batch_job_s": batch_s, "batch_events_per_s": writer.written / batch_s,
        # the follower's own CPU (driver, JVM, Python workers) from the writer's start to
        # caught up; the machine's CPU stolen by its hypervisor meanwhile (a shared machine)
        "follower_cpu_s": follower_cpu,
        "follower_cpu_s_per_m_lines": follower_cpu / (writer.written / 1e6),
        "steal_share": dm[7] / sum(dm) if sum(dm) else 0.0,
    }
    print(json.dumps(res, indent=2))
    print(f"\nfollowed {achieved:,.0f} events/s ({writer.written:,} lines); "
          f"{len(trig)} triggers of {args.trigger:g} s: processing p50 "
          f"{res['processing_s']['p50']:.1f} s, max {res['processing_s']['max']:.1f} s "
          f"(first {trig[0]:.1f} s); published data's age p50 {res['age_s']['p50']:.1f} s, "
          f"p90 {res['age_s']['p90']:.1f} s, max {res['age_s']['max']:.1f} s; caught up "
          f"{caught_up_s:.1f} s after the writer stopped; the follower's CPU "
          f"{follower_cpu:.0f} s ({res['follower_cpu_s_per_m_lines']:.1f} s a million "
          f"lines), the machine's steal {100 * res['steal_share']:.1f} %. Batch job over "
          f"the same files: {batch_s:.1f} s ({res['batch_events_per_s']:,.0f} events/s).")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
