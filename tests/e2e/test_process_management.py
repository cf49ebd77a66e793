"""Process management as redis-server does it: daemonize, the pid file, supervision, signals.

* ``daemonize yes``: the command returns 0 at once, the daemon serves, its pid file holds its
  pid, SIGTERM or SHUTDOWN stop it and the pid file is removed; logs go to ``logfile``.
* a pid file that cannot be written is logged, never fatal; a log file that cannot be opened
  stops the start with Redis's text.
* ``supervised systemd``: the same sd_notify datagrams as real redis-server (Debian's is built
  with libsystemd), in the same order; INFO process_supervised.
* ``shutdown-on-sigterm`` flags; SHUTDOWN waits up to ``shutdown-timeout`` for a lagging replica
  (as real Redis, side by side), SHUTDOWN NOW does not.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from tests.support.procs import (
    ServerProcess,
    free_port,
    redis_server_path,
    start_pyrepl,
    start_redis,
)
from tests.support.resp import RawClient, info, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow]


def pyrepl_cmd(port: int, tmp: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pyrepl.cli.main", "master", "--port", str(port), "--dir", tmp,
            "--bind", "127.0.0.1", "--save", "", *extra]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def ping(port: int) -> bool:
    try:
        with redis.Redis(port=port, socket_timeout=1) as r:
            return bool(r.ping())
    except redis.RedisError:
        return False


@pytest.mark.parametrize("stop_with", ["SIGTERM", "SHUTDOWN"])
def test_daemonize_yes_end_to_end(tmp_path: Any, stop_with: str) -> None:
    port = free_port()
    pidfile = tmp_path / "pyrepl.pid"
    logfile = tmp_path / "pyrepl.log"
    t0 = time.monotonic()
    done = subprocess.run(pyrepl_cmd(port, str(tmp_path), "--daemonize", "yes", "--pidfile",
                                     str(pidfile), "--logfile", str(logfile)),
                          capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - t0 < 15                  # it returned: the daemon went on alone
    pid = 0
    try:
        wait_for(lambda: ping(port), timeout=20, what="the daemon to serve")
        pid = int(pidfile.read_text())
        assert alive(pid) and pid != os.getpid()
        with redis.Redis(port=port) as r:
            assert r.info("server")["process_id"] == pid
            r.set("k", "v")
        if stop_with == "SIGTERM":
            os.kill(pid, signal.SIGTERM)
        else:
            with RawClient(port) as c:
                c.send("SHUTDOWN")
        wait_for(lambda: not alive(pid), timeout=20, what="the daemon to exit")
        assert not pidfile.exists()
        log = logfile.read_text()
        assert "Ready to accept connections tcp" in log and "Removing the pid file." in log
        assert done.stdout == b"" and done.stderr == b""    # nothing on the terminal
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_pidfile_in_a_missing_directory_is_logged_not_fatal(tmp_path: Any) -> None:
    srv = start_pyrepl("--pidfile", str(tmp_path / "missing" / "x.pid"), tmpdir=str(tmp_path))
    try:
        assert ping(srv.port)
        wait_for(lambda: "Failed to write PID file: No such file or directory" in srv.log(),
                 timeout=5, what="the pid file warning")
    finally:
        srv.stop()


def test_logfile_that_cannot_be_opened_stops_the_start(tmp_path: Any) -> None:
    done = subprocess.run(pyrepl_cmd(free_port(), str(tmp_path), "--logfile",
                                     str(tmp_path / "missing" / "x.log")),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert "Can't open the log file: No such file or directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_relative_logfile_is_in_dir_as_redis_has_it(tmp_path: Any) -> None:
    """Redis chdir()s to ``dir`` and opens ``logfile`` from there: Redis's cluster harness
    gives each of its 20 instances ``dir ./redis_<n>`` and ``logfile log.txt``, and reads
    redis_<n>/log.txt (all 20 wrote one file in the harness's directory before)."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    proc = subprocess.Popen(pyrepl_cmd(port, str(data), "--logfile", "log.txt"),
                            cwd=str(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (data / "log.txt").exists() and
                 "Ready to accept connections" in (data / "log.txt").read_text(),
                 timeout=30, what="the log in dir")
        assert not (tmp_path / "log.txt").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("kind", ["redis", "pyrepl"])
def test_supervised_systemd_notifies_as_redis(tmp_path: Any, kind: str) -> None:
    if kind == "redis" and redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(10)
        env = dict(os.environ, NOTIFY_SOCKET=path)
        port = free_port()
        if kind == "redis":
            argv = [redis_server_path() or "", "--port", str(port), "--dir", str(tmp_path),
                    "--save", "", "--supervised", "systemd", "--daemonize", "yes"]
        else:
            argv = pyrepl_cmd(port, str(tmp_path), "--supervised", "systemd",
                              "--daemonize", "yes")
        srv = ServerProcess(argv, port, str(tmp_path), f"{kind}-systemd", env=env).start()
        try:
            # supervised: daemonize yes does not detach (the supervisor owns the process)
            assert srv.alive()
            msgs = [sock.recv(4096).decode() for _ in range(3)]
            with redis.Redis(port=port) as r:
                assert r.info("server")["process_supervised"] == "systemd"
            srv.stop()
            msgs.append(sock.recv(4096).decode())
            assert msgs == ["STATUS=Redis is loading...\n",
                            "STATUS=Ready to accept connections\n", "READY=1\n",
                            "STOPPING=1\n"]
        finally:
            srv.stop()


@pytest.mark.parametrize(("flags", "saved"), [("nosave", False), ("default", True),
                                              ("save", True)])
def test_shutdown_on_sigterm_flags(tmp_path: Any, flags: str, saved: bool) -> None:
    save = "3600 1" if flags != "save" else ""        # "save" saves even without save points
    srv = start_pyrepl("--save", save, "--shutdown-on-sigterm", flags, tmpdir=str(tmp_path))
    with redis.Redis(port=srv.port) as r:
        r.set("k", "v")
    assert srv.stop(signal.SIGTERM) == 0
    assert (tmp_path / "dump.rdb").exists() == saved


@contextmanager
def _stopped_replica(tmp_path: Any, kind: str, start: Any,
                     *flags: str) -> Iterator[ServerProcess]:
    """A master (``start``: pyrepl's or redis-server's) with a redis-server replica that
    synced, then was stopped with SIGSTOP (it lags from now on); both stopped on the way out."""
    d = tmp_path / kind
    d.mkdir()
    master = start(*flags, tmpdir=str(d))
    (tmp_path / f"{kind}-replica").mkdir()
    replica = start_redis("--replicaof", "127.0.0.1", str(master.port),
                          tmpdir=str(tmp_path / f"{kind}-replica"))
    try:
        with RawClient(master.port) as c:
            wait_for(lambda: "state=online" in info(c, "replication").get("slave0", ""),
                     timeout=30, what="replica online")
        assert replica.proc is not None
        os.kill(replica.proc.pid, signal.SIGSTOP)
        yield master
    finally:
        if replica.proc is not None:
            os.kill(replica.proc.pid, signal.SIGCONT)
        replica.stop()
        master.stop()


def test_shutdown_waits_for_a_lagging_replica_as_redis(tmp_path: Any) -> None:
    """shutdown-timeout: SHUTDOWN returns only after the timeout while a replica lags (both
    servers); SHUTDOWN NOW does not wait."""
    results = {}
    for kind, start in (("redis", start_redis), ("pyrepl", start_pyrepl)):
        with _stopped_replica(tmp_path, kind, start, "--shutdown-timeout", "2") as master:
            with RawClient(master.port) as c:
                c.call("SET", "k", "v" * 1000)
                t0 = time.monotonic()
                c.send("SHUTDOWN")
                with pytest.raises(ConnectionError):
                    c.read_reply()
                results[kind] = time.monotonic() - t0
            assert master.proc is not None
            master.proc.wait(15)
            assert "Lagging replica" in master.log()
    assert results["redis"] >= 1.5 and results["pyrepl"] >= 1.5, results


def test_shutdown_now_does_not_wait(tmp_path: Any) -> None:
    with _stopped_replica(tmp_path, "pyrepl", start_pyrepl, "--shutdown-timeout", "30") as m, \
            RawClient(m.port) as c:
        c.call("SET", "k", "v")
        t0 = time.monotonic()
        c.send("SHUTDOWN", "NOW")
        with pytest.raises(ConnectionError):
            c.read_reply()
        assert time.monotonic() - t0 < 5


def test_the_log_goes_to_stdout_with_the_banner_redis_test_harness_waits_for() -> None:
    """As redis-server: with no logfile the log is stdout (the harness reads it there), and
    `always-show-logo yes` prints the banner with `` PID: <pid>`` and the port (what Redis's
    tcl harness waits for); without it, ``Running mode=standalone, port=N.``."""
    for logo in ("yes", "no"):
        port = free_port()
        argv = [sys.executable, "-m", "pyrepl.cli.main", "master", "--port", str(port), "--bind",
                "127.0.0.1", "--save", "", "--always-show-logo", logo]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    if redis.Redis(port=port, socket_timeout=1).ping():
                        break
                except redis.ConnectionError:
                    time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=20)
        assert f"Ready to accept connections tcp on port {port}" in out, (out, err)
        assert "Ready to accept" not in err
        if logo == "yes":
            assert f" PID: {proc.pid}\n" in out and f"Port: {port}\n" in out
            assert "Running mode=" not in out
        else:
            assert f"Running mode=standalone, port={port}." in out and " PID: " not in out


