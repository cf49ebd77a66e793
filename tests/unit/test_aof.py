"""The AOF (pyrepl/aof) without processes: the manifest's format and checks, the state table,
the loader on hand-made files (annotations, torn tails, a torn MULTI, bad formats), and a
sans-io core writing, rewriting and loading its appendonlydir in a temp dir (the rewrite's
child run in-process)."""

from __future__ import annotations

import os
from typing import Any

import pytest

import pyrepl.commands  # noqa: F401
from pyrepl.aof import manifest as mf
from pyrepl.aof.loader import LoadPorts, LoadStatus, load_files, load_single
from pyrepl.aof.manifest import AofInfo, Manifest, ManifestError
from pyrepl.aof.states import TRANSITIONS, AofInput, AofState, AofStateError, move
from pyrepl.config import Config
from pyrepl.core.host import Host, NullLog
from pyrepl.core.persistence import AofLoadError
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.resp.writer import encode_command
from tests.support.checks import check_every_move

NOW = 1_700_000_000_000


def cmd(*args: bytes | str) -> bytes:
    return encode_command([a.encode() if isinstance(a, str) else a for a in args])


# -- the manifest ---------------------------------------------------------------------------

def test_manifest_lines_are_redis_format_base_history_incr() -> None:
    am = Manifest()
    am.new_base("appendonly.aof", True)
    am.new_incr("appendonly.aof")
    # a rewrite: a new incr file at the fork, then a new base; the old ones become history
    am.new_incr("appendonly.aof")
    am.new_base("appendonly.aof", True)
    am.mark_rewritten_incr_as_history(keep_last=True)
    # (each becomes history at the head of the list: the old base first, then the incr)
    assert am.render() == (b"file appendonly.aof.2.base.rdb seq 2 type b\n"
                           b"file appendonly.aof.1.incr.aof seq 1 type h\n"
                           b"file appendonly.aof.1.base.rdb seq 1 type h\n"
                           b"file appendonly.aof.2.incr.aof seq 2 type i\n")
    back = mf.parse(am.render())
    assert (back.base, back.history, back.incr) == (am.base, am.history, am.incr)
    assert (back.base_seq, back.incr_seq) == (2, 2)


def test_manifest_quotes_a_name_that_needs_it_and_reads_it_back() -> None:
    am = Manifest(base=AofInfo("my file\n.aof", 1, mf.BASE))
    text = am.render()
    assert text == b'file "my file\\n.aof" seq 1 type b\n'
    assert mf.parse(text).base == AofInfo("my file\n.aof", 1, mf.BASE)


@pytest.mark.parametrize("text,error", [
    (b"", "Found an empty AOF manifest"),
    (b"\n", "Invalid AOF manifest file format"),
    (b"file a seq 1\n", "Invalid AOF manifest file format"),
    (b"file a seq 1 type b", "The AOF manifest file contains too long line"),
    (b"file a seq 1 type b\nfile b seq 2 type b\n", "Found duplicate base file information"),
    (b"file a seq 2 type i\nfile b seq 2 type i\n", "Found a non-monotonic sequence number"),
    (b"file a seq 1 type x\n", "Unknown AOF file type"),
    (b"file ../a seq 1 type b\n", "File can't be a path, just a filename"),
    (b"file a seq 0 type b\n", "Invalid AOF manifest file format"),
    (b"file " + b"a" * 1100 + b" seq 1 type b\n", "The AOF manifest file contains too long line"),
])
def test_manifest_errors_are_redis_texts(text: bytes, error: str) -> None:
    with pytest.raises(ManifestError) as e:
        mf.parse(text)
    assert e.value.message == error


def test_manifest_comments_and_extra_keys_are_skipped() -> None:
    am = mf.parse(b"# a comment\nfile a seq 3 type i future x\n")
    assert am.incr == [AofInfo("a", 3, mf.INCR)] and am.incr_seq == 3


