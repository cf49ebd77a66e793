"""A full sync cut halfway: what the rest costs, Redis 7.0.15 against pyrepl with and without
the resume.

    .venv/bin/python bench/bench_resume.py [--gb 2] [--value-kb 100] [--cut 0.5]
                                           [--diskless yes|no] [--json FILE]

Theory of operation: the pairs run in the same run, one after the other: Redis 7.0.15 master
and replica; pyrepl master and replica with ``repl-full-sync-resume-window 0`` (a cut sync
starts over, as Redis's); pyrepl with the default window (it resumes); and, diskless only,
pyrepl with the default window over the rdb channel (``pyrepl-rdbch-resume``: the default
between pyrepl nodes; the others use the classic one connection, ``repl-rdb-channel no``).
Each master holds ``--gb`` GB of ``--value-kb`` KB strings (``DEBUG POPULATE``) saved without
compression (``rdbcompression no``), so the payload is that big; the diskless sync
(``--diskless yes``, the default) or the disk one (``no``). For each pair: first an uncut sync (REPLICAOF until
the replica's offset is the master's), timed, with the payload's bytes (the master's
``total_net_repl_output_bytes``); then a fresh replica, cut when it has read ``--cut`` of that
payload (``master_sync_read_bytes``; ``CLIENT KILL TYPE replica`` on the master), and timed
until it is in sync. Reported: the uncut sync's seconds and MB; for the cut one, the seconds
and the master's MB sent after the cut, and their ratio to the uncut sync. Goal (issue 40): a
cut at 50 % costs the remaining half with the resume (ratio ~0.5), where it costs the whole
(ratio ~1) when the sync starts over.
"""

from __future__ import annotations

import argparse
import os
import time

from bench_replication import HOST, Conn, stop_server, wait_until
from common import run_kinds, start_pyrepl, start_redis, tmpdir

KINDS = ("redis", "pyrepl-restart", "pyrepl-resume", "pyrepl-rdbch-resume")


def _out_bytes(m: Conn) -> int:
    return int(m.info("stats")["total_net_repl_output_bytes"])


def _start(kind: str, role: str, diskless: str):  # noqa: ANN202
    d = tmpdir(f"bench-resume-{kind}-{role}-")
    if kind == "redis":
        extra = ["--enable-debug-command", "yes", "--rdbcompression", "no",
                 "--repl-diskless-sync-delay", "0", "--repl-diskless-sync", diskless]
        return start_redis(*extra, tmpdir=d)
    extra = ["--rdbcompression", "no", "--repl-diskless-sync-delay", "0",
             "--repl-diskless-sync", diskless]
    if kind != "pyrepl-rdbch-resume":
        extra += ["--repl-rdb-channel", "no"]
    if kind == "pyrepl-restart":
        extra += ["--repl-full-sync-resume-window", "0"]
    return start_pyrepl(*extra, tmpdir=d)


def _sync(m: Conn, master_port: int, rep: Conn, cut: int | None, timeout: float
          ) -> tuple[float, int, float]:
    """REPLICAOF until in sync: (seconds, master bytes sent, seconds at the cut)."""
    out0 = _out_bytes(m)
    t0 = time.perf_counter()
    rep.cmd("REPLICAOF", HOST, master_port)
    at_cut = 0.0
    out_cut = out0
    if cut is not None:
        wait_until(lambda: int(rep.info("replication").get("master_sync_read_bytes", 0) or 0)
                   >= cut, timeout, 0.005, "the cut point")
        m.cmd("CLIENT", "KILL", "TYPE", "replica")
        at_cut = time.perf_counter() - t0
        out_cut = _out_bytes(m)

    def synced() -> bool:
        role = rep.role()
        return role[0] == "connected" and role[1] >= m.role()[1]

    wait_until(synced, timeout, 0.01, "in sync")
    took = time.perf_counter() - t0
    # (a pyrepl master counts a diskless transfer's bytes when it reaps the child, which may
    # come a moment after the replica is in sync: an rdb channel's after the replica closed it)
    base = out_cut if cut is not None else out0
    wait_until(lambda: int(m.info("persistence")["rdb_bgsave_in_progress"]) == 0, 60, 0.01,
               "the snapshot child's end")
    wait_until(lambda: _out_bytes(m) > base, 30, 0.01, "the transfer counted")
    return took, _out_bytes(m) - base, at_cut


def run(kind: str, args: argparse.Namespace) -> dict[str, object]:
    master = _start(kind, "master", args.diskless)
    replicas = []
    try:
        m = Conn(master.port, timeout=600)
        value = args.value_kb * 1024
        keys = int(args.gb * (1 << 30) / value)
        m.cmd("DEBUG", "POPULATE", keys, "key", value)
        out: dict[str, object] = {}
        # uncut
        replicas.append(_start(kind, "replica", args.diskless))
        r = Conn(replicas[-1].port, timeout=600)
        took, sent, _ = _sync(m, master.port, r, None, args.timeout)
        out["uncut s"] = round(took, 1)
        out["uncut MB"] = round(sent / 2**20)
        r.close()
        stop_server(replicas.pop())
        # cut at args.cut of the payload
        replicas.append(_start(kind, "replica", args.diskless))
        r = Conn(replicas[-1].port, timeout=600)
        took2, after, at_cut = _sync(m, master.port, r, int(sent * args.cut), args.timeout)
        out["cut: total s"] = round(took2, 1)
        out["cut: after the cut s"] = round(took2 - at_cut, 1)
        out["cut: MB after the cut"] = round(after / 2**20)
        out["after the cut / uncut (time)"] = round((took2 - at_cut) / took, 2)
        out["after the cut / uncut (bytes)"] = round(after / max(1, sent), 2)
        out["full syncs"] = int(m.info("stats")["sync_full"])
        r.close()
        m.close()
        return out
    finally:
        for rp in replicas:
            stop_server(rp)
        stop_server(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--value-kb", type=int, default=100)
    ap.add_argument("--cut", type=float, default=0.5)
    ap.add_argument("--diskless", default="yes", help="the masters' repl-diskless-sync")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",")
             if args.diskless == "yes" or k != "pyrepl-rdbch-resume"]   # (a diskless dialect)
    return run_kinds(kinds, run, args,
                     f"{args.gb} GB of {args.value_kb} KB strings, cut at {args.cut:.0%}, "
                     f"repl-diskless-sync {args.diskless}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
