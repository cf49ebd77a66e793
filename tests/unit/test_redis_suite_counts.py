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
