"""The layering, as import-linter contracts (setup.cfg ``[importlinter]``): the layers from the
bottom, resp, keyspace, rdb, replication, aof, the core (with the commands and scripting) and
the I/O shell, each importing only those below it; the replication, AOF, keyspace, RDB and
RESP layers never import the commands, the core or the I/O shell; the daemon never imports
pyspark. Imports under ``TYPE_CHECKING`` count too (``exclude_type_checking_imports = False``):
a lower layer names what it needs of the server through its ports (Protocols), never the
server's classes. A violation names the import chain."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_contracts_are_kept() -> None:
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    assert os.path.exists(exe), "import-linter is installed by the test extras (make test)"
    # (no cache: a cache from an older tree can report chains that are gone, or miss new ones)
    out = subprocess.run([exe, "--no-cache", os.path.join(ROOT, "setup.cfg")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in out.stdout
