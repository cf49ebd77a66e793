"""pyrepl: a Redis-compatible master/replica replication daemon in Python."""

from __future__ import annotations

__version__ = "0.1.0"

# The Redis version whose behaviour pyrepl matches (clients and test suites gate features on
# ``redis_version``, as they do with Valkey). pyrepl's own version is ``pyrepl_version``.
REDIS_VERSION = "7.0.15"
