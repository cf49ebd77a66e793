"""Per-link timelines and the full-sync loops, for the report: the picture an operator wants
after an incident.

Theory of operation: the links with the most incidents (full syncs, failed syncs and link
downs, from the ``links`` table already on the driver) — at most ``TIMELINE_LINKS`` — get
their syncs and their replica's link downs collected (one small query each, at most
``MAX_ROWS`` rows in all, the earliest first) and turned into a :class:`LinkStory`: a
chronological list of what happened, each entry with its time, its kind and a sentence. The
stories are drawn as one lane per link (link-down spans, syncs as markers: partial, full,
failed, and a ring where a full sync's buffer passed 80% of its limit) and written as one table
per link; the full-sync loops (``recoveries.build_streaks``: two or more failed full syncs in
one stretch without a working link) get a table of their own. Everything here but
:func:`collect_stories` is plain Python on dicts, so it is tested without Spark.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics.present import (
    empty_chart,
    html_table,
    human_bytes,
    human_ms,
    pyplot,
    save_chart,
    when,
)

TIMELINE_LINKS = 12     # lanes in the chart, tables in the report
MAX_ROWS = 20_000       # syncs and link downs collected for them in all
STORY_ROWS = 40         # entries per link in the report's tables
LOOPS_MAX = 200         # loops collected (the earliest first)

# entry kinds, as drawn: (marker, colour, label)
KINDS = {"partial": ("o", "#2a9d3f", "partial sync"),
         "full": ("s", "#1f5fbf", "full sync"),
         "failed": ("x", "#d62728", "failed sync"),
         "incomplete": ("d", "#999999", "sync not seen to finish"),
         "down": ("|", "#777777", "link down"),
         "up": ("|", "#2a9d3f", "link up")}


@dataclass
class Entry:
    ts: float
    kind: str      # a KINDS key
    text: str
    near_limit: bool = False   # a full sync whose buffer passed 80% of its limit


@dataclass
class LinkStory:
    master: str
    replica: str
    entries: list[Entry] = field(default_factory=list)
    downs: list[tuple[float, float | None]] = field(default_factory=list)  # (down, up or None)
    loops: list[tuple[float, float]] = field(default_factory=list)         # failed-full spans

    @property
    def name(self) -> str:
        return f"{self.master} -> {self.replica}"


def incidents(link: dict[str, Any]) -> int:
    return int((link.get("full") or 0) + (link.get("failed") or 0)
               + (link.get("link_downs") or 0))


def pick_links(links: Iterable[dict[str, Any]], n: int = TIMELINE_LINKS) -> list[tuple[str, str]]:
    """The ``n`` links with the most incidents (ties by name), in name order."""
    named = [x for x in links if x.get("master") and x.get("replica") and incidents(x) > 0]
    top = sorted(named, key=lambda x: (-incidents(x), x["master"], x["replica"]))[:n]
    return sorted((x["master"], x["replica"]) for x in top)


def sync_entry(s: dict[str, Any]) -> Entry:
    """One row of the syncs table as a timeline entry."""
    kind, status = s.get("kind"), s.get("status")
    if status == "failed":
        shown = "failed"
    elif status == "incomplete":
        shown = "incomplete"
    else:
        shown = "full" if kind == "full" else "partial"
    names: dict[str | None, str] = {"full": "full sync", "partial": "partial sync"}
    what = names.get(kind, "sync attempt")
    bits = [what + (f" ({s['mode']})" if s.get("mode") else ""), status or "?"]
    if kind == "full":
        bits.append(f"cause {s.get('cause') or 'unknown'}")
    elif s.get("result") and kind != "partial":
        bits.append(f"result {s['result']}")
    if s.get("fail_reason"):
        bits.append(f"failed: {s['fail_reason']}")
    if s.get("buffer_peak") is not None:
        limit = s.get("buffer_limit")
        bits.append(f"{s.get('buffer_kind') or 'buffer'} buffer peak "
                    f"{human_bytes(s['buffer_peak'])}"
                    + (f" of {human_bytes(limit)}" if limit else ""))
    if s.get("total_ms") is not None:
        bits.append(f"took {human_ms(s['total_ms'])}")
    if s.get("partial_bytes") is not None:
        bits.append(f"{human_bytes(s['partial_bytes'])} from the backlog")
    return Entry(float(s["ts"]), shown, ", ".join(bits), bool(s.get("near_limit")))


def build_stories(pairs: Sequence[tuple[str, str]], syncs: Iterable[dict[str, Any]],
                  downs: Iterable[dict[str, Any]], loops: Iterable[dict[str, Any]]
                  ) -> list[LinkStory]:
    """Each link's story from its rows of the syncs and recoveries tables and its loops."""
    # (a row without both ends looks up None, and finds no story)
    stories: dict[tuple[str | None, str | None], LinkStory] = {p: LinkStory(*p) for p in pairs}
    for s in syncs:
        st = stories.get((s.get("master"), s.get("replica")))
        if st is not None and s.get("ts") is not None:
            st.entries.append(sync_entry(s))
    for d in downs:
        st = stories.get((d.get("master"), d.get("replica")))
        if st is None or d.get("t_down") is None:
            continue
        t_up = d.get("t_up")
        st.downs.append((float(d["t_down"]), None if t_up is None else float(t_up)))
        st.entries.append(Entry(float(d["t_down"]), "down",
                                f"link down ({d.get('down_reason') or 'reason unknown'})"))
        if t_up is not None:
            st.entries.append(Entry(float(t_up), "up", f"link up after "
                                    f"{human_ms(d.get('downtime_ms'))} ({d.get('kind')} sync)"))
    for lp in loops:
        st = stories.get((lp.get("master"), lp.get("replica")))
        if st is not None and lp.get("t_first_failed") is not None:
            st.loops.append((float(lp["t_first_failed"]), float(lp["t_last_failed"])))
    order = {"down": 0, "partial": 1, "full": 1, "failed": 1, "incomplete": 1, "up": 2}
    for st in stories.values():
        st.entries.sort(key=lambda e: (e.ts, order[e.kind]))
        st.downs.sort()
        st.loops.sort()
    return [stories[p] for p in pairs]


