"""Full sync, SAVE and load of big values, pyrepl beside Redis in the same run (issue 39).

    .venv/bin/python bench/bench_bigsync.py [--mb 128] [--rounds 1]
        [--datasets strings,hashes,zsets,streams] [--modes disk,diskless,rdbchannel] [--json F]
        [--base DIR]

Four datasets, each alone, of about ``--mb`` MB of raw keys and values (text made of a fixed
vocabulary of words, so that LZF finds what it finds in real data):

- ``strings``: 100 KB strings;
- ``hashes``: hashes of 10,000 fields of 100-byte values;
- ``zsets``: sorted sets of 10,000 members (``member:<i>:<word>``, a random score);
- ``streams``: streams of 100,000 entries of three fields (``user``, ``action``, ``value``),
  each with a consumer group that has read a tenth of it (the first built by commands, the
  others its copies by DUMP and RESTORE).

For each dataset and kind (pyrepl, redis-server 7.0.15; Redis 8 for the RDB channel, which 7.0
has not) the same commands build the master's data; then three synchronous ``SAVE`` s are timed
(their median; and the file's size taken: both write ``rdbcompression yes``, Redis's default);
then a replica of the same kind, started empty, is sent ``REPLICAOF`` and timed until its link
is up and its offset is the master's, in each sync mode: ``disk`` (``repl-diskless-sync no``),
``diskless`` (``yes``, delay 0) and ``rdbchannel`` (``repl-rdb-channel yes`` on both, Redis
8's); a pyrepl replica's ``DEBUG DIGEST`` must equal the master's. Last the master loads its dump again, three
times: ``DEBUG RELOAD NOSAVE`` (the dataset emptied, the dump loaded back), timed from the
client (their median). The master's first ``DEBUG DIGEST`` is timed too (what the replicas'
copies are checked against). Goals: every figure <= 1.5x Redis's. With ``--base DIR`` an earlier
checkout (a ``git worktree``, its C built in place) runs beside as a third kind, and each cell
reads before -> after.
"""

from __future__ import annotations

import os
import random
import shutil
import time

import redis
from common import (
    ServerProcess,
    free_port,
    median,
    options,
    pyrepl_argv,
    start_pyrepl,
    start_redis,
    tmpdir,
    write_json,
    xadd_entries,
)

from tests.support.waits import wait_for

ARGS = ("--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes", "--save", "")
MODES = ("disk", "diskless", "rdbchannel")
PYREPLS = ("pyrepl", "base")
SAVES = 3       # SAVEs and loads a round: their median (the first of each runs colder)
KB = 1024


def text_pool(size: int = 1 << 20, seed: int = 7) -> bytes:
    """``size`` bytes of words from a vocabulary of 2,000 (the values' source)."""
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
             for _ in range(2000)]
    out: list[str] = []
    n = 0
    while n < size:
        w = rnd.choice(vocab)
        out.append(w)
        n += len(w) + 1
    return " ".join(out).encode()[:size]


POOL = text_pool()


def piece(i: int, size: int) -> bytes:
    off = (i * 7919) % (len(POOL) - size)
    return POOL[off:off + size]


