"""The sans-io rule: below pyrepl/net/ nothing imports asyncio, uvloop, socket, signal or time,
and nothing calls os.fork — so the core runs under a fake clock with no sockets."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "pyrepl")
FORBIDDEN_MODULES = {"asyncio", "uvloop", "socket", "signal", "time", "selectors", "threading"}
# The analytics job runs Spark (its own process world), not the server: it is outside the rule.
EXEMPT_DIRS = {"net", "analytics"}


def core_files() -> list[str]:
    out = []
    for dirpath, _dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        if rel.split(os.sep)[0] in EXEMPT_DIRS:
            continue
        out.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    return sorted(out)


@pytest.mark.parametrize("path", core_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_core_module_does_no_io_of_its_own(path: str) -> None:
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] not in FORBIDDEN_MODULES, \
                    f"{path}:{node.lineno} imports {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            assert node.module.split(".")[0] not in FORBIDDEN_MODULES, \
                f"{path}:{node.lineno} imports from {node.module}"
        elif isinstance(node, ast.Attribute) and node.attr in ("fork", "forkpty"):
            assert not (isinstance(node.value, ast.Name) and node.value.id == "os"), \
                f"{path}:{node.lineno} calls os.{node.attr}"


def test_the_walker_finds_the_core() -> None:
    names = {os.path.relpath(p, ROOT) for p in core_files()}
    assert os.path.join("core", "server.py") in names and os.path.join("keyspace", "db.py") in names
