"""The analytics count what happened: fleet histories drawn by hypothesis
(``tests/analytics/history.py``: Redis 7, Redis 8, Valkey 8 and pyrepl nodes; flaps, outages
past the backlog, promotions, Sentinel failovers, restarts, moves, chains), each rendered into
the sources that saw it (the nodes' logs, pyrepl's events, the collector's samples), any
subset of them given. Every sync a given source recorded is one row on its link; a sync only
the collector counted is one row on its master; nothing is counted twice or invented.

The pure-Python path (``logread.parse_logs`` -> the oracle) runs many histories; the Spark job
runs a few, both finishes, and must agree with the oracle and the history."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, note, settings

from pyrepl.analytics.job import JobConfig, run
from pyrepl.analytics.logread import parse_logs
from pyrepl.events import to_json_line
from tests.analytics.history import check_counts, histories, sources
from tests.analytics.jobcheck import check, results
from tests.analytics.oracle import compute

SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


def inputs(h, root: str = "/") -> tuple[dict[str, bytes], list[str], list[str]]:
    """(the given logs under ``root``, the given NDJSON lines, the oracle's lines: those and
    the logs' events as the pure-Python path reads them; their sync ids name the files)."""
    note(repr(h))
    files, lines = sources(h)
    files = {os.path.join(root, p.lstrip("/")): b for p, b in files.items()}
    events, _ = parse_logs(files)
    return files, lines, lines + [to_json_line(e) for e in events]


@settings(max_examples=300, deadline=None, suppress_health_check=SLOW_OK)
@given(histories())
def test_each_sync_of_the_history_is_counted_once_by_the_sources_that_saw_it(h) -> None:
    _, _, lines = inputs(h)
    check_counts(h, compute(lines)["syncs"])


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=SLOW_OK
          + [HealthCheck.function_scoped_fixture])
@given(histories(max_nodes=5, max_ops=6))
def test_the_spark_job_counts_the_history_as_the_oracle_does(spark, tmp_path, h) -> None:
    """The logs and NDJSON as files in one directory (found by content), both finishes."""
    d = tmp_path / f"h{len(os.listdir(tmp_path))}"
    files, ndjson, lines = inputs(h, str(d))
    for path, data in files.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    d.mkdir(exist_ok=True)
    (d / "events.ndjson").write_text("".join(ndjson))
    want = compute(lines)
    for cfg in (JobConfig(), JobConfig(driver_max_rows=0)):
        got = results(run(spark, [str(d)], cfg))
        spark.catalog.clearCache()
        check_counts(h, got["syncs"])
        check(got, want)