def test_manifest_persist_is_atomic_and_clears_dirty(tmp_path: Any) -> None:
    am = Manifest()
    am.new_incr("appendonly.aof")
    mf.persist(str(tmp_path), "appendonly.aof", am)
    assert not am.dirty
    assert sorted(os.listdir(tmp_path)) == ["appendonly.aof.manifest"]
    assert mf.load(str(tmp_path), "appendonly.aof").incr == am.incr


# -- the state table ------------------------------------------------------------------------

def test_every_state_and_input_moves_as_the_table_says() -> None:
    class M:
        state = AofState.OFF

    m = M()

    def go(inp: AofInput) -> AofState:
        m.state = move(m.state, inp)
        return m.state

    check_every_move(m, go, TRANSITIONS, AofState, AofInput, AofStateError)


# -- the loader -----------------------------------------------------------------------------

class Recorder:
    """A loader's ports that record what would run (a transaction queued until EXEC)."""

    def __init__(self) -> None:
        self.ran: list[list[bytes]] = []
        self.multi: list[list[bytes]] | None = None
        self.log = NullLog()

    def run(self, argv: list[bytes]) -> bool:
        name = argv[0].lower()
        if name == b"nope":          # (no such command)
            return False
        if name == b"multi":
            self.multi = []
        elif name == b"exec":
            self.ran += self.multi or []
            self.multi = None
        elif self.multi is not None:
            self.multi.append(argv)
        else:
            self.ran.append(argv)
        return True

    def discard(self) -> None:
        self.multi = None

    def ports(self) -> LoadPorts:
        return LoadPorts(run=self.run, in_multi=lambda: self.multi is not None, discard=self.discard,
                         load_rdb=lambda p: 0, log=self.log)

    def warned(self, text: str) -> bool:
        return any(text in m for lvl, m in self.log.lines if lvl == "warning")


def _write(tmp_path: Any, name: str, data: bytes) -> str:
    (tmp_path / name).write_bytes(data)
    return name


def test_annotations_are_skipped_and_commands_run(tmp_path: Any) -> None:
    rec = Recorder()
    name = _write(tmp_path, "a.aof", b"#TS:1700000000\r\n" + cmd("SET", "k", "v") +
                  b"#TS:1700000001\r\n" + cmd("SELECT", "1"))
    assert load_single(rec.ports(), str(tmp_path), name, False, True) is LoadStatus.OK
    assert rec.ran == [[b"SET", b"k", b"v"], [b"SELECT", b"1"]]


@pytest.mark.parametrize("cut", [1, 5, 9, 14, 20])
def test_a_torn_last_command_is_cut_off_with_aof_load_truncated(tmp_path: Any,
                                                                cut: int) -> None:
    whole = cmd("SET", "a", "1") + cmd("INCR", "n")
    torn = cmd("SET", "b", "22")
    name = _write(tmp_path, "a.aof", whole + torn[:cut])
    rec = Recorder()
    assert load_single(rec.ports(), str(tmp_path), name, False, True) is LoadStatus.TRUNCATED
    assert rec.ran == [[b"SET", b"a", b"1"], [b"INCR", b"n"]]
    assert (tmp_path / name).read_bytes() == whole    # truncated to the last whole command
    assert rec.warned(f"!!! Truncating the AOF {name} at offset {len(whole)} !!!")
    rec = Recorder()
    _write(tmp_path, name, whole + torn[:cut])
    assert load_single(rec.ports(), str(tmp_path), name, False, False) is LoadStatus.FAILED
    assert rec.warned(f"Unexpected end of file reading the append only file {name}")
    assert (tmp_path / name).read_bytes() == whole + torn[:cut]   # left as it was


def test_an_unfinished_transaction_is_reverted_to_before_its_multi(tmp_path: Any) -> None:
    head = cmd("SET", "a", "1")
    name = _write(tmp_path, "a.aof", head + cmd("MULTI") + cmd("INCR", "x") + cmd("INCR", "y"))
    rec = Recorder()
    assert load_single(rec.ports(), str(tmp_path), name, False, True) is LoadStatus.TRUNCATED
    assert rec.ran == [[b"SET", b"a", b"1"]] and rec.multi is None
    assert rec.warned(f"Revert incomplete MULTI/EXEC transaction in AOF file {name}")
    assert (tmp_path / name).read_bytes() == head


