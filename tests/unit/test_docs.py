"""The README stays true to the code: every directive, sync event and event field it must
document is there, and it opens with the two commands .ci/run relies on."""

from __future__ import annotations

import os

from pyrepl.config import DIRECTIVES
from pyrepl.events import EVENTS, FIELDS

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    head = README[:1500]
    assert "make demo" in head and "make test" in head
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    assert "make test" in ci


def test_every_directive_is_documented() -> None:
    missing = [d.name for d in DIRECTIVES if f"`{d.name}`" not in README]
    assert not missing, missing


def test_every_sync_event_and_field_is_documented() -> None:
    missing = [e for e in EVENTS if f"`{e}`" not in README]
    missing += [f for f, _, _ in FIELDS if f"`{f}`" not in README]
    assert not missing, missing


def test_metrics_options_outputs_and_summary_keys_are_documented() -> None:
    from pyrepl.cli.metrics import metrics

    from pyrepl.analytics.report import CHARTS, SUMMARY_KEYS, TABLES

    opts = [o for p in metrics.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    missing = [o for o in opts if f"`{o}" not in README]
    missing += [k for k in SUMMARY_KEYS if f"| `{k}` |" not in README]
    missing += [f"{c}.png" for c in CHARTS if f"`{c}.png`" not in README]
    missing += [t for t in TABLES if f"`{t}`" not in README]
    assert not missing, missing
    assert "pyrepl/analytics/submit.py" in README and "spark-submit --master" in README


def test_collect_options_are_documented() -> None:
    from pyrepl.cli.collect import collect

    opts = [o for p in collect.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    assert opts and "--every" in opts
    missing = [o for o in opts if f"`{o}" not in README]
    assert not missing, missing
    assert "## `pyrepl collect`" in README
