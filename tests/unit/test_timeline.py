"""The report's per-link timelines and loop table (pyrepl.analytics.timeline), on plain rows of
the job's tables: which links are shown, each link's story in order, the chart and the HTML."""

from __future__ import annotations

import re

from pyrepl.analytics.timeline import (
    TIMELINE_LINKS,
    build_stories,
    chart_timelines,
    pick_links,
    render_stories,
)

M, A, B = "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"


def link(master, replica, full=0, failed=0, downs=0) -> dict:
    return {"master": master, "replica": replica, "full": full, "failed": failed,
            "link_downs": downs}


def test_the_links_with_the_most_incidents_in_name_order() -> None:
    links = [link(M, A, full=1), link(M, B, failed=2, downs=1), link(M, "quiet"),
             link(None, A, full=9)]
    assert pick_links(links) == [(M, A), (M, B)]
    assert pick_links(links, 1) == [(M, B)]
    many = [link(M, f"r{i:02d}", full=i) for i in range(1, 30)]
    top = pick_links(many)
    assert len(top) == TIMELINE_LINKS and top[0] == (M, "r18") and top[-1] == (M, "r29")


SYNCS = [
    {"master": M, "replica": A, "ts": 100.0, "kind": "full", "status": "failed",
     "mode": "diskless", "cause": "no-history", "fail_reason": "output-buffer-limit",
     "buffer_kind": "master-output", "buffer_peak": 1048577, "buffer_limit": 1048576,
     "near_limit": True, "total_ms": None},
    {"master": M, "replica": A, "ts": 103.5, "kind": "full", "status": "ok", "mode": "disk",
     "cause": "output-buffer-limit", "buffer_kind": "master-output", "buffer_peak": 2048,
     "buffer_limit": 1048576, "near_limit": False, "total_ms": 2500.0},
    {"master": M, "replica": A, "ts": 200.0, "kind": "partial", "status": "ok",
     "partial_bytes": 4096, "total_ms": 12.0},
    {"master": M, "replica": B, "ts": 150.0, "kind": "none", "status": "incomplete",
     "result": "error"},
    {"master": M, "replica": "not shown", "ts": 1.0, "kind": "full", "status": "ok"},
]
DOWNS = [{"master": M, "replica": A, "t_down": 199.0, "t_up": 200.0, "down_reason": "timeout",
          "downtime_ms": 1000.0, "kind": "partial"},
         {"master": M, "replica": B, "t_down": 140.0, "t_up": None, "down_reason": None,
          "downtime_ms": None, "kind": None}]
LOOPS = [{"replica": A, "master": M, "t_first_failed": 100.0, "t_last_failed": 101.0,
          "failed_full": 2, "attempts": 3, "fail_reasons": ["io-error"], "recovered": True}]


def stories():
    return build_stories([(M, A), (M, B)], SYNCS, DOWNS, LOOPS)


def test_each_links_story_in_order() -> None:
    a, b = stories()
    assert (a.master, a.replica, b.replica) == (M, A, B)
    assert [(e.ts, e.kind) for e in a.entries] == [
        (100.0, "failed"), (103.5, "full"), (199.0, "down"), (200.0, "partial"), (200.0, "up")]
    assert a.entries[0].text == ("full sync (diskless), failed, cause no-history, failed: "
                                 "output-buffer-limit, master-output buffer peak 1.0 MiB of "
                                 "1.0 MiB")
    assert a.entries[0].near_limit and not a.entries[1].near_limit
    assert a.entries[1].text.endswith("took 2.5 s")
    assert a.entries[3].text == "partial sync, ok, took 12 ms, 4.0 KiB from the backlog"
    assert a.entries[4].text == "link up after 1.0 s (partial sync)"
    assert a.downs == [(199.0, 200.0)] and a.loops == [(100.0, 101.0)]
    # a link still down at the end of the logs; an attempt whose result is not known
    assert b.downs == [(140.0, None)]
    assert [e.text for e in b.entries] == ["link down (reason unknown)",
                                           "sync attempt, incomplete, result error"]


def test_the_report_section(tmp_path) -> None:
    page = render_stories(stories(), LOOPS, "data:image/png;base64,xx")
    assert page.count("<h3>") == 3 and "<h3>10.0.0.1:6379 -&gt; 10.0.0.2:6379</h3>" in page
    assert "<img src='data:image/png;base64,xx'" in page
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<h3>Full-sync loops</h3>")[1])
    assert re.findall(r"<td>(.*?)</td>", rows[1]) == [
        A, M, "1970-01-01 00:01:40", "1970-01-01 00:01:41", "2", "3", "io-error", "link up"]
    assert "1970-01-01 00:01:43.500" in page   # times to the millisecond
    empty = render_stories([], [], None)
    assert "No link had" in empty and "None: no replica failed" in empty
    for st, path in ((stories(), tmp_path / "t.png"), ([], tmp_path / "none.png")):
        chart_timelines(st, str(path))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_long_stories_are_cut_with_a_note() -> None:
    syncs = [{"master": M, "replica": A, "ts": float(i), "kind": "partial", "status": "ok"}
             for i in range(45)]
    (a,) = build_stories([(M, A)], syncs, [], [])
    page = render_stories([a], [], None)
    assert page.count("<tr>") == 1 + 40 and "… and 5 more." in page
