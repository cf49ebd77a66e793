"""The CLI and RDB persistence end to end: real processes, real files, real sockets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import redis

from tests.support.procs import free_port, start_pyrepl
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

PYREPL = [sys.executable, "-m", "pyrepl.cli.main"]


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([*PYREPL, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_version_and_help() -> None:
    from pyrepl import REDIS_VERSION, __version__

    out = run_cli("--version")
    assert out.returncode == 0
    assert __version__ in out.stdout and REDIS_VERSION in out.stdout
    top = run_cli("--help")
    assert top.returncode == 0 and "master" in top.stdout and "replica" in top.stdout
    m = run_cli("master", "--help")
    assert "--config" in m.stdout and "--port" in m.stdout and "--dir" in m.stdout
    r = run_cli("replica", "--help")
    assert "--master" in r.stdout


def test_bad_config_refuses_to_start_with_file_and_line(tmp_path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("port 7000\n# comment\nmaxclients lots\n")
    out = run_cli("master", "--config", str(conf))
    assert out.returncode != 0
    assert f"{conf}:3" in out.stderr
    unknown = tmp_path / "unknown.conf"
    unknown.write_text("no-such-directive yes\n")
    out = run_cli("master", "--config", str(unknown))
    assert out.returncode != 0 and f"{unknown}:1" in out.stderr
    out = run_cli("master", "--port", "99999999")
    assert out.returncode != 0


def test_config_file_with_overrides(tmp_path) -> None:
    port = free_port()
    conf = tmp_path / "m.conf"
    conf.write_text(f'port 1\ndir "{tmp_path}"\nsave ""\nmaxclients 77\n')
    srv = start_pyrepl(tmpdir=str(tmp_path), port=port)  # plain start to have a baseline
    srv.stop()
    from tests.support.procs import ServerProcess

    argv = [*PYREPL, "master", "--config", str(conf), "--port", str(port),
            "--bind", "127.0.0.1", "--hz", "20", "--repl-backlog-size", "2mb"]
    with ServerProcess(argv, port, str(tmp_path), "override").start():
        r = redis.Redis(port=port)
        cfg = r.config_get("*")
        assert cfg["port"] == str(port)
        assert cfg["maxclients"] == "77"
        assert cfg["hz"] == "20"
        assert cfg["repl-backlog-size"] == str(2 * 1024 * 1024)
        assert r.info("server")["config_file"] == str(conf)


def test_save_restart_and_load(tmp_path) -> None:
    with start_pyrepl(tmpdir=str(tmp_path)) as srv:
        r = redis.Redis(port=srv.port)
        r.execute_command("DEBUG", "POPULATE", "1000", "k", "20")
        digest = r.execute_command("DEBUG", "DIGEST")
        assert r.save()
        assert os.path.exists(tmp_path / "dump.rdb")
        last = r.lastsave()
        assert last is not None
    with start_pyrepl(tmpdir=str(tmp_path), port=srv.port) as srv2:
        r = redis.Redis(port=srv2.port)
        assert r.dbsize() == 1000
        assert r.execute_command("DEBUG", "DIGEST") == digest
        assert r.info("persistence")["rdb_last_load_keys_loaded"] == 1000


def test_bgsave_forks_a_child_and_reports_progress(tmp_path) -> None:
    with start_pyrepl(tmpdir=str(tmp_path)) as srv:
        r = redis.Redis(port=srv.port)
        r.execute_command("DEBUG", "POPULATE", "20000")
        r.execute_command("SWAPDB", "0", "1")
        r.execute_command("SWAPDB", "0", "1")
        assert r.info("persistence")["rdb_changes_since_last_save"] == 2
        before = r.info("persistence")["rdb_saves"]
        assert r.bgsave()
        wait_for(lambda: r.info("persistence")["rdb_bgsave_in_progress"] == 0
                 and r.info("persistence")["rdb_saves"] == before + 1, 30, what="bgsave")
        info = r.info("persistence")
        assert info["rdb_last_bgsave_status"] == "ok"
        assert info["rdb_changes_since_last_save"] == 0
        assert r.info("stats")["total_forks"] >= 1
        assert os.path.getsize(tmp_path / "dump.rdb") > 20000 * 10


def test_sigterm_saves_when_save_points_are_configured(tmp_path) -> None:
    srv = start_pyrepl("--save", "3600 1", tmpdir=str(tmp_path))
    r = redis.Redis(port=srv.port)
    r.execute_command("DEBUG", "POPULATE", "500")
    digest = r.execute_command("DEBUG", "DIGEST")
    code = srv.stop(signal.SIGTERM)
    assert code == 0
    assert "Saving the final RDB snapshot" in srv.log()
    with start_pyrepl(tmpdir=str(tmp_path), port=srv.port) as srv2:
        assert redis.Redis(port=srv2.port).execute_command("DEBUG", "DIGEST") == digest


def test_shutdown_nosave_writes_nothing_and_exits(tmp_path) -> None:
    srv = start_pyrepl("--save", "3600 1", tmpdir=str(tmp_path))
    r = redis.Redis(port=srv.port)
    r.execute_command("DEBUG", "POPULATE", "10")
    with pytest.raises(redis.exceptions.ConnectionError):
        r.execute_command("SHUTDOWN", "NOSAVE")
    wait_for(lambda: not srv.alive(), 15, what="server exit")
    assert not os.path.exists(tmp_path / "dump.rdb")
    srv.stop()


def test_save_schedule_triggers_bgsave(tmp_path) -> None:
    with start_pyrepl("--save", "1 5", tmpdir=str(tmp_path)) as srv:
        r = redis.Redis(port=srv.port)
        r.execute_command("SWAPDB", "0", "1")  # a write: dirty > 0
        for _ in range(6):
            r.execute_command("SWAPDB", "0", "1")
        wait_for(lambda: os.path.exists(tmp_path / "dump.rdb"), 15, what="scheduled save")
        assert "changes in 1 seconds. Saving..." in srv.log()


def test_replica_command_configures_replicaof(tmp_path) -> None:
    port = free_port()
    from tests.support.procs import ServerProcess

    argv = [*PYREPL, "replica", "--master", "127.0.0.1:1", "--port", str(port),
            "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", ""]
    with ServerProcess(argv, port, str(tmp_path), "replica").start():
        r = redis.Redis(port=port)
        assert r.config_get("replicaof")["replicaof"] == "127.0.0.1 1"
    bad = run_cli("replica", "--master", "nonsense")
    assert bad.returncode != 0 and "HOST:PORT" in bad.stderr


def test_unreadable_rdb_refuses_to_start_with_clear_error(tmp_path) -> None:
    (tmp_path / "dump.rdb").write_bytes(b"REDIS0009garbage-garbage")
    port = free_port()
    p = subprocess.run([*PYREPL, "master", "--port", str(port), "--dir", str(tmp_path),
                        "--bind", "127.0.0.1", "--save", ""], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode != 0
    # (the log: stdout when no logfile, as Redis; its words for an RDB it cannot read)
    assert "Internal error in RDB reading" in p.stdout
    assert "Terminating server after rdb file reading failure." in p.stdout


def test_config_set_port_rebinds_and_a_busy_port_is_refused(tmp_path) -> None:
    srv = start_pyrepl(tmpdir=str(tmp_path))
    new_port = free_port()
    try:
        r = redis.Redis(port=srv.port)
        assert r.config_set("port", new_port)
        r2 = redis.Redis(port=new_port)
        assert r2.ping() and r2.config_get("port")["port"] == str(new_port)
        wait_for(lambda: not _accepts(srv.port), 5, what="old port closed")
        # a port in use: the change is refused and rolled back
        import socket as _s
        blocker = _s.socket()
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        busy = blocker.getsockname()[1]
        with pytest.raises(redis.ResponseError, match="Unable to listen on this port"):
            r2.config_set("port", busy)
        assert r2.config_get("port")["port"] == str(new_port) and r2.ping()
        blocker.close()
    finally:
        srv.port = new_port
        srv.stop()


def _accepts(port: int) -> bool:
    import socket as _s
    try:
        with _s.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
