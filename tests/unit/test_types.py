"""Type checking as part of the tests: the packages that are mypy-clean under ``--strict``
stay so (the AOF, pyrepl/aof/, whose ports to the server are Protocols; the ports of the
keyspace and of replication; the core's cron, persistence, shutdown, stats and host; the
extensions' switch and the Python references written for it; the core, its dispatch,
propagation and the ports of its parts; the replication layer: its manager, backlog, master
side and replica side), every port's implementations satisfy it
(tests/unit/ports_conformance.py), and the whole package passes mypy's default mode. Imports
outside the strict list are followed silently there: their own errors are not its business."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRICT = ["pyrepl/aof", "pyrepl/keyspace/ports.py",
          "tests/unit/ports_conformance.py",
          # the core's parts taken out of ServerCore, and the plain-Python references
          "pyrepl/core/cron.py", "pyrepl/core/persistence.py", "pyrepl/core/shutdown.py",
          "pyrepl/core/stats.py", "pyrepl/core/host.py", "pyrepl/native.py", "pyrepl/fastpath.py",
          "pyrepl/keyspace/zindex.py", "pyrepl/keyspace/listpack.py", "pyrepl/resp/scan.py",
           "pyrepl/keyspace/ageing.py", "pyrepl/memacct.py", "tests/unit/fakes.py",
           "pyrepl/keyspace/ktable.py", "pyrepl/core/evict.py",
          # the core itself, its dispatch and propagation, and the ports of its parts
          "pyrepl/core/server.py", "pyrepl/core/client.py", "pyrepl/core/dispatch.py",
          "pyrepl/core/propagation.py", "pyrepl/core/ports.py", "pyrepl/core/blocking.py",
          "pyrepl/core/pubsub.py", "pyrepl/core/tracking.py", "pyrepl/core/pause.py",
          # the whole replication layer: its manager, backlog, master and replica sides
          "pyrepl/replication"]


def test_the_strict_packages_pass_mypy_strict() -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "mypy")
    assert os.path.exists(exe), "mypy is installed by the test extras (make test)"
    out = subprocess.run([exe, "--strict", "--follow-imports=silent", *STRICT], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]



def test_the_whole_package_passes_mypy() -> None:
    """Every module of pyrepl/ type-checks (mypy's default mode; the strict list above is the
    stricter bar)."""
    exe = os.path.join(os.path.dirname(sys.executable), "mypy")
    out = subprocess.run([exe, "pyrepl"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