@pytest.mark.parametrize("garbage", [b"GARBAGE\r\n", b"*2\r\n+OK\r\n", b"*0\r\n"])
def test_a_malformed_command_in_the_middle_fails(tmp_path: Any, garbage: bytes) -> None:
    name = _write(tmp_path, "a.aof", cmd("SET", "a", "1") + garbage + cmd("SET", "b", "2"))
    rec = Recorder()
    assert load_single(rec.ports(), str(tmp_path), name, False, True) is LoadStatus.FAILED
    assert rec.warned(f"Bad file format reading the append only file {name}")


def test_an_unknown_command_fails(tmp_path: Any) -> None:
    name = _write(tmp_path, "a.aof", cmd("NOPE", "x"))
    rec = Recorder()
    assert load_single(rec.ports(), str(tmp_path), name, False, True) is LoadStatus.FAILED
    assert rec.warned("Unknown command 'NOPE' reading the append only file a.aof")


def test_only_the_last_file_may_be_truncated_and_a_missing_file_fails(tmp_path: Any) -> None:
    am = Manifest(base=AofInfo("b.aof", 1, mf.BASE), incr=[AofInfo("i.aof", 1, mf.INCR)])
    _write(tmp_path, "b.aof", cmd("SET", "a", "1")[:-3])
    _write(tmp_path, "i.aof", cmd("SET", "b", "1"))
    rec = Recorder()
    status, _, _ = load_files(rec.ports(), am, str(tmp_path), "appendonly.aof", True)
    assert status is LoadStatus.FAILED
    assert rec.warned("Fatal error: the truncated file is not the last file")
    am.incr.append(AofInfo("gone.aof", 2, mf.INCR))
    rec = Recorder()
    status, _, _ = load_files(rec.ports(), am, str(tmp_path), "appendonly.aof", True)
    assert status is LoadStatus.FAILED and rec.ran == []   # (nothing runs before the sizes)


# -- a core with AOF on ---------------------------------------------------------------------

class InProcessForkHost(Host):
    """Runs a forked job in this process; the job's pid is ours (as a real child's getpid()
    is the pid its parent got). The test reports the exit with ``core.child_exited``."""

    def __init__(self) -> None:
        self.codes: dict[int, int] = {}

    def fork_child(self, job: Any, purpose: str) -> int:
        self.codes[os.getpid()] = job()
        return os.getpid()


def make_core(tmp_path: Any, *overrides: tuple[str, list[str]], boot: bool = True) -> ServerCore:
    cfg = Config.load(None, [("save", [""]), ("dir", [str(tmp_path)]),
                             ("enable-debug-command", ["yes"]), *overrides])
    core = ServerCore(cfg, InProcessForkHost(), now_ms=NOW)
    if boot:
        core.persistence.load()
    return core


def run(c: Any, *args: bytes | str) -> bytes:
    c.receive_data(cmd(*args))
    return c.data_to_send()


def aofdir(tmp_path: Any) -> Any:
    return tmp_path / "appendonlydir"


def incr_bytes(tmp_path: Any) -> bytes:
    am = mf.load(str(aofdir(tmp_path)), "appendonly.aof")
    return b"".join((aofdir(tmp_path) / i.name).read_bytes() for i in am.incr)


def assert_reloads_the_same(tmp_path: Any, core: ServerCore) -> ServerCore:
    """A new core started on the directory with appendonly yes has ``core``'s dataset."""
    again = make_core(tmp_path, ("appendonly", ["yes"]))
    assert dataset_digest(again.dbs, None) == dataset_digest(core.dbs, None)
    return again


