"""scripts/redis_suite.py loaded as a module (it is a script, not part of the package)."""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def runner() -> Any:
    spec = importlib.util.spec_from_file_location(
        "redis_suite", os.path.join(ROOT, "scripts", "redis_suite.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["redis_suite"] = mod      # (its dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod
