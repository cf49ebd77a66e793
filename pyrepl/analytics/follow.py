"""``pyrepl metrics --follow``: the sync analytics of growing logs, kept up to date by Spark
Structured Streaming, with exactly-once counts across restarts.

Theory of operation: the NDJSON files under the followed directories (pyrepl's sync logs,
``pyrepl collect``'s output; appended, rotated, new) are a stream of lines (``tail``'s
``pyrepl_tail`` source, whose offsets Spark's checkpoint keeps). Each micro-batch runs the batch
job's one input pass (``read.parse_text``, ``classify``, ``aggregate_all``) over its own lines
and stores the small aggregate under the checkpoint directory, named for the batch: a batch
that runs again after a crash (Spark replays a batch it planned but did not commit, with the
same offsets) writes the same name again, so each line is counted once. The aggregates merge
exactly (``read.merge_aggregates``: counts and integer sums add, extremes are order-free, the
lag sample is drawn by a hash whose modulus only grows, a power of two), so the union of the
stored ones is the aggregate a batch run over all the lines would have made; every
``compact_every`` batches they are merged into one (written, then the old ones removed: a
crash in between leaves a compaction that covers them, which wins).

The same merge is kept on the driver (``fstate.FollowState``: each batch's aggregate is
collected once, through Arrow, and merged there by the same rules; at a restart it is read
from the store, at a compaction coarsened as the store is), so a trigger does not query every
stored aggregate again. Each trigger then finishes as the batch job does (``job.finish``, the
same step definitions: its counts and its driver finish's input from the state, the events
through the same Spark steps where these look across events, else linked on the driver; a
finish too big for the driver runs the Spark steps on the stored aggregates; the driver
finish's tables are written by pyarrow) on that merge plus the Redis/Valkey logs among the
files, which are parsed whole again when one changed (a log's lines only make sense with its
earlier lines: a node's name, its role), and publishes: tables, charts and report.html into a
directory of the trigger, then ``OUT/tables`` (a symbolic link, swapped by rename) and the
files moved into place one by one (renames), ``summary.json`` last; the Prometheus endpoint's
figures (``prom``) follow the summary.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics import fstate
from pyrepl.analytics.chartpool import ChartPool
from pyrepl.analytics.fstate import FollowState
from pyrepl.analytics.job import (
    NICE_BUCKETS,
    DriverInputs,
    JobConfig,
    JobResult,
    choose_bucket,
    event_dict,
    finish,
)
from pyrepl.analytics.logread import head, kind_of, name_unknown, prefer_sources, read_logs
from pyrepl.analytics.read import (
    FINE_BUCKET_S,
    LINE_BYTES,
    SAMPLE_TARGET,
    aggregate_all,
    classify,
    merge_aggregates,
    parse_text,
)
from pyrepl.analytics.report import DrawnCharts
from pyrepl.analytics.rowtable import json_relation, write_parquet
from pyrepl.analytics.schema import table_columns
from pyrepl.analytics.sql import _F
from pyrepl.analytics.syncs import linked, with_link
from pyrepl.analytics.tail import NAME, TailSource, list_files

COMPACT_EVERY = 10          # stored batch aggregates merged into one every this many
WARM_LINES = 200_000        # made-up lines the pass runs over once before the first trigger
_ENTRY = re.compile(r"^(batch|compact)-(\d{12})-e(\d+)$")


def _noop(msg: str) -> None:
    pass


def stored_bucket(bucket: float) -> float:
    """The coarsest time bucket the stored lag groups can be summed per, now that the run's
    bucket is ``bucket``: the greatest common divisor of it and every bigger bucket the run
    may choose as its span grows (``job.NICE_BUCKETS``), so that whichever it chooses is a
    multiple of it (600 s: 300 s, since 900 s may come next)."""
    later = [int(b) for b in NICE_BUCKETS if b >= bucket] or [int(bucket)]
    return float(functools.reduce(math.gcd, later))


def pow2_at_least(n: float) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << math.ceil(math.log2(n))


@dataclass(frozen=True)
class Entry:
    kind: str     # "batch" | "compact"
    batch: int    # the batch id (a compaction: the last batch it holds)
    every: int    # the lag sampling modulus it was drawn with
    path: str


class AggStore:
    """The stored batch aggregates under ``ROOT/aggs`` (a local directory): ``batch-ID-eN``
    for one micro-batch, ``compact-ID-eN`` for every batch up to ID; written under a ``_tmp``
    name and renamed into place, so a name that exists is whole."""

    def __init__(self, root: str) -> None:
        self.root = os.path.join(root, "aggs")
        os.makedirs(self.root, exist_ok=True)

    def entries(self) -> list[Entry]:
        out = []
        for name in sorted(os.listdir(self.root)):
            m = _ENTRY.match(name)
            if m:
                out.append(Entry(m[1], int(m[2]), int(m[3]), os.path.join(self.root, name)))
        return out

    def live(self) -> list[Entry]:
        """The newest compaction and the batches after it."""
        es = self.entries()
        upto = self.covered(es)
        base = [e for e in es if e.kind == "compact" and e.batch == upto]
        return base[-1:] + [e for e in es if e.kind == "batch" and e.batch > upto]

    def covered(self, es: list[Entry] | None = None) -> int:
        """The last batch the newest compaction holds (-1: none)."""
        es = self.entries() if es is None else es
        return max((e.batch for e in es if e.kind == "compact"), default=-1)

    def every(self) -> int:
        return max((e.every for e in self.live()), default=1)

    def _put(self, df: Any, kind: str, batch: int, every: int) -> None:
        """``df``: a DataFrame, or a pyarrow Table (written as one file, as Spark would)."""
        tmp = os.path.join(self.root, f"_tmp-{kind}-{batch:012d}")
        if hasattr(df, "write"):
            shutil.rmtree(tmp, ignore_errors=True)
            df.write.mode("overwrite").parquet(tmp)
        else:
            write_parquet(df, tmp)
        for e in self.entries():   # the same batch stored before (a replay): replaced
            if e.kind == kind and e.batch == batch:
                shutil.rmtree(e.path, ignore_errors=True)
        os.rename(tmp, os.path.join(self.root, f"{kind}-{batch:012d}-e{every}"))

    def put_batch(self, df: Any, batch: int, every: int) -> bool:
        """Store batch ``batch``'s aggregate; False when a compaction already holds it."""
        if batch <= self.covered():
            return False
        self._put(df, "batch", batch, every)
        return True

    def compact(self, df: Any, batch: int, every: int) -> None:
        """Store ``df`` (the merge of every live entry up to ``batch``: a DataFrame or a
        pyarrow Table) as one, then remove what it replaces."""
        self._put(df, "compact", batch, every)
        for e in self.entries():
            if e.batch < batch or (e.kind == "batch" and e.batch == batch):
                shutil.rmtree(e.path, ignore_errors=True)


