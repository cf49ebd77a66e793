"""``metrics --follow``'s merged aggregate, kept on the driver: each micro-batch's small
aggregate (``read.aggregate_all`` over its lines) is collected once and merged here, in
Python, exactly as ``read.merge_aggregates`` merges them in Spark; each trigger's finish then
takes its input from here (``job.finish``'s ``inputs``), instead of a Spark query that merged
every stored aggregate again and counted and collected the result (three jobs a trigger,
growing with the history).

The rules are ``merge_aggregates``'s, and the tests hold the two to the same rows:

- a group (the pass's grouping keys but ``sid`` and ``row``) adds its counts and integer sums
  (``n``, ``nb``, ``nm``, ``lb_sum``, ``lm_int``, ``lm_frac``; the double ``lm_odd``, only
  ever NaN or infinite, adds in any order) and keeps its minima and maxima, with Spark's
  order of doubles (NaN above every number); a null is no value;
- an event (``row`` set) is a record of its own;
- a sampled lag sample (a lag group with ``sid``) stays one while the hash Spark gave it
  (``xxhash64(master, replica, ts_min)``, collected with it) is a multiple of the modulus,
  else it joins its group; the modulus only grows, in powers of two;
- the lag groups' time bucket ``fb`` can be coarsened (``rebucket``), as Spark's
  ``floor(fb / B) * B`` does it (a double's floor is a long: NaN 0, infinities the extremes).

The group keys' doubles (``fb``) are normalized as Spark's grouping does: -0.0 is 0.0 and
every NaN one key."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from pyrepl.analytics import redislog
from pyrepl.analytics.read import AGG_KEYS, AGG_MERGE, LAG_MS_FRAC

KEYS = tuple(k for k in AGG_KEYS if k not in ("sid", "row"))   # a group's keys
VALS = tuple(n for n, _ in AGG_MERGE)
HOW = tuple(h for _, h in AGG_MERGE)
FB = KEYS.index("fb")
_NAN = float("nan")
_I64 = 1 << 63


def collect_columns(F: Any) -> list[Any]:
    """What to collect of an aggregate for ``FollowState.add``: the group keys, ``sid``,
    ``row``, the figures, and the sampling hash."""
    c = F.col
    return [*[c(k) for k in KEYS], c("sid"), c("row"), *[c(v) for v in VALS], sample_hash(F)]


def sample_hash(F: Any) -> Any:
    """``_h``: the hash that draws a lag sample (``read.aggregate_all``'s draw, over the
    group's columns)."""
    c = F.col
    return F.xxhash64(c("master"), c("replica"), c("ts_min")).alias("_h")


def collect(df: Any) -> list[tuple[Any, ...]]:
    """An aggregate's ``collect_columns`` on the driver, as tuples: through Arrow (a
    column at a time), not Spark's pickled rows (several times slower)."""
    from pyrepl.analytics.sql import _F

    return rows_of(df.select(*collect_columns(_F())).toArrow())


def collect_arrow(df: Any) -> Any:
    """An aggregate whole, and its sampling hash ``_h``, as one pyarrow Table (one Spark
    job): what the store keeps of a batch (its own columns) and what the state adds
    (``rows_of``)."""
    from pyrepl.analytics.sql import _F

    return df.select("*", sample_hash(_F())).toArrow()


def rows_of(table: Any) -> list[tuple[Any, ...]]:
    """A pyarrow Table holding ``collect_columns``' columns as ``add`` takes its rows."""
    names = [*KEYS, "sid", "row", *VALS, "_h"]
    return list(zip(*[table.column(n).to_pylist() for n in names], strict=True))


def _norm(x: Any) -> Any:
    if isinstance(x, float):
        return _NAN if x != x else x + 0.0
    return x


def spark_floor(x: float) -> int:
    """Spark's floor of a double (a long)."""
    if x != x:
        return 0
    if x == math.inf:
        return _I64 - 1
    if x == -math.inf:
        return -_I64
    return max(-_I64, min(_I64 - 1, math.floor(x)))


def in_bucket(t: float | None, bucket: float) -> float | None:
    """``floor(t / bucket) * bucket`` as Spark computes it (null stays null), normalized."""
    return None if t is None else _norm(spark_floor(t / bucket) * bucket)


def _multiple(outer: float, inner: float) -> bool:
    """Whether buckets of ``outer`` are whole ones of ``inner`` (both whole seconds), so
    that ``in_bucket(in_bucket(t, inner), outer) == in_bucket(t, outer)`` for every t."""
    return outer.is_integer() and inner.is_integer() and inner > 0 and outer % inner == 0


def _nan(x: Any) -> bool:
    return isinstance(x, float) and x != x


def _max(a: Any, b: Any) -> Any:
    """Spark's max of two values (NaN above every number; a null is no value)."""
    if a is None or _nan(b):
        return b
    if b is None or _nan(a):
        return a
    return a if a >= b else b


def _min(a: Any, b: Any) -> Any:
    """Spark's min of two values (NaN above every number; a null is no value)."""
    if a is None or _nan(a):
        return b if b is not None else a
    if b is None or _nan(b):
        return a
    return a if a <= b else b


def _sum(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


_OPS = {"sum": _sum, "max": _max, "min": _min}
_FUNCS = tuple(_OPS[h] for h in HOW)


def merge_into(acc: list[Any], vals: Sequence[Any]) -> None:
    for i, f in enumerate(_FUNCS):
        acc[i] = f(acc[i], vals[i])


def is_lag_key(key: tuple[Any, ...]) -> bool:
    """A lag group's key: neither bad nor counted (``read.is_lag_group``; ``row`` is null in
    every group)."""
    return key[0] is None and key[5] is None


_N, _T0, _T1 = VALS.index("n"), VALS.index("ts_min"), VALS.index("ts_max")


class Counts:
    """``job.pass_counts``' figures per (bad, event), added to as rows are: a row counts
    once whatever group it joins later (a redraw, a coarser bucket move no count)."""

    def __init__(self) -> None:
        self.acc: dict[tuple[Any, str], list[Any]] = {}    # n, t0, t1, runs, ranks

    def add(self, bad: Any, event: str, vals: Sequence[Any], run: str | None,
            rank: int | None) -> None:
        a = self.acc.get((bad, event))
        if a is None:
            a = self.acc[(bad, event)] = [0, None, None, set(), set()]
        a[0] += vals[_N]
        a[1] = _min(a[1], vals[_T0])
        a[2] = _max(a[2], vals[_T1])
        if run is not None:
            a[3].add(run)
        if rank is not None:
            a[4].add(rank)


def run_of(key: tuple[Any, ...]) -> str:
    """A lag group's run, as ``job.pass_counts`` joins it (master, replica, run_id)."""
    return "\n".join(x for x in key[1:4] if x is not None)


_LB, _LM = VALS.index("lb_max"), VALS.index("lm_max")


def _merge(acc: dict[tuple[Any, ...], list[Any]], key: tuple[Any, ...],
           vals: Sequence[Any]) -> None:
    """``vals`` merged into ``acc[key]`` (a copy of them where there is none)."""
    a = acc.get(key)
    if a is None:
        acc[key] = list(vals)
    else:
        merge_into(a, vals)


def _to_series(acc: dict[tuple[Any, ...], list[Any]], key: tuple[Any, ...],
               vals: Sequence[Any], b: float) -> None:
    """A lag row's figures added to its series per bucket ``b`` (``lag.series_groups``)."""
    _merge(acc, (key[1], key[2], key[3], in_bucket(key[FB], b)), vals)


def _to_link(out: dict[tuple[Any, Any], tuple[list[Any], list[Any]]], key: tuple[Any, ...],
             vals: Sequence[Any]) -> None:
    lists = out.get((key[1], key[2]))
    if lists is None:
        lists = out[(key[1], key[2])] = ([], [])
    lists[0].append(vals[_LB])
    lists[1].append(vals[_LM])


class FollowState:
    """The merge of every aggregate added, drawn at modulus ``every``.

    What a trigger's finish reads of it is kept up to date as rows are added, not gone over
    whole each trigger (that grew with the history): the lag series per the last bucket asked
    for (``series``: a lag row adds to its series whichever group or sample it joins, the
    merges being order-free) and the samples' values per link (``link_samples``). A coarser
    bucket (``rebucket``) drops the series unless the series' bucket is a multiple of the
    new one (the series is then the same), a new bucket asked for or a redraw (samples
    joining groups) what they change; the next read builds it again from the state."""

    def __init__(self) -> None:
        self.counts = Counts()
        self.every = 1
        self.groups: dict[tuple[Any, ...], list[Any]] = {}
        self.samples: list[tuple[tuple[Any, ...], tuple[Any, ...], int]] = []  # key, vals, h
        self.events: list[tuple[dict[str, Any], tuple[Any, ...]]] = []          # row, vals
        self._series: tuple[float, dict[tuple[Any, ...], list[Any]]] | None = None
        self._by_link: dict[tuple[Any, Any], tuple[list[Any], list[Any]]] | None = None

    def add(self, rows: Iterable[Sequence[Any]], every: int) -> None:
        """Merge collected rows (``collect_columns``) of an aggregate drawn at a modulus
        dividing ``every``; the state is drawn at ``max(self.every, every)`` after."""
        self.redraw(max(self.every, every))
        nk = len(KEYS)
        sid_i, row_i = nk, nk + 1
        v0 = nk + 2
        count = self.counts.add
        for r in rows:
            key = tuple(_norm(x) for x in r[:nk])
            vals = tuple(r[v0:v0 + len(VALS)])
            if r[row_i] is not None:
                row = r[row_i]
                row = row.asDict() if hasattr(row, "asDict") else dict(row)
                self.events.append((row, vals))
                count(None, row["event"], vals, None, source_rank(row))
                continue
            lag = is_lag_key(key)
            count(key[0], key[5] or "replica_lag", vals, run_of(key) if lag else None, None)
            if lag and self._series is not None:
                _to_series(self._series[1], key, vals, self._series[0])
            if r[sid_i] is not None and lag:
                h = r[-1]
                if h % self.every == 0:
                    self.samples.append((key, vals, h))
                    if self._by_link is not None:
                        _to_link(self._by_link, key, vals)
                else:
                    self._group(key, vals)
            else:
                self._group(key, vals)

    def _group(self, key: tuple[Any, ...], vals: Sequence[Any]) -> None:
        _merge(self.groups, key, vals)

    def redraw(self, every: int) -> None:
        """The samples not drawn at ``every`` (a multiple of the state's) join their
        groups."""
        if every == self.every:
            return
        self._by_link = None
        keep = []
        for key, vals, h in self.samples:
            if h % every == 0:
                keep.append((key, vals, h))
            else:
                self._group(key, vals)
        self.samples = keep
        self.every = every

    def rebucket(self, bucket: float) -> None:
        """Every group's and sample's ``fb`` as per ``bucket`` (``merge_aggregates``'s
        ``bucket``): the groups that meet merge."""
        b = float(bucket)

        def fb(key: tuple[Any, ...]) -> tuple[Any, ...]:
            return (*key[:FB], in_bucket(key[FB], b), *key[FB + 1:])

        old, self.groups = self.groups, {}
        for key, vals in old.items():
            self._group(fb(key), vals)
        self.samples = [(fb(k), v, h) for k, v, h in self.samples]
        if self._series is not None and not _multiple(self._series[0], b):
            self._series = None   # (kept when its bucket is whole multiples of the new one)

    def series(self, bucket_s: float) -> dict[tuple[Any, ...], list[Any]]:
        """The lag groups' and samples' figures per (master, replica, run_id, bucket) of
        ``bucket_s``: the caller reads, never changes them."""
        b = float(bucket_s)
        if self._series is None or self._series[0] != b:
            acc: dict[tuple[Any, ...], list[Any]] = {}
            for k, v in self.groups.items():
                if is_lag_key(k):
                    _to_series(acc, k, v, b)
            for key, vals, _ in self.samples:
                _to_series(acc, key, vals, b)
            self._series = (b, acc)
        return self._series[1]

    def link_samples(self) -> dict[tuple[Any, Any], tuple[list[Any], list[Any]]]:
        """The samples' ``lb_max`` and ``lm_max`` per link: the caller reads, never changes
        them."""
        if self._by_link is None:
            out: dict[tuple[Any, Any], tuple[list[Any], list[Any]]] = {}
            for k, v, _ in self.samples:
                _to_link(out, k, v)
            self._by_link = out
        return self._by_link

    def table(self, schema: Any) -> Any:
        """The merged aggregate as a pyarrow Table of ``aggregate_all``'s Spark ``schema``
        (a compaction of the store, written without Spark): the groups (``sid`` null), the
        samples and the events (``sid`` set: a record of its own; no merge groups by its
        value)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        nk = len(KEYS)
        rows = self.rows()
        sids = [None] * len(self.groups) + [1] * (len(rows) - len(self.groups))
        cols: dict[str, list[Any]] = {k: [r[i] for r in rows] for i, k in enumerate(KEYS)}
        cols["sid"] = sids
        cols["row"] = [r[nk] for r in rows]
        for i, v in enumerate(VALS):
            cols[v] = [r[nk + 1 + i] for r in rows]
        arrow = to_arrow_schema(schema)
        return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in arrow],
                                    schema=arrow)

    def span(self) -> tuple[Any, Any]:
        """The first and last time of the good records (Spark's min of ``ts_min``, max of
        ``ts_max``)."""
        t0 = t1 = None
        for c in pass_counts([self]):
            if c["bad"] is None:
                t0, t1 = _min(t0, c["t0"]), _max(t1, c["t1"])
        return t0, t1

    def rows(self) -> list[tuple[Any, ...]]:
        """The merged aggregate's rows: (group keys, row, figures) — groups, samples (their
        ``sid`` is not kept), events — for the tests' comparison with Spark's."""
        out = [(*k, None, *v) for k, v in self.groups.items()]
        out += [(*k, None, *v) for k, v, _ in self.samples]
        nulls = (None,) * len(KEYS)
        out += [(*nulls, row, *v) for row, v in self.events]
        return out


# -- a trigger's finish from the states (the follower's, and its Redis logs') ------------------

def source_rank(row: dict[str, Any]) -> int:
    """``logread.source_rank`` of an event."""
    src = row.get("source")
    if src is None or src == "pyrepl":
        return 0
    if src in (redislog.REDIS, redislog.VALKEY):
        return 1
    return 3 if (row.get("inferred") or 0) == 1 else 2


def pass_counts(states: Sequence[FollowState]) -> list[dict[str, Any]]:
    """``job.pass_counts`` of the states' union (``runs`` exact, not HyperLogLog's
    estimate: it only sizes the finish), from the counts each state keeps as it adds rows."""
    acc: dict[tuple[Any, str], list[Any]] = {}
    for s in states:
        for k, (n, t0, t1, runs, ranks) in s.counts.acc.items():
            a = acc.get(k)
            if a is None:
                acc[k] = [n, t0, t1, set(runs), set(ranks)]
            else:
                a[0] += n
                a[1], a[2] = _min(a[1], t0), _max(a[2], t1)
                a[3] |= runs
                a[4] |= ranks
    return [{"bad": bad, "event": event, "n": n, "t0": t0, "t1": t1, "runs": len(runs),
             "ranks": sorted(ranks)} for (bad, event), (n, t0, t1, runs, ranks) in acc.items()]


def series_rows(states: Sequence[FollowState], bucket_s: float) -> list[dict[str, Any]]:
    """``lag.series_groups`` of the states' lag groups and samples, per ``bucket_s``."""
    if len(states) == 1:
        acc = states[0].series(bucket_s)
    else:
        acc = {}
        for s in states:
            for k2, vals in s.series(bucket_s).items():
                _merge(acc, k2, vals)
    ix = {n: i for i, n in enumerate(VALS)}
    out = []
    for (master, replica, run_id, bucket), a in acc.items():
        exact = None if a[ix["lm_int"]] is None or a[ix["lm_frac"]] is None else \
            float(a[ix["lm_int"]]) + float(a[ix["lm_frac"]]) * (1.0 / LAG_MS_FRAC)
        odd = a[ix["lm_odd"]]
        out.append({"master": master, "replica": replica, "run_id": run_id, "bucket": bucket,
                    "samples": a[ix["n"]], "nb": a[ix["nb"]], "nm": a[ix["nm"]],
                    "lag_bytes_sum": a[ix["lb_sum"]], "lag_bytes_max": a[ix["lb_max"]],
                    "lag_ms_sum": odd if odd is not None else exact,
                    "lag_ms_max": a[ix["lm_max"]], "mro_min": a[ix["mro_min"]],
                    "mro_max": a[ix["mro_max"]], "ts_min": a[ix["ts_min"]],
                    "ts_max": a[ix["ts_max"]]})
    return out


def samples_by_link(states: Sequence[FollowState]
                    ) -> dict[tuple[Any, Any], tuple[list[Any], list[Any]]]:
    """The sampled lag samples' ``lb_max`` and ``lm_max`` per link (read, never changed)."""
    if len(states) == 1:
        return states[0].link_samples()
    out: dict[tuple[Any, Any], tuple[list[Any], list[Any]]] = {}
    for s in states:
        for link, (lb, lm) in s.link_samples().items():
            lists = out.setdefault(link, ([], []))
            lists[0].extend(lb)
            lists[1].extend(lm)
    return out


def known_names(states: Sequence[FollowState]) -> set[str]:
    """``job.known_names``: the lag groups' masters and replicas, the collector's samples'
    nodes and their masters."""
    out: set[str] = set()
    ci, pi = KEYS.index("cnode"), KEYS.index("cpeer")
    for s in states:
        keys = list(s.groups) + [k for k, _, _ in s.samples]
        for k in keys:
            if is_lag_key(k):
                out.update(x for x in (k[1], k[2]) if x is not None)
            out.update(x for x in (k[ci], k[pi]) if x is not None)
    return out