def test_writes_reach_the_incr_file_as_feedAppendOnlyFile_writes_them(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    assert core.aof_on and core.stream_live
    assert sorted(os.listdir(aofdir(tmp_path))) == [
        "appendonly.aof.1.base.rdb", "appendonly.aof.1.incr.aof", "appendonly.aof.manifest"]
    c = core.connection_made()
    assert run(c, "SET", "k", "v") == b"+OK\r\n"
    run(c, "EXPIRE", "k", "100")
    run(c, "GET", "k")                         # (a read: nothing)
    run(c, "SELECT", "2")
    run(c, "MULTI")
    run(c, "INCR", "n")
    run(c, "RPUSH", "l", "a", "b")
    run(c, "EXEC")
    c.receive_data(cmd("SET", "p1", "x") + cmd("SET", "p2", "y"))   # a pipelined run
    c.data_to_send()
    core.aof.before_reply()
    expected = (cmd("SELECT", "0") + cmd("SET", "k", "v") +
                cmd("PEXPIREAT", "k", str(NOW + 100_000)) +
                cmd("SELECT", "2") + cmd("MULTI") + cmd("INCR", "n") +
                cmd("RPUSH", "l", "a", "b") + cmd("EXEC") + cmd("SET", "p1", "x") +
                cmd("SET", "p2", "y"))
    assert incr_bytes(tmp_path) == expected
    assert core.aof.writer.current_size == sum(
        os.path.getsize(aofdir(tmp_path) / n) for n in os.listdir(aofdir(tmp_path))
        if "incr" in n or "base" in n)


def test_a_restart_loads_base_and_incr_to_the_same_dataset(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    c = core.connection_made()
    for i in range(50):
        run(c, "SET", f"k{i}", str(i))
    run(c, "HSET", "h", "f", "v")
    run(c, "ZADD", "z", "1.5", "m")
    run(c, "XADD", "s", "1-1", "f", "v")
    run(c, "XGROUP", "CREATE", "s", "g", "0")
    run(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    run(c, "SET", "gone", "x", "PX", "1")
    core.aof.before_reply()
    again = assert_reloads_the_same(tmp_path, core)
    c2 = again.connection_made()
    assert run(c2, "XPENDING", "s", "g") == run(c, "XPENDING", "s", "g")


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_bgrewriteaof_switches_the_manifest_and_loads_back(tmp_path: Any, preamble: str) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]), ("aof-use-rdb-preamble", [preamble]))
    c = core.connection_made()
    run(c, "SET", "a", "1")
    run(c, "RPUSH", "l", *[str(i) for i in range(100)])
    assert run(c, "BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
    assert run(c, "BGREWRITEAOF") == \
        b"-ERR Background append only file rewriting already in progress\r\n"
    run(c, "SET", "after", "fork")         # into the new incr file
    core.aof.before_reply()
    pid = core.rdb_child_pid
    core.child_exited(pid, core.host.codes[pid])
    suffix = "rdb" if preamble == "yes" else "aof"
    assert (aofdir(tmp_path) / "appendonly.aof.manifest").read_bytes() == (
        f"file appendonly.aof.2.base.{suffix} seq 2 type b\n"
        f"file appendonly.aof.2.incr.aof seq 2 type i\n").encode()
    assert sorted(os.listdir(aofdir(tmp_path))) == [
        f"appendonly.aof.2.base.{suffix}", "appendonly.aof.2.incr.aof",
        "appendonly.aof.manifest"]
    assert incr_bytes(tmp_path) == cmd("SELECT", "0") + cmd("SET", "after", "fork")
    info = run(c, "INFO", "persistence").decode()
    assert "aof_rewrites:1\r\n" in info and "aof_last_bgrewrite_status:ok\r\n" in info
    assert "rdb_bgsave_in_progress:0\r\n" in info
    assert_reloads_the_same(tmp_path, core)


def test_aof_disable_auto_gc_keeps_history(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]), ("aof-disable-auto-gc", ["yes"]))
    c = core.connection_made()
    run(c, "SET", "a", "1")
    run(c, "BGREWRITEAOF")
    core.child_exited(core.rdb_child_pid, 0)
    assert (aofdir(tmp_path) / "appendonly.aof.manifest").read_bytes() == (
        b"file appendonly.aof.2.base.rdb seq 2 type b\n"
        b"file appendonly.aof.1.incr.aof seq 1 type h\n"
        b"file appendonly.aof.1.base.rdb seq 1 type h\n"
        b"file appendonly.aof.2.incr.aof seq 2 type i\n")
    assert (aofdir(tmp_path) / "appendonly.aof.1.incr.aof").exists()
    run(c, "CONFIG", "SET", "aof-disable-auto-gc", "no")      # deleted at once
    assert not (aofdir(tmp_path) / "appendonly.aof.1.incr.aof").exists()


