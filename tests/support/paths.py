"""Where things are: the repository (``ROOT``), the tests' data files (``DATA_DIR``) and Redis's
source package as ``make redis-src`` leaves it (``redis_source_file``)."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: tests/data: the golden RDB files and make_golden_rdb.py, which writes them.
DATA_DIR = os.path.join(ROOT, "tests", "data")

#: Redis's sources as ``make redis-src`` (scripts/redis-src.sh) leaves them in the repository.
REDIS_SRC = os.path.join(ROOT, ".cache", "redis-src")
REDIS7_SRC = os.path.join(REDIS_SRC, "redis-7.0.15")
REDIS8_SRC = os.path.join(REDIS_SRC, "redis-8")
#: Valkey 8.1's sources (Debian trixie's source package), built by the same script.
VALKEY_SRC = os.path.join(REDIS_SRC, "valkey-8")


def redis_source_file(*parts: str, version: int = 7) -> str:
    """A file of Redis's source package (7.0.15 or 8.x); fails clearly when the set-up that
    fetches it (``make redis-src``, part of ``make test``) has not run."""
    path = os.path.join(REDIS7_SRC if version == 7 else REDIS8_SRC, *parts)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: run `make redis-src` (part of `make test`), "
                                "which fetches Redis's source package with apt-get source")
    return path
