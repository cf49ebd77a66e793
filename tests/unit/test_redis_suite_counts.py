"""The Redis-suite table counts a test name run several times in one file (unit/scripting runs
its cases as EVAL, as FCALL and as SCRIPT) once per run, on both sides."""
from __future__ import annotations

from tests.support.redis_suite import runner


def _results(mod, pyrepl_ok, redis_ok):  # type: ignore[no-untyped-def]
    p = mod.FileResult("unit/x", "pyrepl", ok=list(pyrepl_ok))
    r = mod.FileResult("unit/x", "redis", ok=list(redis_ok))
    return {"unit/x": {"pyrepl": p, "redis": r}}


def test_repeated_names_count_as_a_multiset() -> None:
    mod = runner()
    res = _results(mod, ["a", "a", "b"], ["a", "a", "a", "b"])
    assert "Redis passes in these files, pyrepl passes 3 (75.0 %)" in mod.summary(res)
    assert "`unit/x` (3/4)" in mod.summary(res)
    assert mod.differences(res) == "- `unit/x`: `a`"


def test_a_name_pyrepl_passes_more_often_does_not_count_twice() -> None:
    mod = runner()
    res = _results(mod, ["a", "a"], ["a", "b"])
    assert "pyrepl passes 1 (50.0 %)" in mod.summary(res)
    assert mod.differences(res) == "- `unit/x`: `b`"


def test_the_cluster_harness_lines_are_counted() -> None:
    """./runtest-cluster's lines: ``HH:MM:SS> <test>: OK`` (progress dots may come first),
    ``FAILED: ...`` for an assertion, ``FAILED: caught an error in the test`` for an error,
    and a run with no closing line counts as cut short."""
    mod = runner()
    log = ("Testing unit: 00-base.tcl\n"
           "15:00:00> (init) Restart killed instances: \x1b[0;32;49mOK\x1b[0m\n"
           "15:00:01> Wait for failover: ...\x1b[0;32;49mOK\x1b[0m\n"
           "15:00:02> Cluster is up: FAILED: Cluster node 0 cluster_state:fail\n"
           "(Jumping to next unit after error)\n"
           "15:00:03> Cluster nodes hard reset: FAILED: caught an error in the test ERR x\n")
    res = mod.FileResult("cluster/00-base", "pyrepl")
    mod.parse_cluster(log, res)
    assert res.ok == ["(init) Restart killed instances", "Wait for failover"]
    assert res.err == ["Cluster is up"]
    assert res.exception == ["Cluster nodes hard reset"]
    assert not mod.finished("cluster/00-base", log)
    assert mod.finished("cluster/00-base", log + "WARNING 2 test(s) failed.\n")
    assert mod.finished("cluster/00-base", log + "Cleaning up...\n")


def test_a_randomized_file_compares_failures_not_names() -> None:
    mod = runner()
    name = "cluster/03-failover-loop"
    p = mod.FileResult(name, "pyrepl", ok=["Terminating node #1"] * 3)
    r = mod.FileResult(name, "redis", ok=["Terminating node #4"] * 4)
    res = {name: {"pyrepl": p, "redis": r}}
    assert "pyrepl passes 3 (75.0 %)" in mod.summary(res)
    assert mod.differences(res) == "none"
    p.err.append("Cluster is up")
    assert mod.differences(res) == f"- `{name}`: `Cluster is up` (failed)"
