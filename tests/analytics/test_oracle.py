"""The Spark job agrees with the pure-Python oracle on hypothesis-generated sync logs: every row
of the per-sync, per-recovery, lag-series and write-rate tables, and every number of the summary
(counts exactly, percentiles within the approximation)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.analytics.jobcheck import check, run_both
from tests.analytics.strategies import event_logs

pytestmark = pytest.mark.slow


# Ten whole jobs on a shared 2-core machine, late in a session that has run the other Spark
# tests: several minutes. The suite's 300 s per test guards against hangs, not speed (speed is
# bench/bench_analytics.py's): this test gets 900 s.
@pytest.mark.timeout(900)
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(lines=event_logs())
def test_spark_agrees_with_oracle(spark, lines) -> None:
    got, want = run_both(spark, lines)
    check(got, want)