def test_config_set_appendonly_waits_for_its_rewrite_then_turns_on(tmp_path: Any) -> None:
    core = make_core(tmp_path)
    c = core.connection_made()
    run(c, "SET", "before", "1")
    assert run(c, "CONFIG", "SET", "appendonly", "yes") == b"+OK\r\n"
    assert core.aof.state is AofState.WAIT_REWRITE and core.aof_on
    run(c, "SET", "during", "2")            # into the temporary incr file
    core.aof.before_reply()
    assert (aofdir(tmp_path) / "temp-appendonly.aof.incr").read_bytes() == \
        cmd("SELECT", "0") + cmd("SET", "during", "2")
    core.child_exited(core.rdb_child_pid, 0)
    assert core.aof.state is AofState.ON
    assert (aofdir(tmp_path) / "appendonly.aof.manifest").read_bytes() == (
        b"file appendonly.aof.1.base.rdb seq 1 type b\n"
        b"file appendonly.aof.1.incr.aof seq 1 type i\n")
    run(c, "SET", "after", "3")
    core.aof.before_reply()
    assert incr_bytes(tmp_path) == (cmd("SELECT", "0") + cmd("SET", "during", "2") +
                                    cmd("SET", "after", "3"))
    assert_reloads_the_same(tmp_path, core)
    assert run(c, "CONFIG", "SET", "appendonly", "no") == b"+OK\r\n"
    assert not core.aof_on and not core.stream_live
    run(c, "SET", "off", "4")
    assert b"off" not in incr_bytes(tmp_path)


def test_a_failed_rewrite_keeps_the_old_manifest_and_counts(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    c = core.connection_made()
    run(c, "SET", "a", "1")
    before = (aofdir(tmp_path) / "appendonly.aof.manifest").read_bytes()
    run(c, "BGREWRITEAOF")
    core.child_exited(core.rdb_child_pid, 1)
    # the fork opened incr 2 (recorded at once), the base stays 1
    assert (aofdir(tmp_path) / "appendonly.aof.manifest").read_bytes() == before + \
        b"file appendonly.aof.2.incr.aof seq 2 type i\n"
    info = run(c, "INFO", "persistence").decode()
    assert "aof_last_bgrewrite_status:err" in info
    assert "aof_rewrites_consecutive_failures:1" in info
    assert_reloads_the_same(tmp_path, core)


def break_aof_writes(core: ServerCore) -> int:
    """The incr file's descriptor swapped for a read-only one (write(2) fails: EBADF); the
    good one is returned, for heal_aof_writes."""
    w = core.aof.writer
    good = w.fd
    w.fd = os.open(os.devnull, os.O_RDONLY)
    return good


def heal_aof_writes(core: ServerCore, good: int) -> None:
    os.close(core.aof.writer.fd)
    core.aof.writer.fd = good


def test_a_write_error_denies_writes_with_misconf_until_it_heals(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]), ("appendfsync", ["everysec"]))
    c = core.connection_made()
    w = core.aof.writer
    good = break_aof_writes(core)
    run(c, "SET", "a", "1")
    core.tick(NOW + 1000)
    assert not w.write_ok and w.buf                # kept for the next try
    assert run(c, "SET", "b", "2").startswith(b"-MISCONF Errors writing to the AOF file: ")
    assert b"aof_last_write_status:err" in run(c, "INFO", "persistence")
    heal_aof_writes(core, good)
    core.tick(NOW + 2000)
    assert w.write_ok and run(c, "SET", "b", "2") == b"+OK\r\n"
    core.aof.before_reply()
    assert incr_bytes(tmp_path).endswith(cmd("SET", "a", "1") + cmd("SET", "b", "2"))


