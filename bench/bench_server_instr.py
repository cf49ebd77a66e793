"""Instructions a request of each whole server, pyrepl beside Redis 7.0.15, under callgrind.

    .venv/bin/python bench/bench_server_instr.py [--cases SET,MULTI_EXEC,EVALSHA]
        [--clients 1,50] [--n 2000] [--tree DIR] [--keep DIR] [--pipeline 1]

Each server runs whole under ``valgrind --tool=callgrind --instr-atstart=no``: the event
loop, the kernel's interface, the parse, the commands and the writes, as it serves. Once it is
up and warm (500 requests), ``callgrind_control -i on`` starts the count, ``-d`` dumps it
after N and again after 3N more of bench/txload.c's requests (``--pipeline`` requests a
client at a time, one by default; ``--clients`` connections); the second dump less the first over 2N is a request's cost,
start-up and connections excluded. Instructions, not seconds: the same on a loaded machine
(valgrind runs the server on one core, ~50x slower). ``--tree`` runs another checkout's
pyrepl instead of this one (a ``git worktree`` of an earlier commit, C built in place);
``--keep`` copies each server's two dumps to DIR (``callgrind_annotate`` reads them).

The cases (the data set first where a case needs it): SET of one key; MULTI_EXEC, the
transaction of bench_commands.TX (MULTI, SET, EXPIRE, GET, EXEC); EVALSHA of
bench_commands.SCRIPT (``return redis.call('GET', KEYS[1])``) on one key.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import redis
from bench_commands import SCRIPT, TX, build_txload, resp
from common import ROOT, free_port, pyrepl_argv

KEY = "instr:key"
CASES: dict[str, list[list[str]]] = {
    "SET": [["SET", KEY, "value"]],
    "MULTI_EXEC": TX,
    "EVALSHA": [["EVALSHA", "<sha>", "1", KEY]],
}


def server_argv(kind: str, port: int, work: str, tree: str | None) -> tuple[list[str], dict]:
    if kind == "redis":
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", work], dict(os.environ)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree or ROOT))
    return pyrepl_argv("master", port, work), env


def wait_up(port: int, proc: subprocess.Popen, limit: float = 180.0) -> redis.Redis:
    r = redis.Redis(port=port, socket_timeout=30)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server under valgrind exited ({proc.returncode})")
        try:
            r.ping()
            return r
        except redis.ConnectionError:
            time.sleep(0.5)
    raise RuntimeError("the server under valgrind did not come up")


def total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def measure(kind: str, case: str, clients: int, n: int, txload: str, tree: str | None,
            keep: str | None = None, pipeline: int = 1) -> int:
    """A request's instructions of server ``kind`` ("pyrepl" or "redis") on ``case``; with
    ``keep``, its two callgrind dumps are copied there (for callgrind_annotate's --diff)."""
    work = tempfile.mkdtemp(prefix=f"instr-{kind}-")
    port = free_port()
    argv, env = server_argv(kind, port, work, tree)
    out = os.path.join(work, "cg.out")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--callgrind-out-file={out}.%p", *argv], env=env, cwd=work,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        r = wait_up(port, proc)
        r.set(KEY, "xxx")
        cmds = [[r.script_load(SCRIPT) if a == "<sha>" else a for a in c] for c in CASES[case]]
        req = os.path.join(work, "req")
        with open(req, "wb") as f:
            f.write(b"".join(resp(c) for c in cmds))
        rep = os.path.join(work, "reply")
        with open(rep, "wb") as f:
            f.write(reply_of(port, cmds))

        def load(count: int) -> None:
            subprocess.run([txload, str(port), str(clients), str(pipeline), str(count), req, rep],
                           check=True, stdout=subprocess.DEVNULL, timeout=3600)

        def control(*flags: str) -> None:
            subprocess.run(["callgrind_control", *flags, str(proc.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)

        load(500)
        control("-i", "on")
        load(n)
        control("-d")
        load(3 * n)
        control("-d")
        dumps = sorted(glob.glob(f"{out}.{proc.pid}.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
        if len(dumps) < 2:
            raise RuntimeError(f"callgrind wrote {len(dumps)} dumps")
        if keep is not None:
            os.makedirs(keep, exist_ok=True)
            for i, d in enumerate(dumps[:2]):
                shutil.copy(d, os.path.join(keep, f"{kind}-{case}-{clients}.{i + 1}"))
        return (total(dumps[1]) - total(dumps[0])) // (2 * n)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def reply_of(port: int, cmds: list[list[str]]) -> bytes:
    """What the server answers to one request of ``cmds`` (txload checks every byte): a
    reply a command (MULTI's +OK, a +QUEUED each, then EXEC's array)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"".join(resp(c) for c in cmds))
        got = b""
        while count_replies(got) < len(cmds):
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            got += chunk
    return got


def count_replies(data: bytes) -> int:
    """Whole top-level RESP2 replies in ``data``."""
    n, i = 0, 0
    while True:
        j = skip(data, i)
        if j < 0:
            return n
        n, i = n + 1, j


def skip(data: bytes, i: int) -> int:
    """The end of the reply at ``i``, or -1 when it is not whole yet."""
    end = data.find(b"\r\n", i)
    if end < 0:
        return -1
    kind, head = data[i:i + 1], data[i + 1:end]
    if kind in (b"+", b"-", b":"):
        return end + 2
    size = int(head)
    if kind == b"$":
        return -1 if size >= 0 and len(data) < end + 2 + size + 2 else (
            end + 2 if size < 0 else end + 2 + size + 2)
    j = end + 2
    for _ in range(max(size, 0)):
        j = skip(data, j)
        if j < 0:
            return -1
    return j


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--clients", default="1,50")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--tree", default=None, help="another checkout's pyrepl")
    ap.add_argument("--keep", default=None, help="a directory to copy the callgrind dumps to")
    ap.add_argument("--pipeline", type=int, default=1, help="requests a client sends at once")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "redis-server", "gcc"):
        if shutil.which(tool) is None:
            print(f"needs {tool}", file=sys.stderr)
            return 2
    work = tempfile.mkdtemp(prefix="instr-")
    try:
        txload = build_txload(work)
        print(f"{'case':12s} {'clients':>7s} {'redis':>8s} {'pyrepl':>8s}  pyrepl/redis")
        for case in args.cases.split(","):
            for clients in map(int, args.clients.split(",")):
                got = {k: measure(k, case, clients, args.n, txload, args.tree,
                                      args.keep, args.pipeline)
                       for k in ("redis", "pyrepl")}
                print(f"{case:12s} {clients:7d} {got['redis']:8,d} {got['pyrepl']:8,d}"
                      f"  {got['pyrepl'] / got['redis']:.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
