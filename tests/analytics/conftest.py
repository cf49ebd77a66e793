"""Fixtures for the Spark tests: one local SparkSession for the whole session (UI off, loopback,
2 shuffle partitions, our quiet log4j2 settings), and helpers that run the job on NDJSON lines.

pyspark and matplotlib come from the ``spark`` extra, which the test command installs: without
them these tests fail (they are never skipped).
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    from pyrepl.analytics.session import build_session

    # One JVM runs hundreds of jobs here (the CLI runs one per process): more heap than a
    # single run needs (tests build DataFrames of their own besides the job, whose run()
    # frees its plans), and a driver GC every minute so the context cleaner frees finished
    # broadcasts and shuffle files.
    session = build_session("local[2]", app_name="pyrepl-tests", progress=False, conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
        "spark.cleaner.periodicGC.interval": "1min",
        "spark.sql.adaptive.enabled": "false",
    })
    yield session
    session.stop()


@pytest.fixture
def write_lines(tmp_path):
    """Write NDJSON lines to a file under tmp_path; returns its path."""
    def _write(lines: list[str], name: str = "sync.ndjson") -> str:
        path = os.path.join(tmp_path, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.writelines(lines)
        return path

    return _write