def test_a_bad_manifest_or_a_missing_file_stops_the_start(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    run(core.connection_made(), "SET", "a", "1")
    core.aof.before_reply()
    (aofdir(tmp_path) / "appendonly.aof.1.incr.aof").unlink()
    with pytest.raises(Exception, match="could not be loaded"):
        make_core(tmp_path, ("appendonly", ["yes"]))
    (aofdir(tmp_path) / "appendonly.aof.manifest").write_bytes(b"file x seq 1 type q\n")
    with pytest.raises(AofLoadError, match="Unknown AOF file type"):
        make_core(tmp_path, ("appendonly", ["no"]))   # read even with appendonly no, as Redis


def test_debug_loadaof_reloads_what_was_written(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    c = core.connection_made()
    run(c, "SET", "a", "1")
    core.dbs[0].data[b"not-in-aof"] = b"x"          # (changed behind the AOF's back)
    assert run(c, "DEBUG", "LOADAOF") == b"+OK\r\n"
    assert set(core.dbs[0].data) == {b"a"}


def test_a_redis6_single_file_is_upgraded_into_the_directory(tmp_path: Any) -> None:
    (tmp_path / "appendonly.aof").write_bytes(cmd("SET", "old", "1"))
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    assert core.dbs[0].data == {b"old": b"1"}
    assert not (tmp_path / "appendonly.aof").exists()
    assert (aofdir(tmp_path) / "appendonly.aof.manifest").read_bytes() == (
        b"file appendonly.aof seq 1 type b\n"
        b"file appendonly.aof.1.incr.aof seq 1 type i\n")


class SlowFsync:
    """A background fsync that never finishes (a disk that is busy)."""

    error = 0

    def __init__(self) -> None:
        self.jobs: list[int] = []

    def pending(self) -> int:
        return len(self.jobs)

    def fsync(self, fd: int) -> None:
        self.jobs.append(fd)

    def fsync_and_close(self, fd: int) -> None:
        os.close(fd)


def test_everysec_postpones_a_write_behind_a_slow_fsync_for_two_seconds(tmp_path: Any) -> None:
    class SlowHost(InProcessForkHost):
        def background_fsync(self) -> SlowFsync:
            return SlowFsync()

    cfg = Config.load(None, [("save", [""]), ("dir", [str(tmp_path)]),
                             ("appendonly", ["yes"]), ("appendfsync", ["everysec"])])
    core = ServerCore(cfg, SlowHost(), now_ms=NOW)
    core.persistence.load()
    c = core.connection_made()
    w = core.aof.writer
    core.now_ms = NOW + 1000
    run(c, "SET", "a", "1")
    core.aof.before_reply()            # written; an fsync handed to the (slow) thread
    assert core.aof.fsync.pending() == 1 and not w.buf
    core.now_ms = NOW + 2000
    run(c, "SET", "b", "2")
    core.aof.before_reply()            # the fsync still runs: the write waits
    assert w.buf and w.flush_postponed_start == (NOW + 2000) // 1000
    core.now_ms = NOW + 3000
    core.aof.before_reply()            # less than 2 s: still waiting
    assert w.buf
    core.now_ms = NOW + 4000
    core.aof.before_reply()            # 2 s: written anyway, and counted
    assert not w.buf and w.delayed_fsync == 1
    assert any("Asynchronous AOF fsync is taking too long" in m for _, m in core.log.lines)
    assert b"aof_delayed_fsync:1\r\n" in run(c, "INFO", "persistence")
    assert incr_bytes(tmp_path).endswith(cmd("SET", "b", "2"))


def test_timestamp_annotations_once_a_second_and_loaded_past(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]), ("aof-timestamp-enabled", ["yes"]))
    c = core.connection_made()
    core.now_ms = NOW + 1000
    run(c, "SET", "a", "1")
    run(c, "SET", "b", "2")
    core.now_ms = NOW + 2500
    run(c, "SET", "c", "3")
    core.aof.before_reply()
    s1, s2 = (NOW + 1000) // 1000, (NOW + 2500) // 1000
    assert incr_bytes(tmp_path) == (b"#TS:%d\r\n" % s1 + cmd("SELECT", "0") + cmd("SET", "a", "1")
                                    + cmd("SET", "b", "2") + b"#TS:%d\r\n" % s2 +
                                    cmd("SET", "c", "3"))
    assert_reloads_the_same(tmp_path, core)


