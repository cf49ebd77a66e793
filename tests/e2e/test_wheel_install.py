"""The wheel, installed as a user installs it (not editable): built from the tree with pip, put
into a fresh virtualenv, and run from outside the repository — a master, a replica following
it, EVAL (pyrepl.scripting) and a small ``pyrepl metrics`` (the analytics' data files).

The fresh venv takes its dependencies (uvloop, hiredis, lupa, pyspark ...) from the test venv's
site-packages through a path line in a ``.pth`` file: a path so added is not scanned for ``.pth``
files itself, so the test venv's editable pyrepl stays out of sight and ``import pyrepl`` finds
only the wheel's (asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest

from tests.support.procs import ServerProcess, free_port
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("wheel")
    wheels = base / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "-q", "-w",
                    str(wheels)], check=True, timeout=900, cwd=str(base))
    (wheel,) = wheels.glob("pyrepl-*.whl")
    env = str(base / "venv")
    subprocess.run([sys.executable, "-m", "venv", env], check=True, timeout=300)
    py = os.path.join(env, "bin", "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site, "deps-from-test-venv.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=300)
    return env


def _run(venv: str, *args: str, cwd: str, timeout: float = 120) -> str:
    res = subprocess.run([os.path.join(venv, "bin", args[0]), *args[1:]], cwd=cwd,
                         capture_output=True, text=True, timeout=timeout,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_the_wheel_has_every_package_and_data_file(venv: str, tmp_path) -> None:
    out = _run(venv, "python", "-c",
               "import os, pyrepl, pyrepl.scripting.engine, pyrepl.aof.appendonly, "
               "pyrepl.analytics.session as s; "
               "d = os.path.dirname(s.__file__); "
               "print(pyrepl.__file__); "
               "print(sorted(f for f in os.listdir(d) if not f.endswith(('.py', '__pycache__'))))",
               cwd=str(tmp_path))
    where, data = out.splitlines()
    assert where.startswith(venv) and "site-packages" in where    # the wheel's, not the tree's
    assert data == "['jit-after-pass.json', 'log4j2.properties']"


def test_a_master_a_replica_eval_and_metrics_from_the_wheel(venv: str, tmp_path) -> None:
    import redis

    procs = []
    try:
        ports = []
        for name, extra in (("m", ()), ("r", ("--replicaof", "127.0.0.1"))):
            d = tmp_path / name
            d.mkdir()
            port = free_port()
            argv = [os.path.join(venv, "bin", "pyrepl"), "master", "--port", str(port),
                    "--bind", "127.0.0.1", "--dir", str(d), "--save", "",
                    "--repl-diskless-sync-delay", "0", "--sync-log-file", "sync.ndjson"]
            if extra:
                argv += [*extra, str(ports[0])]
            procs.append(ServerProcess(argv, port, str(d), f"wheel-{name}").start())
            ports.append(port)
        m, rep = (redis.Redis(port=p) for p in ports)
        assert m.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
                      1, "k", "v") == b"v"
        m.set("plain", "1")
        wait_for(lambda: rep.get("k") == b"v" and rep.get("plain") == b"1", timeout=60,
                 what="the replica to follow the master")
    finally:
        for p in procs:
            p.stop()
    logs = [str(tmp_path / n / "sync.ndjson") for n in ("m", "r")]
    out = tmp_path / "metrics"
    stdout = _run(venv, "pyrepl", "metrics", *logs, "--out", str(out), "--spark-master",
                  "local[1]", "--conf", "spark.sql.shuffle.partitions=1", cwd=str(tmp_path),
                  timeout=600)
    assert "report: " in stdout and (out / "report.html").exists()
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["input"]["malformed_lines"] == 0
    assert summary["psync"]["full"] == 1 and summary["psync"]["syncs"] == 1, summary["psync"]
