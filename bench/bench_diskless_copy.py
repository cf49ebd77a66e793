"""What the diskless child's copy for resumed syncs costs an uncut transfer.

    .venv/bin/python bench/bench_diskless_copy.py [--mb 1024] [--rounds 5] [--json FILE]

Theory of operation: the very loop a diskless snapshot child runs
(``pyrepl.net.master_io.stream_to_sockets``) writes ``--mb`` MB of 1 MB chunks to a socket
pair read by a thread (a replica that reads as fast as loopback lets it), in this process,
three ways, alternated round by round (their medians): no copy (``window 0``, as Redis); the
whole payload copied to an unlinked file in ``dir`` beside the socket (pyrepl before: the tail
0); and the copy kept as a 32 MB tail in memory, written only once a target fails (pyrepl now:
no target fails here, so only the tail goes to the file at the end). Reported: seconds and
their ratio to no copy. Goal (issue 40): a resumable uncut sync costs what an unresumable one
does.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import threading
import time

from pyrepl.net.master_io import stream_to_sockets

KINDS = {"no copy": None, "whole copy (tail 0)": 0, "32 MB tail": 32 << 20}


def _one(chunks: list[bytes], tail: int | None, directory: str) -> float:
    a, b = socket.socketpair()
    got = [0]

    def read() -> None:
        while True:
            data = b.recv(1 << 20)
            if not data:
                break
            got[0] += len(data)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    r, w = os.pipe()
    fd = -1
    if tail is not None:
        fd, path = tempfile.mkstemp(dir=directory, prefix="copy-")
        os.unlink(path)
    t0 = time.perf_counter()
    try:
        stream_to_sockets([(1, a.fileno(), b"")], lambda: iter(chunks), b"M" * 40, 60_000, w,
                          kept=(fd, tail) if tail is not None else None)
        a.close()
        t.join(60)
        took = time.perf_counter() - t0
    finally:
        os.close(r)
        if fd >= 0:
            os.close(fd)
        b.close()
    assert got[0] == sum(map(len, chunks)) + 40
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    chunks = [bytes([i % 251]) * (1 << 20) for i in range(args.mb)]
    directory = tempfile.mkdtemp(prefix="bench-copy-")
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    for _ in range(args.rounds):
        for name, tail in KINDS.items():
            times[name].append(_one(chunks, tail, directory))
    os.rmdir(directory)
    base = statistics.median(times["no copy"])
    print(f"| {args.mb} MB to a loopback socket pair, median of {args.rounds} | s | / no copy |")
    print("|---|---:|---:|")
    out = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        out[name] = {"s": round(med, 3), "ratio": round(med / base, 2)}
        print(f"| {name} | {med:.2f} | {med / base:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