def test_shutdown_flushes_and_refuses_to_exit_while_the_first_rewrite_runs(tmp_path: Any) -> None:
    class LateHost(InProcessForkHost):
        """A child that has not exited yet (its exit is never reported)."""

        def fork_child(self, job: Any, purpose: str) -> int:
            return 99999

        def kill_child(self, pid: int) -> None:
            self.killed = pid

    cfg = Config.load(None, [("save", [""]), ("dir", [str(tmp_path)])])
    core = ServerCore(cfg, LateHost(), now_ms=NOW)
    core.persistence.load()
    c = core.connection_made()
    assert run(c, "CONFIG", "SET", "appendonly", "yes") == b"+OK\r\n"
    assert core.aof.state is AofState.WAIT_REWRITE
    assert run(c, "SHUTDOWN", "NOSAVE").startswith(b"-ERR Errors trying to SHUTDOWN")
    assert any("Writing initial AOF, can't exit." in m for _, m in core.log.lines)
    assert not core.shutdown_asap
    core.shutdown.request(8 | 2)   # FORCE | NOSAVE
    assert core.shutdown_asap and core.host.killed == 99999


def test_redis8_corrupt_tail_max_size_cuts_a_corrupt_tail_off(tmp_path: Any) -> None:
    good = cmd("SET", "a", "1")
    bad = b"*2\r\n+garbage\r\n"
    name = _write(tmp_path, "a.aof", good + bad)
    rec = Recorder()
    assert load_single(rec.ports(), str(tmp_path), name, False, True,
                       corrupt_tail_max=len(bad)) is LoadStatus.FAILED   # (not < the tail)
    assert load_single(rec.ports(), str(tmp_path), name, False, True,
                       corrupt_tail_max=len(bad) + 1) is LoadStatus.BROKEN_RECOVERED
    assert (tmp_path / name).read_bytes() == good
    assert rec.warned("!!! Warning: corrupt AOF file tail!!!")


def test_an_expired_key_is_written_as_del_and_one_child_runs_at_a_time(tmp_path: Any) -> None:
    class LateHost(InProcessForkHost):
        def fork_child(self, job: Any, purpose: str) -> int:
            self.codes[7777] = job()
            return 7777

    cfg = Config.load(None, [("save", [""]), ("dir", [str(tmp_path)]), ("appendonly", ["yes"])])
    core = ServerCore(cfg, LateHost(), now_ms=NOW)
    core.persistence.load()
    c = core.connection_made()
    run(c, "SET", "t", "x", "PX", "100")
    core.tick(NOW + 5000)                    # active expiry: a DEL, written by the cron's flush
    assert incr_bytes(tmp_path).endswith(cmd("DEL", "t"))
    assert run(c, "BGSAVE") == b"+Background saving started\r\n"
    assert run(c, "BGREWRITEAOF") == b"+Background append only file rewriting scheduled\r\n"
    assert b"aof_rewrite_scheduled:1\r\n" in run(c, "INFO", "persistence")
    core.child_exited(7777, 0)               # the BGSAVE ends: the cron starts the rewrite
    core.tick(NOW + 5100)
    assert core.rdb_child_purpose == "aof" and core.rdb_child_pid == 7777
    assert run(c, "BGSAVE").startswith(b"-ERR Another child process is active (AOF?)")
    info = run(c, "INFO", "persistence")
    assert b"rdb_bgsave_in_progress:0\r\n" in info and b"aof_rewrite_in_progress:1\r\n" in info