@dataclass
class FollowConfig:
    paths: list[str]
    out_dir: str
    checkpoint: str
    trigger_s: float = 10.0
    job: JobConfig = field(default_factory=JobConfig)
    max_bytes_per_trigger: int = 0     # 0: everything new at each trigger
    compact_every: int = COMPACT_EVERY
    warm_lines: int = WARM_LINES       # 0: no warm-up


def check_dirs(cfg: FollowConfig) -> None:
    """The outputs and the checkpoint must not be among the followed files (the job would
    read what it writes)."""
    followed = [os.path.realpath(p) for p in cfg.paths]
    for what, d in (("--out", cfg.out_dir), ("--checkpoint", cfg.checkpoint)):
        real = os.path.realpath(d)
        for p in followed:
            if real == p or real.startswith(p.rstrip("/") + "/"):
                raise ValueError(f"{what} {d} is inside the followed path {p}")


@dataclass
class Trigger:
    batch: int
    seconds: float
    summary: dict[str, Any]


class Follower:
    """One streaming query over ``cfg.paths``; ``on_trigger`` hears of each published
    trigger. A trigger's outputs are written (``publish``) by a thread of their own while
    the stream goes on with the next micro-batch (one at a time: a batch waits for the
    previous trigger's outputs before it hands over its own)."""

    def __init__(self, spark: Any, cfg: FollowConfig,
                 progress: Callable[[str], None] = _noop,
                 on_trigger: Callable[[Trigger], None] | None = None) -> None:
        check_dirs(cfg)
        self.spark = spark
        self.cfg = cfg
        self.progress = progress
        self.on_trigger = on_trigger
        self.store = AggStore(cfg.checkpoint)
        self._logs_key: Any = None
        # a trigger's outputs are written by this thread while the next batch is read
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pyrepl-publish")
        self._publishing: Future[None] | None = None
        self._drawn = DrawnCharts()      # the last trigger's charts (that thread's alone)
        self._charts = ChartPool()       # and the processes that draw them
        self._logs: tuple[Any, dict[str, Any] | None] | None = None
        self._logs_state: FollowState | None = None
        self._state: FollowState | None = None     # the stored aggregates' merge
        empty = spark.createDataFrame([], "value string")
        self.agg_schema = aggregate_all(classify(parse_text(spark, empty)), FINE_BUCKET_S,
                                        1).schema
        self.row_ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}"
                                 for f in self.agg_schema["row"].dataType.fields)

    # -- the stream ------------------------------------------------------------------------

    def warm_up(self, lines: int) -> None:
        """The pass run once over ``lines`` made-up lines (lag samples of 50 links, a sync
        event every 1,000th line; made in the JVM), collected as a batch's is and thrown
        away: Spark generates and compiles the pass's code and the JVM compiles its hot paths
        before the first trigger, not during the first ones (the second trigger's pass took
        3 times a warm one's). The state and the store are not touched."""
        F = _F()
        lag = ("concat('{\"ts\":', id / 100, ',\"event\":\"replica_lag\",\"node\":\"warm:1\",'"
               " '\"run_id\":\"w\",\"peer\":\"warm:', id % 50, '\",\"offset\":', id,"
               " ',\"lag_bytes\":', id % 4096, ',\"lag_ms\":', id % 300, '.0}')")
        other = ("concat('{\"ts\":', id / 100, ',\"event\":\"psync_decision\",\"node\":"
                 "\"warm:1\",\"run_id\":\"w\",\"role\":\"master\",\"peer\":\"warm:', id % 50,"
                 " '\",\"result\":\"partial\",\"reason\":\"ok\",\"backlog_size\":1048576}')")
        text = self.spark.range(lines, numPartitions=2).select(F.expr(
            f"CASE WHEN id % 1000 = 0 THEN {other} ELSE {lag} END").alias("value"))
        fstate.collect_arrow(aggregate_all(classify(parse_text(self.spark, text)),
                                           FINE_BUCKET_S, 16))

    def start(self) -> Any:
        self._charts.start()     # (they warm up while the stream starts)
        if self.cfg.warm_lines > 0:
            self.warm_up(self.cfg.warm_lines)
        self.spark.dataSource.register(TailSource)
        reader = self.spark.readStream.format(NAME).option("paths", "\n".join(self.cfg.paths))
        if self.cfg.max_bytes_per_trigger:
            reader = reader.option("maxBytesPerTrigger", str(self.cfg.max_bytes_per_trigger))
        return reader.load().writeStream.foreachBatch(self.on_batch) \
            .option("checkpointLocation", os.path.join(self.cfg.checkpoint, "stream")) \
            .trigger(processingTime=f"{self.cfg.trigger_s:g} seconds") \
            .queryName("pyrepl-follow").start()

    def on_batch(self, df: Any, batch_id: int) -> None:
        t0 = time.monotonic()
        F = _F()
        files = list_files(self.cfg.paths)
        logs = log_files(self.spark, files)
        every = max(self.store.every(), pow2_at_least(
            ndjson_bytes(files, logs) / LINE_BYTES / SAMPLE_TARGET))
        lines = df.filter(~F.col("path").isin(list(logs))) if logs else df
        ev = classify(parse_text(self.spark, lines.select(F.col("line").alias("value"))),
                      self.cfg.job.since, self.cfg.job.until)
        agg = aggregate_all(ev, FINE_BUCKET_S, every)
        if self._state is None and not self.store.live():
            self._state = FollowState()     # a first start: nothing stored to read back
        if batch_id > self.store.covered():  # (else a replay of what a compaction holds)
            # the pass, collected through Arrow (one job): stored by pyarrow, merged here
            table = fstate.collect_arrow(agg)
            # (the last trigger's outputs and compaction, made meanwhile, done before the
            # store and the state change)
            self.wait_published()
            t1 = time.monotonic()
            self.store.put_batch(table.select(self.agg_schema.names), batch_id, every)
            t2 = time.monotonic()
            if self._state is not None:
                self._state.add(fstate.rows_of(table), every)
            self.progress(f"batch {batch_id}: its lines' pass collected ({t1 - t0:.1f} s; "
                          f"{table.num_rows:,} rows), stored {t2 - t1:.1f} s, merged "
                          f"{time.monotonic() - t2:.1f} s")
        else:
            self.wait_published()
        every, due = self.stored()
        result = self.refresh(batch_id, logs, every)
        self._publishing = self._pool.submit(self._publish, result, batch_id, t0,
                                             every if due else 0)

    def _publish(self, result: JobResult, batch_id: int, t0: float, compact: int) -> None:
        """The trigger's outputs written, then (``compact``: the store's modulus) the store
        compacted, both off the stream's thread: the next batch's pass goes on meanwhile, and
        waits for them before it changes the store or the state."""
        t = time.monotonic()
        publish(result, self.cfg.out_dir, batch_id, self._drawn, self._charts)
        seconds = time.monotonic() - t0
        self.progress(f"batch {batch_id}: {result.summary['input']['events']:,} events, "
                      f"written in {time.monotonic() - t:.1f} s ({len(self._drawn.copied)} "
                      f"unchanged charts copied); published {seconds:.1f} s after the batch "
                      f"began")
        if self.on_trigger is not None:
            self.on_trigger(Trigger(batch_id, seconds, result.summary))
        if compact:
            self.compact(batch_id, compact)

    def wait_published(self) -> None:
        """Until the last trigger's outputs are written (raises what stopped them)."""
        if self._publishing is not None:
            pending, self._publishing = self._publishing, None
            pending.result()

    def close(self) -> None:
        """The last outputs written, the writer thread ended."""
        try:
            self.wait_published()
        finally:
            self._pool.shutdown()
            self._charts.close()

    # -- each trigger's finish ---------------------------------------------------------------

    def stored(self) -> tuple[int, bool]:
        """The sampling modulus of the stored aggregates, and whether they are due for a
        compaction (``compact_every`` batches since the last: done after the trigger's
        outputs, by ``compact``); ``_state``, their merge on the driver, is read from the
        store when there is none (a restart)."""
        live = self.store.live()
        every = max(e.every for e in live)
        if self._state is None:
            state = FollowState()
            state.add(fstate.collect(merge_aggregates(self._read(live), every)), every)
            self._state = state
        return every, len([e for e in live if e.kind == "batch"]) >= self.cfg.compact_every

    def compact(self, batch_id: int, every: int) -> None:
        """The stored aggregates up to ``batch_id`` written as one, from the state (the merge
        of every live entry: the tests hold it to Spark's merge_aggregates of them), with no
        Spark job; the state coarsened as the store is. The lag groups are summed per the
        coarsest bucket the run can still choose: what is stored grows with the links and the
        span's buckets (~300), not with time. (The span of what is stored only grows, and
        the run's, with the logs', is never shorter; so the run's bucket is a multiple of
        this one's, ever after.)"""
        assert self._state is not None
        t0 = time.monotonic()
        n = len(self.store.live())
        s0, s1 = self._state.span()
        bucket = self.cfg.job.bucket_s or (
            stored_bucket(choose_bucket(s0, s1)) if s0 is not None else None)
        if bucket is not None:
            self._state.rebucket(bucket)
        self._state.redraw(every)
        self.store.compact(self._state.table(self.agg_schema), batch_id, every)
        self.progress(f"batch {batch_id}: {n} stored aggregates compacted into one (lag "
                      f"groups per {bucket or FINE_BUCKET_S:g} s) in "
                      f"{time.monotonic() - t0:.1f} s")

    def _read(self, entries: list[Entry]) -> Any:
        return self.spark.read.schema(self.agg_schema).parquet(*[e.path for e in entries])

    def logs_part(self, logs: dict[str, str]) -> tuple[Any, dict[str, Any] | None]:
        """The Redis/Valkey logs' aggregate and summary: parsed whole, again only when one
        of them changed."""
        key = []
        for p in sorted(logs):
            try:
                st = os.stat(p)
            except OSError:
                continue
            key.append((p, st.st_size, st.st_mtime_ns, st.st_ino))
        if self._logs is None or key != self._logs_key:
            if not logs:
                self._logs = (None, None)
                self._logs_state = None
            else:
                ldf, summary = read_logs(self.spark, logs, self.cfg.job.log_tz)
                lagg = aggregate_all(classify(ldf, self.cfg.job.since, self.cfg.job.until),
                                     FINE_BUCKET_S, 1).localCheckpoint(eager=True)
                self._logs = (lagg, summary)
                self._logs_state = FollowState()
                self._logs_state.add(fstate.collect(lagg), 1)
            self._logs_key = key
        return self._logs

    def refresh(self, batch_id: int, logs: dict[str, str], every: int) -> JobResult:
        t0 = time.monotonic()
        lagg, logsum = self.logs_part(logs)

        def agg() -> Any:
            """The stored aggregates' merge (and the logs'): only a finish in Spark runs it."""
            plan = merge_aggregates(self._read(self.store.live()), every)
            return plan if lagg is None else plan.unionByName(lagg.select(*plan.columns))

        assert self._state is not None
        states = [self._state] + ([self._logs_state] if self._logs_state is not None else [])
        counts = fstate.pass_counts(states)
        t1 = time.monotonic()
        result = finish(self.spark, agg, counts, self.cfg.paths, "json", every, logsum,
                        self.cfg.job, lambda m: self.progress(f"batch {batch_id}: {m}"),
                        inputs=functools.partial(self.inputs, states))
        self.progress(f"batch {batch_id}: merged {t1 - t0:.1f} s, finished "
                      f"{time.monotonic() - t1:.1f} s")
        return result

    def inputs(self, states: list[FollowState], bucket_s: float, several_sources: bool,
               unknown_hosts: bool) -> DriverInputs:
        """The driver finish's input from the states (``job.collect_inputs``'s from an
        aggregate): the events through the same Spark steps (one small query) where they
        look across events (a log's unknown hosts named, the preferred source of a sync
        kept), else each linked here (``with_link``'s twin); the lag series and sample
        here."""
        evrows = [row for s in states for row, _ in s.events]
        if unknown_hosts or several_sources:
            sev = json_relation(self.spark, self.row_ddl, evrows)
            if unknown_hosts:
                sev = name_unknown(sev, json_relation(
                    self.spark, "`_n` string",
                    [{"_n": n} for n in sorted(fstate.known_names(states))]))
            if several_sources:
                sev = prefer_sources(sev)
            ev = with_link(sev)
            names = ev.columns
            fields = list(enumerate(names))
            events = [event_dict(r, fields) for r in ev.collect()]
        else:
            names = [*self.agg_schema["row"].dataType.names, "master", "replica"]
            events = [linked(row) for row in evrows]
        rows = fstate.series_rows(states, bucket_s)
        cols = [n for n, _ in table_columns("lag_series")
                if n in names or (rows and n in rows[0])]
        series = [{n: s.get(n) for n in cols} for s in rows]
        return events, series, fstate.samples_by_link(states)