def collect_stories(tables: Any, links: Iterable[dict[str, Any]],
                    loops: Iterable[dict[str, Any]]) -> list[LinkStory]:
    """The stories of the links :func:`pick_links` chooses, from the job's cached tables."""
    from pyrepl.analytics.sql import _F

    pairs = pick_links(links)
    if not pairs:
        return []
    F = _F()
    c = F.col
    keys = [f"{m}\n{r}" for m, r in pairs]
    on_link = F.concat_ws("\n", c("master"), c("replica")).isin(keys)
    syncs = tables.syncs.filter(on_link).orderBy("ts").limit(MAX_ROWS).collect()
    downs = tables.recoveries.filter(on_link & c("t_down").isNotNull()) \
        .orderBy("t_down").limit(MAX_ROWS).collect()
    return build_stories(pairs, (x.asDict() for x in syncs), (x.asDict() for x in downs), loops)


def stories_from_rows(syncs: Iterable[dict[str, Any]], recs: Iterable[dict[str, Any]],
                      links: Iterable[dict[str, Any]], loops: Iterable[dict[str, Any]]
                      ) -> list[LinkStory]:
    """:func:`collect_stories` from the tables' rows already on the driver."""
    pairs = pick_links(links)
    if not pairs:
        return []
    keys = set(pairs)
    on = [x for x in syncs if (x["master"], x["replica"]) in keys and x["ts"] is not None]
    on.sort(key=lambda x: x["ts"])
    downs = [x for x in recs if (x["master"], x["replica"]) in keys and x["t_down"] is not None]
    downs.sort(key=lambda x: x["t_down"])
    return build_stories(pairs, on[:MAX_ROWS], downs[:MAX_ROWS], loops)


# -- drawing and writing --------------------------------------------------------------------

