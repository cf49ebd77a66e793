"""AOF durability end to end (Redis 7.0's multi-part AOF), each test run against real
redis-server 7.0.15 and against pyrepl with the same command-line flags: real processes, real
files, kill -9.

* appendfsync always: no acknowledged write is lost to a kill -9 at a random moment (three
  rounds on one directory, one of them with a BGREWRITEAOF under way);
* appendfsync everysec: at most the last ~2 seconds of acknowledged writes are lost;
* what a restart loads after a clean SHUTDOWN, and after BGREWRITEAOF + more writes + kill -9
  (base and incr); the manifest a rewrite leaves and the history files (auto-gc on and off);
* bad input refuses to start with Redis's log line and never serves (missing file, bad
  format, unknown command, truncation with aof-load-truncated no, bad manifests, an
  appenddirname that is a file); a torn last command with aof-load-truncated yes is dropped
  and the file truncated to the last whole command;
* a write a replica acknowledged to WAIT survives on the replica's AOF when master and replica
  are both killed.

The recovered state after a crash must be a *prefix* of the acknowledged write sequence (an
AOF is a log: no hole, no reordering), at least as long as the writes the mode promises.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from tests.support.aof import (
    AOF_DIR,
    MANIFEST,
    SERVERS,
    AckWriter,
    aof_files,
    aof_flags,
    aof_path,
    assert_refused,
    assert_same_dataset,
    cmd,
    crash,
    fill_every_type,
    info,
    manifest_lines,
    manifest_text,
    read_file,
    recovered_prefix,
    resp,
    rewrite,
    shutdown,
    snapshot,
    start_expecting_failure,
    start_server,
    wait_files,
    write_file,
)
from tests.support.load import write_keys
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for

#: everysec: the acknowledged writes of this many seconds before the kill may be missing.
EVERYSEC_LOSS_WINDOW = 2.0


def _kill_at_random(srv, writer: AckWriter, rng: random.Random, lo: float, hi: float,
                    before_kill=None) -> float:  # noqa: ANN001
    """Let ``writer`` run for a random lo..hi seconds (from its first acknowledged write),
    then crash the server; returns the time of the kill."""
    wait_for(lambda: writer.acked > 0 or not writer.is_alive(), 30, what="first write")
    assert writer.is_alive(), (writer.ended_by, writer.wrong)
    kill_at = time.monotonic() + rng.uniform(lo, hi)
    if before_kill is not None:
        before_kill(kill_at)
    wait_for(lambda: time.monotonic() >= kill_at or not writer.is_alive(), hi + 30,
             interval=0.005, what="the kill point")
    assert writer.is_alive(), f"the writer stopped before the kill: {writer.ended_by!r} " \
                              f"{writer.wrong}"
    t_kill = time.monotonic()
    crash(srv)
    writer.join(30)
    assert not writer.is_alive()
    assert writer.wrong is None, writer.wrong
    return t_kill


def _rewrite_before(port: int, rng: random.Random, hi: float):  # noqa: ANN202
    def start_rewrite(kill_at: float) -> None:
        at = time.monotonic() + rng.uniform(0, max(0.0, kill_at - time.monotonic()))
        wait_for(lambda: time.monotonic() >= at, hi + 30, interval=0.005,
                 what="the rewrite point")
        assert b"rewriting" in cmd(port, "BGREWRITEAOF")  # type: ignore[operator]

    return start_rewrite


def _crash_rounds(kind: str, directory: str, fsync: str, seeds: tuple[int, ...],
                  lo: float, hi: float) -> list[tuple[str, AckWriter, float, int]]:
    """One writer per round on ``directory``, each killed at a random moment; every restart
    checks every earlier round again. Returns (prefix, writer, kill time, recovered length)."""
    rounds: list[tuple[str, AckWriter, float, int]] = []
    flags = aof_flags("--appendfsync", fsync)

    def check_all(port: int) -> None:
        for n, (prefix, writer, t_kill, first) in enumerate(rounds):
            m = recovered_prefix(port, prefix)
            if fsync == "always":
                want = writer.acked
            else:
                want = writer.acked_before(t_kill - EVERYSEC_LOSS_WINDOW)
            assert want <= m <= writer.acked + 1, (
                f"round {n} (seed {seeds[n]}, {fsync}): {m} writes recovered, "
                f"{writer.acked} acknowledged, at least {want} must be there")
            if first >= 0:
                assert m == first, f"round {n}: {first} writes after the first restart, {m} now"
            rounds[n] = (prefix, writer, t_kill, m)

    for n, seed in enumerate(seeds):
        rng = random.Random(seed)
        srv = start_server(kind, directory, *flags)
        writer = AckWriter(srv.port, f"r{n}:")
        try:
            check_all(srv.port)
            writer.start()

            # round 1: a BGREWRITEAOF starts somewhere before the kill
            t_kill = _kill_at_random(srv, writer, rng, lo, hi,
                                     _rewrite_before(srv.port, rng, hi) if n == 1 else None)
        finally:
            srv.stop()
            if writer.is_alive():
                writer.stop()
        assert writer.acked > 0
        rounds.append((f"r{n}:", writer, t_kill, -1))
    srv = start_server(kind, directory, *flags)
    try:
        check_all(srv.port)
    finally:
        srv.stop()
    return rounds


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_appendfsync_always_loses_no_acknowledged_write(kind: str, tmp_path) -> None:
    rounds = _crash_rounds(kind, str(tmp_path), "always", (101, 202, 303), 0.3, 1.5)
    assert all(w.acked > 0 for _, w, _, _ in rounds)


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_appendfsync_everysec_loses_at_most_about_a_second(kind: str, tmp_path) -> None:
    rounds = _crash_rounds(kind, str(tmp_path), "everysec", (11, 22, 33), 2.6, 3.6)
    for n, (_, w, t_kill, _) in enumerate(rounds):
        # the check means something: writes older than the window were acknowledged
        assert w.acked_before(t_kill - EVERYSEC_LOSS_WINDOW) > 0, n


# -- restarts ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_restart_after_clean_shutdown_keeps_everything(kind: str, tmp_path) -> None:
    d = str(tmp_path)
    srv = start_server(kind, d, *aof_flags())
    try:
        fill_every_type(srv.port, "a")
        write_keys(srv.port, "many", 2000, 32)  # (DEBUG POPULATE is not written to the AOF)
        want = snapshot(srv.port)
        # DEBUG LOADAOF: flush, reload from the files, same dataset
        assert cmd(srv.port, "DEBUG", "LOADAOF") == b"OK"
        assert_same_dataset(snapshot(srv.port), want, "after DEBUG LOADAOF")
        assert shutdown(srv) == 0
    finally:
        srv.stop()
    srv = start_server(kind, d, *aof_flags())
    try:
        assert_same_dataset(snapshot(srv.port), want, "after SHUTDOWN and restart")
        assert info(srv.port)["aof_enabled"] == "1"
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.parametrize("gc", ["auto-gc", "no-gc"])
@pytest.mark.parametrize("kind", SERVERS)
def test_rewrite_then_kill_loads_base_and_incr(kind: str, gc: str, tmp_path) -> None:
    d = str(tmp_path)
    flags = aof_flags("--appendfsync", "always",
                      "--aof-disable-auto-gc", "no" if gc == "auto-gc" else "yes")
    srv = start_server(kind, d, *flags)
    try:
        first = manifest_lines(("1.base.rdb", 1, "b"), ("1.incr.aof", 1, "i"))
        assert manifest_text(d) == first
        assert aof_files(d) == ["appendonly.aof.1.base.rdb", "appendonly.aof.1.incr.aof",
                                MANIFEST]
        fill_every_type(srv.port, "before")
        cmd(srv.port, "DEBUG", "POPULATE", 3000, "pop", 16)
        got = rewrite(srv.port, d)
        new = ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", MANIFEST]
        if gc == "auto-gc":
            assert got == manifest_lines(("2.base.rdb", 2, "b"), ("2.incr.aof", 2, "i"))
            wait_files(d, new)  # the history files are deleted (in the background)
        else:
            assert got == manifest_lines(("2.base.rdb", 2, "b"), ("1.incr.aof", 1, "h"),
                                         ("1.base.rdb", 1, "h"), ("2.incr.aof", 2, "i"))
            assert aof_files(d) == sorted([*new, "appendonly.aof.1.base.rdb",
                                           "appendonly.aof.1.incr.aof"])
        fill_every_type(srv.port, "after")
        cmd(srv.port, "SET", "after:last", "written after the rewrite")
        assert os.path.getsize(aof_path(d, "appendonly.aof.2.incr.aof")) > 0
        want = snapshot(srv.port)
        crash(srv)
    finally:
        srv.stop()
    srv = start_server(kind, d, *flags)
    try:
        assert cmd(srv.port, "GET", "after:last") == b"written after the rewrite"
        assert cmd(srv.port, "GET", "before:str") == b"hello world"
        assert_same_dataset(snapshot(srv.port), want, "after BGREWRITEAOF, writes and kill -9")
        # the restart keeps the layout (and opens the same incr file for appending)
        assert manifest_text(d) == got
    finally:
        srv.stop()


# -- bad input -----------------------------------------------------------------------------

A = AOF_DIR + "/"
SET_K = resp("SET", "k", "loaded")
BASE_AOF = "appendonly.aof.1.base.aof"
INCR_AOF = "appendonly.aof.1.incr.aof"
M_BASE_INCR = manifest_lines(("1.base.aof", 1, "b"), ("1.incr.aof", 1, "i")).encode()
M_INCR = manifest_lines(("1.incr.aof", 1, "i")).encode()

#: name -> (files to write in dir, extra flags, log pattern Redis 7.0.15 prints, files that
#: must be left unchanged by the failed start).
REFUSED: dict[str, tuple[dict[str, bytes], tuple[str, ...], str, bool]] = {
    "manifest-names-missing-file": (
        {A + MANIFEST: M_BASE_INCR, A + BASE_AOF: SET_K}, (),
        r"appendonly\.aof\.1\.incr\.aof.*No such file or directory", True),
    "manifest-names-missing-base": (
        {A + MANIFEST: manifest_lines(("1.base.rdb", 1, "b"), ("1.incr.aof", 1, "i")).encode(),
         A + INCR_AOF: SET_K}, (),
        r"appendonly\.aof\.1\.base\.rdb.*No such file or directory", True),
    "garbage-in-the-middle-of-incr": (
        {A + MANIFEST: M_BASE_INCR, A + BASE_AOF: SET_K,
         A + INCR_AOF: resp("SET", "a", "1") + b"!!!\r\n" + resp("SET", "b", "2")},
        ("--aof-load-truncated", "yes"),
        r"Bad file format reading the append only file appendonly\.aof\.1\.incr\.aof", True),
    "unknown-command": (
        {A + MANIFEST: M_INCR, A + INCR_AOF: SET_K + resp("bla", "foo", "hello") + SET_K},
        ("--aof-load-truncated", "yes"),
        r"Unknown command 'bla' reading the append only file appendonly\.aof\.1\.incr\.aof",
        True),
    "truncated-last-command-load-truncated-no": (
        {A + MANIFEST: M_BASE_INCR, A + BASE_AOF: SET_K,
         A + INCR_AOF: resp("SET", "a", "1") + resp("SET", "torn", "value")[:-1]},
        ("--aof-load-truncated", "no"),
        r"Unexpected end of file reading the append only file appendonly\.aof\.1\.incr\.aof",
        True),
    "unfinished-multi-load-truncated-no": (
        {A + MANIFEST: M_INCR,
         A + INCR_AOF: SET_K + resp("MULTI") + resp("SET", "in-multi", "x")},
        ("--aof-load-truncated", "no"),
        r"Unexpected end of file reading the append only file appendonly\.aof\.1\.incr\.aof",
        True),
    # Redis truncates the base before refusing: the file is not compared
    "truncated-base-is-not-the-last-file": (
        {A + MANIFEST: M_BASE_INCR, A + BASE_AOF: SET_K + resp("SET", "torn", "v")[:-3],
         A + INCR_AOF: resp("SET", "a", "1")},
        ("--aof-load-truncated", "yes"),
        r"Fatal error: the truncated file is not the last file", False),
    "corrupt-rdb-base": (
        {A + MANIFEST: manifest_lines(("1.base.rdb", 1, "b"), ("1.incr.aof", 1, "i")).encode(),
         A + "appendonly.aof.1.base.rdb": b"REDIS0010" + b"\xfa\x09garbage-garbage",
         A + INCR_AOF: SET_K}, (),
        r"Short read or OOM loading DB|Unexpected EOF reading RDB file"
        r"|Error reading the RDB base file appendonly\.aof\.1\.base\.rdb", True),
    "manifest-non-monotonic-seq": (
        {A + MANIFEST: manifest_lines(("2.incr.aof", 2, "i"), ("1.incr.aof", 1, "i")).encode(),
         A + INCR_AOF: SET_K, A + "appendonly.aof.2.incr.aof": SET_K}, (),
        r"Found a non-monotonic sequence number", True),
    "manifest-duplicate-base": (
        {A + MANIFEST: manifest_lines(("1.base.aof", 1, "b"), ("2.base.aof", 2, "b")).encode(),
         A + BASE_AOF: SET_K, A + "appendonly.aof.2.base.aof": SET_K}, (),
        r"Found duplicate base file information", True),
    "manifest-empty": (
        {A + MANIFEST: b""}, (), r"Found an empty AOF manifest", True),
    "manifest-bad-line": (
        {A + MANIFEST: b"filx appendonly.aof.1.base.aof seq 1 type b\n", A + BASE_AOF: SET_K},
        (), r"Invalid AOF manifest file format", True),
    "manifest-unknown-type": (
        {A + MANIFEST: b"file appendonly.aof.1.base.aof seq 1 type x\n", A + BASE_AOF: SET_K},
        (), r"Unknown AOF file type", True),
    # tests run as root: permission bits stop nothing; a regular file where the directory
    # must be does
    "appendonlydir-is-a-file": (
        {"appendonlydir": b"not a directory\n"}, (),
        r"Can't open or create append-only dir appendonlydir: Not a directory", True),
    "appenddirname-names-a-file": (
        {"aof-here": b"not a directory\n"}, ("--appenddirname", "aof-here"),
        r"Can't open or create append-only dir aof-here: Not a directory", True),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("kind", SERVERS)
def test_bad_input_refuses_to_start(kind: str, case: str, tmp_path) -> None:
    files, extra, pattern, unchanged = REFUSED[case]
    d = str(tmp_path)
    for rel, data in files.items():
        write_file(os.path.join(d, rel), data)
    out = start_expecting_failure(kind, d, *aof_flags(*extra), probe_key="k", timeout=30)
    assert_refused(out, pattern)
    if unchanged:  # a failed start leaves the evidence as it was
        for rel, data in files.items():
            assert read_file(os.path.join(d, rel)) == data, f"{rel} was changed"


def _start_and_read(kind: str, d: str, *extra: str, keys: tuple[str, ...]) -> tuple:
    srv = start_server(kind, d, *aof_flags(*extra))
    try:
        return srv, tuple(cmd(srv.port, "GET", k) for k in keys)
    except BaseException:
        srv.stop()
        raise


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_torn_last_command_is_dropped_with_load_truncated_yes(kind: str, tmp_path) -> None:
    d = str(tmp_path)
    whole = b"".join(resp("INCR", "foo") for _ in range(5))
    incr = whole + resp("INCR", "foo")[:-1]
    write_file(os.path.join(d, A + MANIFEST), M_INCR)
    write_file(os.path.join(d, A + INCR_AOF), incr)
    srv, got = _start_and_read(kind, d, "--aof-load-truncated", "yes", keys=("foo",))
    try:
        assert got == (b"5",)
        log = srv.log()
        assert "!!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!!" \
            in log, log
        assert f"!!! Truncating the AOF appendonly.aof.1.incr.aof at offset {len(whole)} !!!" \
            in log, log
        # the torn command is cut off the file: it ends with the last whole command
        assert read_file(os.path.join(d, A + INCR_AOF)) == whole
        assert cmd(srv.port, "INCR", "foo") == 6  # appended after the last whole command
        assert shutdown(srv) == 0
    finally:
        srv.stop()
    srv, got = _start_and_read(kind, d, "--aof-load-truncated", "no", keys=("foo",))
    try:
        assert got == (b"6",)
        assert "short read" not in srv.log()
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.parametrize("kind", SERVERS)
def test_unfinished_multi_is_reverted_with_load_truncated_yes(kind: str, tmp_path) -> None:
    d = str(tmp_path)
    before = SET_K + resp("SET", "foo", "hello")
    write_file(os.path.join(d, A + MANIFEST), M_INCR)
    write_file(os.path.join(d, A + INCR_AOF),
               before + resp("MULTI") + resp("SET", "bar", "world"))
    srv, got = _start_and_read(kind, d, "--aof-load-truncated", "yes", keys=("foo", "bar"))
    try:
        assert got == (b"hello", None)
        assert "Revert incomplete MULTI/EXEC transaction in AOF file appendonly.aof.1.incr.aof" \
            in srv.log()
        assert read_file(os.path.join(d, A + INCR_AOF)) == before
    finally:
        srv.stop()


# -- a WAIT-acknowledged write on an AOF replica -------------------------------------------

def _wait_replica_aof_ready(master: int, replica: int) -> None:
    """The replica is online, done loading, and its AOF is established after the sync (Redis
    rewrites the AOF after a full sync; until that rewrite ends, the manifest does not name
    the file being written)."""

    def ready() -> bool:
        ri = info(replica, "replication")
        pi = info(replica, "persistence")
        mi = info(master, "replication")
        return (ri.get("master_link_status") == "up" and pi.get("loading") == "0"
                and pi.get("aof_enabled") == "1"
                and pi.get("aof_rewrite_in_progress") == "0"
                and pi.get("aof_rewrite_scheduled") == "0"
                and pi.get("aof_last_bgrewrite_status") == "ok"
                and any(f"port={replica},state=online" in v for k, v in mi.items()
                        if k.startswith("slave")))

    wait_for(ready, 60, interval=0.05, what="the replica online with its AOF established")


@pytest.mark.slow
@pytest.mark.parametrize("master_kind,replica_kind", [
    ("redis", "redis"), ("redis", "pyrepl"), ("pyrepl", "pyrepl"), ("pyrepl", "redis"),
], ids=["redis-master-redis-replica", "redis-master-pyrepl-replica",
        "pyrepl-master-pyrepl-replica", "pyrepl-master-redis-replica"])
def test_wait_acknowledged_write_survives_on_the_aof_replica(
        master_kind: str, replica_kind: str, tmp_path) -> None:
    mdir, rdir = str(tmp_path / "master"), str(tmp_path / "replica")
    os.makedirs(mdir)
    os.makedirs(rdir)
    rflags = aof_flags("--appendfsync", "always")
    master = start_server(master_kind, mdir)
    replica = None
    try:
        cmd(master.port, "DEBUG", "POPULATE", 500, "before-sync", 16)
        replica = start_server(replica_kind, rdir, *rflags,
                               "--replicaof", "127.0.0.1", str(master.port))
        _wait_replica_aof_ready(master.port, replica.port)
        with RawClient(master.port) as c:
            for i in range(200):
                c.send("SET", f"w:{i}", i)
            c.send("SET", "the-write", "acknowledged")
            for _ in range(201):
                assert c.read_reply() == b"+OK\r\n"
            assert parse_reply(c.call("WAIT", 1, 1000)) == 1
            want = snapshot(master.port)
        crash(master)
        crash(replica)
    finally:
        master.stop()
        if replica is not None:
            replica.stop()
    alone = start_server(replica_kind, rdir, *rflags)  # as a master: no replicaof
    try:
        assert cmd(alone.port, "GET", "the-write") == b"acknowledged"
        assert info(alone.port, "replication")["role"] == "master"
        assert_same_dataset(snapshot(alone.port), want, "the replica's AOF after kill -9")
    finally:
        alone.stop()