def log_files(spark: Any, files: Sequence[str]) -> dict[str, str]:
    """{file: kind} of the Redis/Valkey logs among ``files``, by their first lines as the
    batch job tells them (``logread.head``, ``kind_of``; a rotated ``.gz`` too). A plain file
    with no whole line yet is not one: the stream skips nothing of it."""
    out = {}
    for f in files:
        try:
            first = head(spark, f)
        except OSError:
            continue
        if not f.endswith(".gz") and b"\n" not in first:
            continue
        k = kind_of(first)
        if k is not None:
            out[f] = k
    return out


def ndjson_bytes(files: Sequence[str], logs: dict[str, str]) -> int:
    total = 0
    for f in files:
        if f in logs:
            continue
        try:
            n = os.stat(f).st_size
        except OSError:
            continue
        total += n * 8 if f.endswith(".gz") else n
    return total


# -- publishing ----------------------------------------------------------------------------------

def publish(result: JobResult, out_dir: str, batch_id: int,
            drawn: DrawnCharts | None = None, pool: ChartPool | None = None
            ) -> dict[str, Any]:
    """Write the trigger's tables, charts, report.html and summary.json so that a reader
    never sees a half-written set: everything into ``OUT/.trigger-ID``, the tables' link
    ``OUT/tables`` swapped (a rename), the charts and report.html renamed into ``OUT``, then
    summary.json, naming the files where they now are; older triggers' files go. ``drawn``:
    the charts the last trigger published (one drawn from the same is copied, not drawn);
    ``pool``: the processes that draw the others (else this one)."""
    from pyrepl.analytics.report import _json_default, write_report

    os.makedirs(out_dir, exist_ok=True)
    name = f".trigger-{batch_id:012d}"
    stage = os.path.join(out_dir, name)
    shutil.rmtree(stage, ignore_errors=True)
    summary = write_report(result, stage, drawn=drawn, pool=pool)
    tables = os.path.join(out_dir, "tables")
    link = os.path.join(out_dir, ".tables-link")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.join(name, "tables"), link)
    if os.path.isdir(tables) and not os.path.islink(tables):
        shutil.rmtree(tables)    # a batch run's tables, before the first trigger
    os.replace(link, tables)
    outs = summary["outputs"]
    charts = {}
    for chart, path in outs["charts"].items():
        dest = os.path.join(out_dir, os.path.basename(path))
        os.replace(path, dest)
        charts[chart] = dest
    if drawn is not None:
        drawn.published(charts)
    report = os.path.join(out_dir, "report.html")
    os.replace(outs["report"], report)
    summary["outputs"] = {
        "summary": os.path.join(out_dir, "summary.json"), "report": report, "charts": charts,
        "tables": {k: os.path.join(tables, os.path.basename(v))
                   for k, v in outs["tables"].items()}}
    tmp = os.path.join(stage, "summary.json")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, default=_json_default)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, "summary.json"))
    for old in os.listdir(out_dir):
        if old.startswith(".trigger-") and old != name:
            shutil.rmtree(os.path.join(out_dir, old), ignore_errors=True)
    return summary