def test_the_background_fsync_counts_its_jobs_and_keeps_an_error(tmp_path: Any) -> None:
    from pyrepl.net.bio import BackgroundFsync
    from tests.support.waits import wait_for

    bio = BackgroundFsync()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"x")
    bio.fsync(fd)
    wait_for(lambda: bio.pending() == 0, timeout=10, what="the fsync to finish")
    assert bio.error == 0
    bad = os.open(os.devnull, os.O_RDONLY)
    os.close(bad)                          # a closed descriptor: fdatasync fails (EBADF)
    bio.fsync(bad)
    wait_for(lambda: bio.pending() == 0, timeout=10, what="the failing fsync")
    assert bio.error == 9
    bio.fsync(fd)                          # the next fsync that works clears it
    wait_for(lambda: bio.pending() == 0 and bio.error == 0, timeout=10, what="recovery")
    bio.fsync_and_close(fd)
    wait_for(lambda: _closed(fd), timeout=10, what="the close")


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_incremental_fsync_syncs_every_autosync_bytes(tmp_path: Any, monkeypatch: Any) -> None:
    from pyrepl.rdb import encoder

    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(encoder.os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    chunk = b"x" * 1000
    n = encoder.write_atomically(str(tmp_path / "f"), lambda w: [w(chunk) for _ in range(10)],
                                 autosync=3000)
    assert n == 10_000 and len(synced) == 3      # at 3000, 6000, 9000 bytes
    synced.clear()
    encoder.write_atomically(str(tmp_path / "g"), lambda w: [w(chunk) for _ in range(10)])
    assert synced == []                          # (the final one is an fsync)


def test_always_exits_when_the_aof_cannot_be_written(tmp_path: Any) -> None:
    core = make_core(tmp_path, ("appendonly", ["yes"]), ("appendfsync", ["always"]))
    c = core.connection_made()
    good = break_aof_writes(core)
    run(c, "SET", "a", "1")
    with pytest.raises(SystemExit) as e:          # (core.Host.exit_now; the shell's _exits)
        core.aof.before_reply()
    assert e.value.code == 1
    assert any("Can't recover from AOF write error when the AOF fsync policy is 'always'. "
               "Exiting..." in m for _, m in core.log.lines)
    heal_aof_writes(core, good)


def test_debug_loadaof_drops_the_function_libraries_the_aof_deleted(tmp_path: Any) -> None:
    """emptyData before the load takes the function libraries too (Redis's functions.tcl
    "FUNCTION can processes create, delete and flush commands in AOF")."""
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    c = core.connection_made()
    lib = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)"
    assert run(c, "FUNCTION", "LOAD", lib) == b"$4\r\ntest\r\n"
    assert run(c, "DEBUG", "LOADAOF") == b"+OK\r\n"
    assert run(c, "FCALL", "test", "0") == b"$5\r\nhello\r\n"
    assert run(c, "FUNCTION", "DELETE", "test") == b"+OK\r\n"
    assert run(c, "DEBUG", "LOADAOF") == b"+OK\r\n"
    assert run(c, "FUNCTION", "LIST") == b"*0\r\n"


def test_subcommands_of_one_command_load_each_as_itself(tmp_path: Any) -> None:
    """An AOF with several subcommands of one container command (XGROUP CREATE, then
    CREATECONSUMER, SETID): each is loaded as itself, not as the first one seen."""
    core = make_core(tmp_path, ("appendonly", ["yes"]))
    c = core.connection_made()
    run(c, "XADD", "s", "1-1", "f", "v")
    run(c, "XGROUP", "CREATE", "s", "g", "$")
    run(c, "XGROUP", "CREATECONSUMER", "s", "g", "alice")
    run(c, "XGROUP", "SETID", "s", "g", "0")
    before = run(c, "XINFO", "GROUPS", "s")
    assert run(c, "DEBUG", "LOADAOF") == b"+OK\r\n"
    assert run(c, "XINFO", "GROUPS", "s") == before
    assert b"$5\r\nalice\r\n" in run(c, "XINFO", "CONSUMERS", "s", "g")