def fill_strings(r: redis.Redis, mb: int) -> None:
    p = r.pipeline(transaction=False)
    for i in range(mb * KB // 100):
        p.set(f"string:{i}", piece(i, 100 * KB))
        if i % 64 == 63:
            p.execute()
    p.execute()


def fill_hashes(r: redis.Redis, mb: int) -> None:
    fields = 10000
    for h in range(max(1, mb * KB * KB // (fields * 110))):
        p = r.pipeline(transaction=False)
        for base in range(0, fields, 500):
            args: list[bytes | str] = []
            for f in range(base, base + 500):
                args += (f"field:{f}", piece(h * fields + f, 100))
            p.execute_command("HSET", f"hash:{h}", *args)
        p.execute()


def fill_zsets(r: redis.Redis, mb: int) -> None:
    members = 10000
    rnd = random.Random(11)
    words = POOL.split(b" ")[:5000]
    for z in range(max(1, mb * KB * KB // (members * 40))):
        p = r.pipeline(transaction=False)
        for base in range(0, members, 500):
            args: list[bytes | str | float] = []
            for m in range(base, base + 500):
                args += (rnd.random() * 1e6, b"member:%d:%s" % (m, words[(z + m) % 5000]))
            p.execute_command("ZADD", f"zset:{z}", *args)
        p.execute()


def fill_streams(r: redis.Redis, mb: int) -> None:
    """One stream built by commands, then copied by DUMP and RESTORE: every stream of the
    dataset is the same 100,000 entries and group anyway, and the copies take the server
    seconds where a client's XADDs took minutes at 1 GB."""
    per = 100000
    first = "stream:0"
    xadd_entries(r, first, per, 2000)
    r.execute_command("XGROUP", "CREATE", first, "g1", "0")
    r.execute_command("XREADGROUP", "GROUP", "g1", "c1", "COUNT", str(per // 10),
                      "STREAMS", first, ">")
    payload = r.dump(first)
    p = r.pipeline(transaction=False)
    for s in range(1, max(1, mb * KB * KB // (per * 60))):
        p.restore(f"stream:{s}", 0, payload)
        if s % 16 == 0:
            p.execute()
    p.execute()


FILL = {"strings": fill_strings, "hashes": fill_hashes, "zsets": fill_zsets,
        "streams": fill_streams}


BASE: list[str] = []     # --base: the earlier checkout "base" runs


def start(kind: str, *extra: str, directory: str | None = None, port: int | None = None):
    if kind == "pyrepl":
        return start_pyrepl(*ARGS, *extra, tmpdir=directory, port=port)
    if kind == "base":      # the same, on the earlier checkout's code
        directory = directory or tmpdir("bigsync-base-")
        port = port or free_port()
        env = dict(os.environ, PYTHONPATH=os.path.abspath(BASE[0]))
        return ServerProcess(pyrepl_argv("master", port, directory, *ARGS, *extra), port,
                             directory, f"pyrepl-base-{port}", env=env).start()
    return start_redis(*ARGS, *extra, tmpdir=directory, port=port,
                       version=8 if kind == "redis8" else 7)


def client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=900)


def sync_once(kind: str, master, mode: str, digest: bytes) -> float:
    """Seconds from REPLICAOF to the replica's link up with the master's offset reached."""
    m = client(master.port)
    m.config_set("repl-diskless-sync", "no" if mode == "disk" else "yes")
    extra = ("--repl-rdb-channel", "yes") if mode == "rdbchannel" else ()
    if mode == "rdbchannel" and kind in PYREPLS:
        m.config_set("repl-rdb-channel", "yes")
    elif kind in PYREPLS:
        extra = ("--repl-rdb-channel", "no")
    replica = start(kind, *extra)
    try:
        rc = client(replica.port)
        end = m.info("replication")["master_repl_offset"]
        t0 = time.perf_counter()
        rc.replicaof("127.0.0.1", master.port)

        def synced() -> bool:
            try:
                inf = rc.info("replication")
            except redis.exceptions.BusyLoadingError:
                return False
            return (inf.get("master_link_status") == "up"
                    and inf.get("slave_repl_offset", -1) >= end)

        wait_for(synced, 900, interval=0.005)
        took = time.perf_counter() - t0
        if kind in PYREPLS:     # (a Redis replica's copy is Redis's business)
            got = rc.execute_command("DEBUG", "DIGEST")
            assert got == digest, f"{kind} {mode}: replica digest {got!r} != master's {digest!r}"
        return took
    finally:
        replica.stop()
        shutil.rmtree(replica.dir, ignore_errors=True)


def one(kind: str, dataset: str, mb: int, modes: list[str]) -> dict[str, float]:
    d = tmpdir(f"bigsync-{kind}-")
    master = start(kind, directory=d)
    out: dict[str, float] = {}
    try:
        m = client(master.port)
        t0 = time.perf_counter()
        FILL[dataset](m, mb)
        out["fill_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        digest = m.execute_command("DEBUG", "DIGEST")
        out["digest_s"] = time.perf_counter() - t0
        if kind != "redis8":
            took = []
            for _ in range(SAVES):
                t0 = time.perf_counter()
                m.save()
                took.append(time.perf_counter() - t0)
            out["save_s"] = median(took)
            out["rdb_mb"] = os.path.getsize(os.path.join(d, "dump.rdb")) / (KB * KB)
        for mode in modes:
            if kind in PYREPLS or (mode == "rdbchannel") == (kind == "redis8"):
                out[f"{mode}_s"] = sync_once(kind, master, mode, digest)
        if kind != "redis8":
            took = []
            for _ in range(SAVES):
                t0 = time.perf_counter()
                m.execute_command("DEBUG", "RELOAD", "NOSAVE")
                took.append(time.perf_counter() - t0)
            out["load_s"] = median(took)
            assert m.execute_command("DEBUG", "DIGEST") == digest
    finally:
        master.stop()
    shutil.rmtree(d, ignore_errors=True)
    return out


def main() -> int:
    args = options(__doc__, mb=128, rounds=1, datasets="strings,hashes,zsets,streams",
                   modes=",".join(MODES), json=None, base=None)
    modes = args.modes.split(",")
    kinds = ["pyrepl", "redis"] + (["redis8"] if "rdbchannel" in modes else [])
    if args.base:
        BASE.append(args.base)
        kinds.insert(1, "base")
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    for dataset in args.datasets.split(","):
        res = results.setdefault(dataset, {k: {} for k in kinds})
        for rnd in range(args.rounds):
            for kind in (kinds if rnd % 2 == 0 else kinds[::-1]):
                for fig, v in one(kind, dataset, args.mb, modes).items():
                    res[kind].setdefault(fig, []).append(v)
                print(f"{dataset} round {rnd + 1} {kind}: "
                      + ", ".join(f"{f} {v[-1]:.2f}" for f, v in res[kind].items()), flush=True)
    print(f"\n~{args.mb} MB a dataset; medians of {args.rounds}; ratio = pyrepl / Redis "
          "(the RDB channel's against Redis 8)" + ("; before (--base) -> after" if args.base
                                                   else ""))
    figs = ["save_s", "load_s", "rdb_mb"] + [f"{m}_s" for m in modes] + ["digest_s"]
    print("| dataset | " + " | ".join(f"{f} pyrepl / redis (ratio)" for f in figs) + " |")
    print("|---|" + "---:|" * len(figs))
    table: dict[str, dict[str, list[float]]] = {}
    for dataset, res in results.items():
        cells = []
        for f in figs:
            a = median(res["pyrepl"].get(f, []))
            other = "redis8" if f == "rdbchannel_s" else "redis"
            b = median(res.get(other, {}).get(f, []))
            row = table.setdefault(dataset, {})[f] = [a, b, a / b if b else float("nan")]
            if not b:
                cells.append(f"{a:.2f} / -")
            elif args.base:
                was = median(res["base"].get(f, []))
                row.append(was / b)
                cells.append(f"{was / b:.2f} → **{a / b:.2f}** ({a:.2f} / {b:.2f})")
            else:
                cells.append(f"{a:.2f} / {b:.2f} (**{a / b:.2f}**)")
        print(f"| {dataset} | " + " | ".join(cells) + " |")
    write_json(args.json, {"mb": args.mb, "rounds": args.rounds, "table": table,
                           "raw": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