def test_a_busy_port_is_logged_as_redis_and_a_failed_load_after_the_logo(tmp_path: Any) -> None:
    """What Redis's test harness reads in a server's stdout: ``Failed listening on port`` (then
    it retries another port), and the logo's PID before the data is loaded, so a start that
    fails on a bad AOF is seen as started-then-failed, with Redis's error as its last line."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        lines = []
        for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master"],
                     [redis_server_path()]):
            out = subprocess.run([*argv, "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", ""], capture_output=True, text=True, timeout=30,
                                 stdin=subprocess.DEVNULL).stdout
            lines.append([line.split(" # ", 1)[1] for line in out.splitlines()
                          if " # " in line and "listening" in line])
    assert lines[0] == lines[1] == [
        f"Warning: Could not create server TCP listening socket 127.0.0.1:{port}: bind: "
        "Address already in use", f"Failed listening on port {port} (TCP), aborting."]
    aof = tmp_path / "appendonlydir"
    aof.mkdir()
    (aof / "appendonly.aof.manifest").write_text("file appendonly.aof.1.incr.aof seq 1 type i\n")
    (aof / "appendonly.aof.1.incr.aof").write_bytes(b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n!!!")
    # (with a Unix socket too, as Redis's harness starts its servers: the error stays the
    # last line, as Redis's exit(1) leaves it; aof.tcl reads it with tail -1)
    proc = subprocess.run(pyrepl_cmd(free_port(), str(tmp_path), "--appendonly", "yes",
                                     "--always-show-logo", "yes",
                                     "--unixsocket", str(tmp_path / "sock")),
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    out = proc.stdout
    assert proc.returncode == 1
    assert out.index(" PID: ") < out.index("Bad file format reading the append only file")
    assert "Bad file format reading the append only file" in out.strip().splitlines()[-1]


def test_shutdowns_waiting_together_and_aborted_as_redis(tmp_path: Any) -> None:
    """Two SHUTDOWNs while a replica lags: both clients blocked (INFO blocked_clients 2), INFO
    server's shutdown_in_milliseconds counting down, SHUTDOWN ABORT answering both with
    Redis's error; the server stays up (Redis's shutdown.tcl "waits for replica then
    aborted")."""
    seen = {}
    for kind, start in (("redis", start_redis), ("pyrepl", start_pyrepl)):
        with _stopped_replica(tmp_path, kind, start, "--shutdown-timeout", "60") as master, \
                RawClient(master.port) as c, RawClient(master.port) as rd1, \
                RawClient(master.port) as rd2:
            c.call("INCR", "k")
            rd1.send("SHUTDOWN")
            rd2.send("SHUTDOWN")
            wait_for(lambda c=c: info(c, "clients")["blocked_clients"] == "2", timeout=10,
                     what="both SHUTDOWNs blocked")
            left = int(info(c, "server")["shutdown_in_milliseconds"])
            seen[kind] = [0 < left <= 60000, c.call("SHUTDOWN", "ABORT"), rd1.read_reply(),
                          rd2.read_reply(), c.call("PING"),
                          "shutdown_in_milliseconds" in info(c, "server")]
    assert seen["pyrepl"] == seen["redis"] == [
        True, b"+OK\r\n", b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n",
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n", b"+PONG\r\n", False]


def _start_on_dump(tmp_path: Any, blob: bytes) -> list[subprocess.CompletedProcess]:
    """pyrepl, then redis-server, started on a dump.rdb of ``blob`` (each in a directory of
    its own): how each start ended (the test is skipped without redis-server)."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    out = []
    for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master"], [redis_server_path()]):
        d = tmp_path / os.path.basename(argv[-1])
        d.mkdir()
        (d / "dump.rdb").write_bytes(blob)
        out.append(subprocess.run([*argv, "--port", str(free_port()), "--bind", "127.0.0.1",
                                   "--dir", str(d)], capture_output=True, text=True,
                                  timeout=30, stdin=subprocess.DEVNULL))
    return out


def test_a_corrupt_rdb_at_start_is_reported_as_redis(tmp_path: Any) -> None:
    """A dump.rdb whose hash ziplist is corrupt (its second entry's prevlen is wrong): both
    servers name the integrity check that failed, in the error and in the checker's report,
    say "Terminating server after rdb file reading failure." once and exit 1 (Redis's
    corrupt-dump.tcl "load corrupted rdb with no CRC")."""
    from pyrepl.rdb.containers import build_ziplist

    zl = bytearray(build_ziplist([b"a", b"1"]))
    zl[10 + 1 + zl[11] + 1] += 1                 # the second entry's prevlen, off by one
    blob = (b"REDIS0010\xfe\x00\x0d\x01h" + bytes((len(zl),)) + bytes(zl) + b"\xff" + bytes(8))
    for proc in _start_on_dump(tmp_path, blob):
        out = proc.stdout
        assert proc.returncode == 1, out
        assert out.count("Hash ziplist integrity check failed") >= 2, out
        assert out.count("Terminating server after rdb file reading failure.") == 1, out


@pytest.mark.parametrize("how", ["SIGABRT", "DEBUG SEGFAULT"])
def test_a_crash_is_reported_in_the_log(tmp_path: Any, how: str) -> None:
    """Redis's logging.tcl: a SIGABRT sent to the server, or DEBUG SEGFAULT, leaves a crash
    report in the log ("crashed by signal", the stack) and the process dies by that signal."""
    port = free_port()
    proc = subprocess.Popen(pyrepl_cmd(port, str(tmp_path), "--enable-debug-command", "yes"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for(lambda: ping(port), timeout=20, what="pyrepl up")
        if how == "SIGABRT":
            os.kill(proc.pid, signal.SIGABRT)
        else:
            with RawClient(port) as c:
                c.send("DEBUG", "SEGFAULT")
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    sig = signal.SIGABRT if how == "SIGABRT" else signal.SIGSEGV
    assert proc.returncode == -sig
    assert f"crashed by signal: {int(sig)}" in out and "------ STACK TRACE ------" in out


def test_config_set_sync_log_file_moves_the_event_log(tmp_path: Any) -> None:
    """sync-log-file is settable at run time (Redis's CONFIG sanity test sets every config
    CONFIG GET lists): the old file is closed and the next sync's events go to the new one;
    empty turns the log off."""
    master = start_pyrepl("--sync-log-file", "a.ndjson", tmpdir=str(tmp_path))
    try:
        with RawClient(master.port) as c:
            assert c.call("CONFIG", "SET", "sync-log-file", "b.ndjson") == b"+OK\r\n"
            assert c.call("CONFIG", "GET", "sync-log-file") == \
                b"*2\r\n$13\r\nsync-log-file\r\n$8\r\nb.ndjson\r\n"
            replica = start_redis("--replicaof", "127.0.0.1", str(master.port))
            try:
                wait_for(lambda: "state=online" in info(c, "replication").get("slave0", ""),
                         timeout=30, what="replica online")
                wait_for(lambda: (tmp_path / "b.ndjson").exists()
                         and b"psync_decision" in (tmp_path / "b.ndjson").read_bytes(),
                         timeout=10, what="the sync's events in b.ndjson")
            finally:
                replica.stop()
            a = tmp_path / "a.ndjson"
            assert not a.exists() or b"psync_decision" not in a.read_bytes()
    finally:
        master.stop()


def test_a_signal_shutdown_is_begun_by_the_cron_and_can_be_aborted(tmp_path: Any) -> None:
    """Redis's shutdown.tcl: a SIGTERM is acted on by the cron (so DEBUG PAUSE-CRON holds it
    and SHUTDOWN ABORT drops it: "Shutdown manually aborted"); a BGSAVE child's
    temp-<pid>.rdb, in `dir`, is removed when SHUTDOWN NOSAVE kills it. Both servers."""
    for kind, start in (("redis", start_redis), ("pyrepl", start_pyrepl)):
        d = tmp_path / kind
        d.mkdir()
        srv = start("--enable-debug-command", "yes", tmpdir=str(d))
        try:
            with RawClient(srv.port) as c:
                assert c.call("DEBUG", "PAUSE-CRON", "1") == b"+OK\r\n"
                assert srv.proc is not None
                os.kill(srv.proc.pid, signal.SIGTERM)
                time.sleep(0.2)
                assert c.call("SHUTDOWN", "ABORT") == b"+OK\r\n", kind
                assert c.call("DEBUG", "PAUSE-CRON", "0") == b"+OK\r\n"
                time.sleep(0.3)
                assert c.call("PING") == b"+PONG\r\n", kind
                assert "Shutdown manually aborted" in srv.log()
                for i in range(20):
                    c.call("SET", str(i), str(i))
                c.call("CONFIG", "SET", "rdb-key-save-delay", "100000")
                assert c.call("BGSAVE") == b"+Background saving started\r\n"
                wait_for(lambda d=d: any(p.name.startswith("temp-") for p in d.iterdir()),
                         timeout=10, what=f"the child's temp rdb ({kind})")
                c.send("SHUTDOWN", "NOSAVE")
            srv.proc.wait(20)
            assert not [p.name for p in d.iterdir() if p.name.startswith("temp-")], kind
        finally:
            srv.stop()


def test_rename_command_as_redis(tmp_path: Any) -> None:
    """``rename-command`` in the file (Redis's introspection.tcl "CONFIG REWRITE handles
    rename-command properly"): the command answers to its new name only, "" removes it, a
    script sees the same table, CONFIG REWRITE keeps the lines and a restart applies them
    again; an unknown command or a taken name stops the start with Redis's report. Side by
    side with redis-server."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    seen = []
    for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master", "--config"],
                 [redis_server_path()]):
        d = tmp_path / os.path.basename(argv[-1]).lstrip("-")
        d.mkdir()
        port = free_port()
        conf = d / "redis.conf"
        conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {d}\nsave \"\"\n"
                        "rename-command flushdb badger\nrename-command keys \"\"\n")
        row = []
        for _restart in range(2):
            proc = subprocess.Popen([*argv, str(conf)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            try:
                wait_for(lambda p=port: ping(p), timeout=20, what="the server up")
                with RawClient(port) as c:
                    c.call("SET", "k", "v")
                    row += [c.call("FLUSHDB"), c.call("KEYS", "*"), c.call("BADGER"),
                            c.call("DBSIZE"),
                            c.call("EVAL", "return redis.call('flushdb')", "0")[:40],
                            c.call("EVAL", "return redis.call('badger')", "0"),
                            c.call("COMMAND", "INFO", "badger", "flushdb")[:30]]
                    assert c.call("CONFIG", "REWRITE") == b"+OK\r\n"
                    c.send("SHUTDOWN", "NOSAVE")
                proc.wait(timeout=20)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        text = conf.read_text()
        assert "rename-command flushdb badger" in text and 'rename-command keys ""' in text
        fatal = []
        for line in ("rename-command nosuch x", "rename-command get set"):
            bad = d / "bad.conf"
            bad.write_text(f"port {free_port()}\n{line}\n")
            p = subprocess.run([*argv, str(bad)], capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
            assert p.returncode == 1
            fatal.append([ln for ln in (p.stdout + p.stderr).splitlines()
                          if ln.startswith((">>>", "No such", "Target"))])
        seen.append((row, fatal))
    assert seen[0] == seen[1], seen


def _oom(pid: int) -> int:
    with open(f"/proc/{pid}/oom_score_adj") as f:
        return int(f.read())


def test_oom_score_adj_as_redis(tmp_path: Any) -> None:
    """``oom-score-adj`` (Redis's oom-score-adj.tcl): the master's, the replica's and the
    snapshot child's scores from oom-score-adj-values, relative to the score the process had or
    absolute, the old score back with ``no``; side by side with redis-server."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    seen = []
    for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master"], [redis_server_path()]):
        port = free_port()
        d = tmp_path / str(port)
        d.mkdir()
        proc = subprocess.Popen([*argv, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                                 str(d), "--save", ""], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda p=port: ping(p), timeout=20, what="the server up")
            with open(f"/proc/{proc.pid}/oom_score_adj", "w") as f:
                f.write("22\n")
            row = []
            with RawClient(port) as c:
                c.call("CONFIG", "SET", "oom-score-adj-values", "10 20 30")
                row.append(_oom(proc.pid))                       # off: untouched
                c.call("CONFIG", "SET", "oom-score-adj", "yes")
                row.append(_oom(proc.pid))                       # 22 + 10
                c.call("REPLICAOF", "127.0.0.1", "1")
                row.append(_oom(proc.pid))                       # 22 + 20
                c.call("REPLICAOF", "NO", "ONE")
                row.append(_oom(proc.pid))
                c.call("SET", "k", "v")
                c.call("CONFIG", "SET", "rdb-key-save-delay", "1000000")
                c.call("BGSAVE")
                child = [int(x) for x in open(f"/proc/{proc.pid}/task/{proc.pid}/children")
                         .read().split()]
                wait_for(lambda ch=child: ch and _oom(ch[0]) == 52, timeout=10,
                         what="the child's score")
                c.call("CONFIG", "SET", "rdb-key-save-delay", "0")   # (the child ends soon)
                c.call("CONFIG", "SET", "oom-score-adj", "absolute")
                row.append(_oom(proc.pid))                       # 10
                c.call("CONFIG", "SET", "oom-score-adj-values", "2001 0 0")
                row.append(_oom(proc.pid))                       # refused: still 10
                c.call("CONFIG", "SET", "oom-score-adj", "no")
                row.append(_oom(proc.pid))                       # 22 again
            seen.append(row)
        finally:
            proc.kill()
            proc.wait()
    assert seen[0] == seen[1] == [22, 32, 42, 32, 10, 10, 22], seen


def _saving_server(argv: list[str], d: Any, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([*argv, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
                             "--save", "900 1", "--logfile", str(d / "log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    wait_for(lambda: ping(port), timeout=20, what="the server up")
    with RawClient(port) as c:
        for i in range(20):
            c.call("SET", str(i), str(i))
        c.call("CONFIG", "SET", "rdb-key-save-delay", "100000")     # 2 s to save 20 keys
    return proc


def test_temp_rdb_files_go_with_the_server_as_redis(tmp_path: Any) -> None:
    """Redis's shutdown.tcl: SHUTDOWN NOSAVE during a BGSAVE stops listening before the
    client's connection closes (a reconnect is refused) and the child's temp-<pid>.rdb is
    removed; a second SIGINT during the final save exits at once (status 1, "You insist"), its
    temp-<pid>.rdb removed. Beside redis-server."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master"], [redis_server_path()]):
        d = tmp_path / f"{os.path.basename(argv[-1])}-1"
        d.mkdir()
        port = free_port()
        proc = _saving_server(argv, d, port)
        try:
            with RawClient(port) as c:
                c.call("BGSAVE")
                wait_for(lambda dd=d: any(p.name.startswith("temp-") for p in dd.iterdir()),
                         timeout=10, what="the child's temp file")
                c.send("SHUTDOWN", "NOSAVE")
                assert c.sock.recv(100) == b""
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            assert proc.wait(timeout=20) == 0
            wait_for(lambda dd=d: not any(p.name.startswith("temp-") for p in dd.iterdir()),
                     timeout=10, what="the temp file removed")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        d = tmp_path / f"{os.path.basename(argv[-1])}-2"
        d.mkdir()
        port = free_port()
        proc = _saving_server(argv, d, port)
        try:
            temp = d / f"temp-{proc.pid}.rdb"
            proc.send_signal(signal.SIGINT)
            wait_for(temp.exists, timeout=10, what="the final save's temp file")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 1
            assert not temp.exists()
            assert "You insist... exiting now." in (d / "log").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_an_rdb_with_a_wrong_checksum_stops_the_start_as_redis(tmp_path: Any) -> None:
    """Redis's rdb.tcl "Server should not start if RDB is corrupted": a dump whose CRC64 is
    wrong stops the start, "RDB CRC error" in the log, exit 1, on both servers."""
    from pyrepl.rdb.crc64 import crc64

    body = b"REDIS0010\xfe\x00\xfb\x01\x00\x00\x01k\x01v\xff"
    good = body + crc64(body).to_bytes(8, "little")
    blob = good[:-8] + b"foobar00"
    for proc in _start_on_dump(tmp_path, blob):
        assert proc.returncode == 1, proc.stdout
        assert "RDB CRC error" in proc.stdout and "Wrong RDB checksum expected" in proc.stdout


def test_clients_are_served_while_the_rdb_loads_as_redis(tmp_path: Any) -> None:
    """Redis's "config during loading" / "client freed during loading": while the RDB file
    loads at start (slowed by key-load-delay), connections are accepted and served between
    chunks of loading-process-events-interval-bytes: INFO says loading:1 with the loading_*
    fields, a data command gets -LOADING, a CONFIG SET of a deny-loading directive too, one of
    another is done, clients come and go; then every key is there. Beside redis-server."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    seen = []
    for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master"], [redis_server_path()]):
        d = tmp_path / os.path.basename(argv[-1])
        d.mkdir()
        port = free_port()
        base = [*argv, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
                "--save", "", "--enable-debug-command", "yes", "--rdbcompression", "no"]
        proc = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda p=port: ping(p), timeout=20, what="the server up")
            with RawClient(port) as c:
                c.call("DEBUG", "POPULATE", "5000", "key", "1000")
                c.call("SAVE")
                c.send("SHUTDOWN", "NOSAVE")
            proc.wait(timeout=20)
            proc = subprocess.Popen([*base, "--key-load-delay", "1000",
                                     "--loading-process-events-interval-bytes", "1024"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    stdin=subprocess.DEVNULL)
            def loading(port: int = port) -> bool:
                try:
                    with RawClient(port) as c:
                        return b"loading:1" in c.call("INFO", "persistence")
                except OSError:
                    return False
            wait_for(loading, timeout=20, what="the load under way")
            row = []
            with RawClient(port) as c:
                text = parse_reply(c.call("INFO", "persistence")).decode()
                row.append(sorted(k for k in re.findall(r"^(loading\w*):", text, re.M)))
                row += [c.call("GET", "key:1")[:8], c.call("DBSIZE")[:8],
                        c.call("CONFIG", "SET", "dir", str(d))[:8],
                        c.call("CONFIG", "SET", "appendonly", "yes"),
                        c.call("CONFIG", "SET", "loglevel", "debug")]
                for _ in range(5):
                    with RawClient(port) as other:
                        row.append(other.call("DEBUG", "LOG", "bla"))
                assert b"loading:1" in c.call("INFO", "persistence")
            wait_for(lambda p=port: ping(p), timeout=60, what="the load done")
            with RawClient(port) as c:
                row.append(c.call("DBSIZE"))
            seen.append(row)
        finally:
            proc.kill()
            proc.wait()
    assert seen[0] == seen[1], seen


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        raw = f.read()
    # (setproctitle writes the title over argv: one string, the rest NULs; Redis's the same)
    return raw.replace(b"\0", b" ").decode().split()


def test_process_title_as_redis(tmp_path: Any) -> None:
    """``proc-title-template`` (Redis's other.tcl "Process title set as expected"): the title
    /proc/<pid>/cmdline shows, with every variable, is Redis's (the command as started aside);
    a bad template is refused with Redis's error; ``set-proc-title no`` leaves it alone."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    template = "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file} {server-mode}"
    seen = []
    for argv in ([sys.executable, "-m", "pyrepl.cli.main", "master"], [redis_server_path()]):
        port = free_port()
        d = tmp_path / str(port)
        d.mkdir()
        conf = d / "my.conf"
        conf.write_text(f"unixsocket {d}/sock\n")
        proc = subprocess.Popen([*argv, str(conf), "--port", str(port), "--bind", "127.0.0.1",
                                 "--dir", str(d), "--save", ""] if "redis" in argv[0] else
                                [*argv, "--config", str(conf), "--port", str(port), "--bind",
                                 "127.0.0.1", "--dir", str(d), "--save", ""],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda p=port: ping(p), timeout=20, what="the server up")
            first = _cmdline(proc.pid)
            with RawClient(port) as c:
                assert c.call("CONFIG", "SET", "proc-title-template", template) == b"+OK\r\n"
                title = _cmdline(proc.pid)
                bad = c.call("CONFIG", "SET", "proc-title-template", "{invalid-var}")
            # (the port and the directory differ between the two: named, not compared)
            norm = [w.replace(str(d), "DIR").replace(str(port), "PORT") for w in title]
            seen.append(([w.replace(str(port), "PORT") for w in first[1:]], norm[0], norm[2:],
                         bad))
        finally:
            proc.kill()
            proc.wait()
    assert seen[0] == seen[1], seen
    first, test, rest, bad = seen[0]
    assert first == ["127.0.0.1:PORT"]    # the default: "{title} {listen-addr} {server-mode}"
    assert test == "TEST" and rest == ["127.0.0.1:PORT", "PORT", "0", "DIR/sock", "DIR/my.conf"]
    assert b"template format is invalid" in bad


def test_set_proc_title_no_keeps_the_command_line(tmp_path: Any) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "pyrepl.cli.main", "master", "--port", str(port), "--bind",
            "127.0.0.1", "--dir", str(tmp_path), "--save", "", "--set-proc-title", "no"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: ping(port), timeout=20, what="the server up")
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[:-1] == [a.encode() for a in argv]
    finally:
        proc.kill()
        proc.wait()
