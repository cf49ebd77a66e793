"""pyrepl/native.py: the compiled extensions all run, or none does and pyrepl runs as plain
Python on their references; and an extension called before its bind() raises instead of
calling through a NULL pointer."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from pyrepl import native
from tests.support.procs import start_pyrepl
from tests.support.redispy import r
from tests.support.waits import wait_synced

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _setup_extensions() -> list[ast.Call]:
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
            getattr(n.func, "id", "") == "Extension"]


def test_native_lists_every_extension_setup_builds_and_each_is_optional() -> None:
    calls = _setup_extensions()
    names = [c.args[0].value for c in calls]   # type: ignore[attr-defined]
    assert sorted(names) == sorted(native.EXTENSIONS)
    optional = {c.args[0].value: any(k.arg == "optional" and k.value.value is True  # type: ignore
                                     for k in c.keywords) for c in calls}
    assert all(optional.values()), optional


def _python(code: str, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYREPL_PURE"}
    if pure:
        env["PYREPL_PURE"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# Everything a server imports, then which extensions got imported and which code runs.
_PROBE = """
import sys
import pyrepl.net.server, pyrepl.aof.loader
from pyrepl import fastpath, native, plainrun
from pyrepl.commands import strings
from pyrepl.commands.table import COMMANDS
from pyrepl.keyspace import digest
from pyrepl.keyspace.zset import ZSet
from pyrepl.keyspace.ktable import KeyTable
from pyrepl.resp import fastreader, scan, writer
from pyrepl.replication.manager import Replication
print(native.PURE, sorted(m for m in native.EXTENSIONS if m in sys.modules))
print(ZSet.__bases__[-1].__module__, KeyTable.__module__, COMMANDS[b"set"].handler.__module__,
      fastpath.execute is fastpath.execute_reference,
      fastpath.start_run is plainrun.start, fastpath.account_run is plainrun.account,
      scan.scan is scan.scan_reference, fastreader.first is fastreader._first_reference,
      plainrun.run_length is plainrun.run_length_reference,
      strings.store_pairs is strings.store_pairs_reference,
      strings.lookup_strings is strings.lookup_strings_reference,
      writer.bulk_replies is writer.bulk_replies_reference,
      digest.mix is digest.mix_reference,
      Replication.feed_span_c.__module__,
      "data_received" in vars(pyrepl.net.server.ClientProtocol(type("S", (), {"core": None})())))
"""


def test_pyrepl_pure_runs_every_python_reference_and_imports_no_extension() -> None:
    first, second = _python(_PROBE, pure=True).splitlines()
    assert first == "True []"
    assert second.split() == ["pyrepl.keyspace.zindex", "pyrepl.keyspace.ktable",
                              "pyrepl.commands.strings",
                              *["True"] * 10, "pyrepl.replication.manager", "False"]


@pytest.mark.skipif(native.PURE, reason=f"the extensions are not in use ({native.WHY_PURE})")
def test_by_default_every_extension_runs() -> None:
    first, second = _python(_PROBE, pure=False).splitlines()
    assert first == f"False {sorted(native.EXTENSIONS)}".replace('"', "'")
    assert second.split() == ["pyrepl.keyspace._zbtree", "pyrepl.keyspace._ktable",
                              "pyrepl.commands._hot",
                              *["False"] * 10, "pyrepl.replication._feed", "True"]


def test_an_extension_missing_makes_all_plain_python(monkeypatch, tmp_path) -> None:
    """An install where one extension did not build runs none (they bind to each other)."""
    monkeypatch.delenv("PYREPL_PURE", raising=False)
    monkeypatch.setattr(native, "_ROOT", str(tmp_path))
    assert native._why_pure() == "not built: " + ", ".join(native.EXTENSIONS)
    monkeypatch.setenv("PYREPL_PURE", "0")
    assert native._why_pure().startswith("not built: ")
    monkeypatch.setenv("PYREPL_PURE", "1")
    assert native._why_pure() == "PYREPL_PURE is set"
    with pytest.raises(ValueError):
        native.load("pyrepl.resp.reader")


@pytest.mark.skipif(native.PURE, reason=f"the extensions are not in use ({native.WHY_PURE})")
@pytest.mark.parametrize("module,call", [
    ("pyrepl._dispatch", "execute(None, None, [])"),
    ("pyrepl._plainrun", "start(None, None, [], [])"),
    ("pyrepl._plainrun", "account(None, None, [], True, 0)"),
    ("pyrepl.commands._hot", "set(None, [b'SET', b'k', b'v'])"),
    ("pyrepl.net._serve", "received(None, b'')"),
    ("pyrepl.replication._feed", "feed_raw(None, b'')"),
    ("pyrepl.resp._scan", "first(None, b'')"),
])
def test_an_extension_called_before_bind_raises(module: str, call: str) -> None:
    """Imported alone (nothing of pyrepl bound it), each entry point that needs its bind()
    answers RuntimeError, where it used to call through a NULL pointer."""
    out = _python(f"import importlib\nm = importlib.import_module({module!r})\n"
                  f"try:\n    m.{call}\nexcept RuntimeError as e:\n    print(e)\n", pure=False)
    assert out.endswith("called before its module's bind()"), out


@pytest.mark.slow
def test_a_plain_python_master_and_replica_serve_and_sync(monkeypatch) -> None:
    """As plain Python a master serves the hot commands (pipelined runs included) and a
    replica syncs, with the same dataset digest; the log says which code runs."""
    monkeypatch.setenv("PYREPL_PURE", "1")
    with start_pyrepl() as master, \
            start_pyrepl("--master", f"127.0.0.1:{master.port}", role="replica") as replica:
        with r(master.port) as c:
            p = c.pipeline(transaction=False)
            for i in range(300):
                p.set(f"k{i}", i).incr("n").lpush("l", i).hset("h", f"f{i}", i)
                p.zadd("z", {f"m{i}": i % 17})
            p.execute()
            assert c.zrange("z", 0, 2) == [b"m0", b"m102", b"m119"]
            assert c.mget("k1", "k299", "nokey") == [b"1", b"299", None]
            assert c.get("n") == b"300" and c.llen("l") == 300
        wait_synced(master.port, replica.port)
        assert "Running as plain Python: PYREPL_PURE is set" in master.log()
