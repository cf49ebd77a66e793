"""The report's chart writer (pyrepl/analytics/present.py): one draw and Pillow's PNG give the
pixels matplotlib's own ``savefig`` gives, for each kind of chart the report draws."""

from __future__ import annotations

import datetime as dt

import pytest

pytest.importorskip("matplotlib")
from PIL import Image, ImageChops  # noqa: E402

from pyrepl.analytics.present import pyplot, save_chart  # noqa: E402


def figures():
    """Bars with labels and notes, a dated twin-axis line chart with a log scale, a step
    CDF with a legend, an empty chart's note."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [f"10.0.0.{i}:6379" for i in range(12)]
    ax.barh(names, [i / 12 for i in range(12)], color="#3b7dd8")
    for i in range(12):
        ax.text(i / 12, i, f" {i}/12", va="center", fontsize=7)
    ax.set_title("bars")
    yield "bars", fig
    fig, ax = plt.subplots(figsize=(8, 3.2))
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    xs = [t0 + dt.timedelta(minutes=i) for i in range(50)]
    ax.plot(xs, [1 + i * i for i in range(50)], lw=1, label="bytes")
    ax.set_yscale("log")
    ax2 = ax.twinx()
    ax2.plot(xs, [i / 3 for i in range(50)], ls="--", label="seconds")
    fig.autofmt_xdate()
    yield "lines", fig
    fig, ax = plt.subplots(figsize=(8, 3.2))
    vs = sorted(1.5 ** i for i in range(30))
    ax.step([vs[0], *vs], [0.0, *((i + 1) / 30 for i in range(30))], where="post",
            label="partial (30)")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    yield "cdf", fig
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.text(0.5, 0.5, "nothing", ha="center", va="center", transform=ax.transAxes)
    yield "empty", fig


def test_a_saved_chart_is_savefigs_pixels(tmp_path) -> None:
    plt = pyplot()
    for name, fig in figures():
        fig.tight_layout()
        want = tmp_path / f"{name}-savefig.png"
        fig.savefig(want, dpi=100)
        got = tmp_path / f"{name}.png"
        save_chart(fig, str(got))
        assert not plt.fignum_exists(fig.number)   # closed
        a = Image.open(want).convert("RGBA")
        b = Image.open(got)
        assert b.format == "PNG" and b.size == a.size
        assert ImageChops.difference(a, b.convert("RGBA")).getbbox() is None, name