def chart_timelines(stories: Sequence[LinkStory], path: str) -> None:
    """One lane per link: link-down spans (grey, red while no sync worked), full-sync loops
    (a red band), syncs as markers."""
    import datetime as dt

    import matplotlib.dates as mdates

    fig, ax = pyplot().subplots(figsize=(10, 1.2 + 0.45 * max(1, len(stories))))
    if not any(st.entries for st in stories):
        empty_chart(ax, "no incidents on any link")
        save_chart(fig, path)
        return

    def x(ts: float) -> Any:
        return mdates.date2num(dt.datetime.fromtimestamp(ts, dt.UTC))

    t_end = max(e.ts for st in stories for e in st.entries)
    seen: set[str] = set()
    for lane, st in enumerate(reversed(stories)):
        for lo, hi in st.loops:
            ax.broken_barh([(x(lo), max(x(hi) - x(lo), 1e-6))], (lane - 0.42, 0.84),
                           facecolors="#f4b6b6", label=None if "loop" in seen else
                           "full-sync loop")
            seen.add("loop")
        for down, up in st.downs:
            end = up if up is not None else t_end
            ax.broken_barh([(x(down), max(x(end) - x(down), 1e-6))], (lane - 0.12, 0.24),
                           facecolors="#bbbbbb" if up is not None else "#e07070")
        if st.downs:  # (a tick too: a few seconds down do not show at the scale of hours)
            ax.scatter([x(d) for d, _ in st.downs], [lane] * len(st.downs), marker="|",
                       c="#555555", s=160, zorder=2, label=None if "gap" in seen else
                       "link down")
            seen.add("gap")
        for kind in ("partial", "full", "failed", "incomplete"):
            pts = [e for e in st.entries if e.kind == kind]
            if not pts:
                continue
            marker, colour, label = KINDS[kind]
            ax.scatter([x(e.ts) for e in pts], [lane] * len(pts), marker=marker, c=colour,
                       s=36, zorder=3, label=None if kind in seen else label)
            seen.add(kind)
            near = [e for e in pts if e.near_limit]
            if near:
                ax.scatter([x(e.ts) for e in near], [lane] * len(near), marker="o", s=140,
                           facecolors="none", edgecolors="#f08c00", linewidths=1.5, zorder=4,
                           label=None if "near" in seen else "buffer > 80% of its limit")
                seen.add("near")
    ax.set_yticks(range(len(stories)))
    ax.set_yticklabels([st.name for st in reversed(stories)], fontsize=8)
    ax.set_ylim(-0.6, len(stories) - 0.4)
    ax.xaxis_date()
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M:%S"))
    fig.autofmt_xdate()
    ax.set_title("What happened on the links with the most incidents (UTC)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save_chart(fig, path)


def render_stories(stories: Sequence[LinkStory], loops: Sequence[dict[str, Any]],
                   img: str | None) -> str:
    """The report's section: the chart, one table per link, the loops."""
    parts = ["<h2>Per-link timeline</h2>"]
    if not stories:
        parts.append("<p>No link had a full sync, a failed sync or a link down.</p>")
    else:
        parts.append(f"<p>The {len(stories)} link(s) with the most incidents (full syncs, "
                     f"failed syncs, link downs); every sync is in the <code>syncs</code> "
                     f"table.</p>")
        if img:
            parts.append(f"<img src='{img}' alt='per-link timeline'>")
        for st in stories:
            shown = st.entries[:STORY_ROWS]
            parts.append(f"<h3>{html.escape(st.name)}</h3>")
            parts.append(html_table(["time (UTC)", "what"],
                                    [[when(e.ts) + f".{int(e.ts * 1000) % 1000:03d}", e.text]
                                     for e in shown]))
            if len(st.entries) > len(shown):
                parts.append(f"<p class='note'>… and {len(st.entries) - len(shown):,} more."
                             f"</p>")
    parts.append("<h3>Full-sync loops</h3>")
    if not loops:
        parts.append("<p>None: no replica failed two full syncs in a row without a working "
                     "link in between.</p>")
    else:
        parts.append(html_table(
            ["replica", "master", "first failed", "last failed", "failed full syncs",
             "attempts", "why they failed", "ended"],
            [[lp["replica"], lp.get("master") or "-", when(lp.get("t_first_failed")),
              when(lp.get("t_last_failed")), lp["failed_full"], lp.get("attempts"),
              ", ".join(lp.get("fail_reasons") or []) or "-",
              "link up" if lp.get("recovered") else "not within the logs"] for lp in loops]))
    return "\n".join(parts)
