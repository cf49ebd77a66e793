"""pyspark.sql.functions, imported when a Spark step first runs (the daemon, which imports
pyrepl.events, never imports pyspark)."""

from __future__ import annotations

from typing import Any


def _F() -> Any:
    """pyspark.sql.functions (imported on first use)."""
    from pyspark.sql import functions as F

    return F
