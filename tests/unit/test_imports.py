"""Every module of pyrepl imports alone, first, in a fresh interpreter: no import cycle that
only a lucky import order hides (pyrepl.acl and the commands package had one; the core's
package imports nothing for this reason)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def modules() -> list[str]:
    out = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "pyrepl")):
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)[:-3].replace(os.sep, ".")
                out.append(rel.removesuffix(".__init__"))
    return sorted(out)


def test_the_walker_finds_the_packages() -> None:
    found = modules()
    assert "pyrepl.core.server" in found and "pyrepl.commands" in found and len(found) > 100


@pytest.mark.slow
def test_every_module_imports_alone() -> None:
    failed = []
    for name in modules():
        r = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            failed.append(f"{name}: {r.stderr.strip().splitlines()[-1]}")
    assert not failed, "\n".join(failed)
