"""Which compiled extensions run, decided once for the whole process: all of them, or none.

pyrepl's extensions (setup.py lists them and why each is C) are shortcuts for common cases:
each keeps its Python reference, the code that runs whenever the shortcut does not apply, and
that reference is all pyrepl needs. ``load(name)`` answers the extension module, or None when
pyrepl runs as plain Python; each caller then takes its reference (``ServerCore.execute`` for
``_dispatch.execute``, ``plainrun.start`` for ``_plainrun.start``, ``keyspace/zindex.py`` for
``_zbtree.ZIndex`` ...).

Plain Python when ``PYREPL_PURE=1`` (to debug with pdb or a profiler that sees every line, to
check that the references alone pass the tests: CI runs the unit suite this way), or when one
of the extensions is not built (an install without a C compiler: setup.py marks them optional).
All or none, because the extensions bind to each other (``_dispatch`` calls ``_feed``, ``_serve``
calls ``_dispatch`` and ``_scan``): a mix would be a combination no test ran. Whether they were
built is read from the files beside the modules, so deciding imports nothing.
"""

from __future__ import annotations

import importlib
import os
from importlib.machinery import EXTENSION_SUFFIXES
from types import ModuleType

# Every extension setup.py builds (tests/unit/test_native.py checks the two lists agree).
EXTENSIONS = (
    "pyrepl.resp._scan",
    "pyrepl.resp._encode",
    "pyrepl._plainrun",
    "pyrepl._dispatch",
    "pyrepl.replication._feed",
    "pyrepl.replication.replica._streamread",
    "pyrepl.net._serve",
    "pyrepl.commands._hot",
    "pyrepl.keyspace._zbtree",
    "pyrepl._memacct",
    "pyrepl.keyspace._ktable",
    "pyrepl.keyspace._streamlp",
    "pyrepl.keyspace._lphash",
    "pyrepl.keyspace._intset",
    "pyrepl.keyspace._lplist",
    "pyrepl.keyspace._lpzset",
    "pyrepl.keyspace._strtab",
    "pyrepl.keyspace._hll",
    "pyrepl.keyspace._digest",
    "pyrepl.commands._geo",
    "pyrepl.rdb._codec",
    "pyrepl.scripting._luacall",
)

_ROOT = os.path.dirname(os.path.abspath(__file__))


def _built(name: str) -> bool:
    base = os.path.join(_ROOT, *name.split(".")[1:])
    return any(os.path.exists(base + suffix) for suffix in EXTENSION_SUFFIXES)


def _why_pure() -> str:
    """Why pyrepl runs as plain Python ("" when it does not)."""
    if os.environ.get("PYREPL_PURE", "") not in ("", "0"):
        return "PYREPL_PURE is set"
    missing = [name for name in EXTENSIONS if not _built(name)]
    if missing:
        return "not built: " + ", ".join(missing)
    return ""


WHY_PURE = _why_pure()
PURE = bool(WHY_PURE)


def load(name: str) -> ModuleType | None:
    """The extension ``name`` (one of EXTENSIONS), or None when pyrepl runs as plain Python."""
    if name not in EXTENSIONS:
        raise ValueError(f"{name} is not one of pyrepl's extensions")
    if PURE:
        return None
    return importlib.import_module(name)


def mode() -> str:
    """One line for the log and ``pyrepl --version``: which code runs."""
    return f"plain Python ({WHY_PURE})" if PURE else "native extensions"
