"""The layering, as import-linter contracts (setup.cfg ``[importlinter]``): the layers from the
bottom, resp, keyspace, rdb, replication, aof, the core (with the commands and scripting) and
the I/O shell, each importing only those below it; the replication, AOF, keyspace, RDB and
RESP layers never import the commands, the core or the I/O shell; the daemon never imports
pyspark. A violation names the import chain."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_contracts_are_kept() -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    assert os.path.exists(exe), "import-linter is installed by the test extras (make test)"
    out = subprocess.run([exe, os.path.join(ROOT, "setup.cfg")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in out.stdout
