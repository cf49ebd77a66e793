"""The headline figures of ``pyrepl metrics --follow`` in Prometheus's text exposition format
(version 0.0.4), served over HTTP for a Prometheus server to scrape and a Grafana board to chart.

Theory of operation: :func:`exposition` turns one ``summary.json`` (and the trigger that made
it) into the text; :class:`Exporter` keeps the latest text and serves it at ``/metrics`` (any
other path: 404) from a daemon thread. Every figure is a gauge: the counts are those of the
whole followed history as the latest trigger computed it (exact across restarts: the
checkpoint), and may go down when a richer source of a node arrives and replaces a poorer
one's events. A figure the summary does not have (no lag samples, no advice) is left out, as
Prometheus's conventions ask, rather than given as NaN.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: Any) -> str:
    return repr(float(v)) if isinstance(v, float) else str(int(v))


class _Text:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def gauge(self, name: str, help_: str, samples: list[tuple[dict[str, str], Any]]) -> None:
        samples = [(lab, v) for lab, v in samples if v is not None]
        if not samples:
            return
        self.lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        for labels, v in samples:
            lab = ",".join(f'{k}="{_label(x)}"' for k, x in labels.items())
            self.lines.append(f"{name}{{{lab}}} {_num(v)}" if lab else f"{name} {_num(v)}")


def exposition(summary: dict[str, Any], batch: int | None = None,
               trigger_s: float | None = None, at: float | None = None) -> str:
    """The exposition text of one summary (``batch``, ``trigger_s``, ``at``: the trigger
    that published it, its duration and its end, unix seconds)."""
    t = _Text()
    inp = summary.get("input", {})
    psync = summary.get("psync", {})
    full = summary.get("full_syncs", {})
    lag = summary.get("lag", {})
    backlog = summary.get("backlog", {})
    t.gauge("pyrepl_events", "Good events read from the followed logs.",
            [({}, inp.get("events"))])
    t.gauge("pyrepl_malformed_lines", "Lines that are not events, by kind.",
            [({"kind": k}, v) for k, v in sorted((inp.get("malformed") or {}).items())])
    t.gauge("pyrepl_syncs", "Syncs (PSYNC/SYNC attempts), by result.",
            [({"result": k}, v) for k, v in (psync.get("by_result") or {}).items()])
    t.gauge("pyrepl_partial_syncs", "Partial resynchronizations.",
            [({}, psync.get("partial"))])
    t.gauge("pyrepl_full_syncs", "Full resynchronizations, by PSYNC reason code.",
            [({"reason": k}, v) for k, v in (full.get("by_reason") or {}).items()])
    t.gauge("pyrepl_partial_ratio", "Partial syncs / (partial + full).",
            [({}, psync.get("partial_ratio"))])
    t.gauge("pyrepl_full_sync_loops", "Replicas stuck in 2+ failed full syncs in a row.",
            [({}, (summary.get("failures") or {}).get("full_sync_loops"))])
    for unit, key in (("bytes", "bytes"), ("ms", "ms")):
        st = lag.get(key) or {}
        t.gauge(f"pyrepl_replica_lag_{unit}", f"Replica lag in {unit}: quantiles of the "
                "lag samples (p50, p90, p99) and the maximum (quantile 1).",
                [({"quantile": q}, st.get(k)) for q, k in (("0.5", "p50"), ("0.9", "p90"),
                                                           ("0.99", "p99"), ("1", "max"))])
    adv = backlog.get("advice_bytes") or {}
    t.gauge("pyrepl_backlog_advice_bytes", "The smallest repl-backlog-size that turns this "
            "share of the offset-before-backlog full syncs into partial ones.",
            [({"share": str(int(k[1:]) / 100)}, v) for k, v in adv.items()])
    cur = backlog.get("current_backlog_bytes") or {}
    t.gauge("pyrepl_backlog_bytes", "The masters' repl-backlog-size (min and max).",
            [({"stat": k}, v) for k, v in sorted(cur.items())])
    t.gauge("pyrepl_offset_before_backlog_syncs", "Full syncs a bigger backlog would avoid.",
            [({}, backlog.get("offset_before_backlog_syncs"))])
    cl = summary.get("cluster")
    if cl is not None:       # (a Redis Cluster's cluster_* events)
        t.gauge("pyrepl_cluster_failovers", "Cluster failovers, by kind (auto, manual, force, "
                "takeover).", [({"kind": k}, v) for k, v in cl["failovers_by_kind"].items()])
        t.gauge("pyrepl_cluster_shards", "The cluster's shards seen.", [({}, cl["shards"])])
        t.gauge("pyrepl_cluster_node_fail_incidents", "Nodes marked FAIL (incidents).",
                [({}, cl["node_fail_incidents"])])
        t.gauge("pyrepl_cluster_fail_to_failover_ms", "From the old master's first FAIL mark "
                "to the new master's win: p50, p99, max (quantile 1).",
                [({"quantile": q}, cl["fail_to_failover_ms"].get(k)) for q, k in
                 (("0.5", "p50"), ("0.99", "p99"), ("1", "max"))])
    t.gauge("pyrepl_follow_batch", "The micro-batch of the latest trigger.", [({}, batch)])
    t.gauge("pyrepl_follow_trigger_seconds", "How long the latest trigger took.",
            [({}, trigger_s)])
    t.gauge("pyrepl_follow_last_trigger_timestamp_seconds", "When the latest trigger "
            "published (unix seconds).", [({}, at)])
    return "\n".join(t.lines) + "\n"


class Exporter:
    """The latest exposition, served at http://HOST:PORT/metrics."""

    def __init__(self, host: str, port: int) -> None:
        self.text = ""
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       name="pyrepl-prometheus")
        self.thread.start()

    def update(self, text: str) -> None:
        self.text = text

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
