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
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from operator import itemgetter
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


def collect(df: Any) -> Columns:
    """An aggregate's ``collect_columns`` on the driver, as ``add`` takes them: through
    Arrow (a column at a time, ``rows_of``), not Spark's pickled rows (several times
    slower)."""
    from pyrepl.analytics.sql import _F

    return rows_of(df.select(*collect_columns(_F())).toArrow())


def collect_arrow(df: Any) -> Any:
    """An aggregate whole, and its sampling hash ``_h``, as one pyarrow Table (one Spark
    job): what the store keeps of a batch (its own columns) and what the state adds
    (``rows_of``)."""
    from pyrepl.analytics.sql import _F

    return df.select("*", sample_hash(_F())).toArrow()


class Columns:
    """Collected rows (``collect_columns``' order) kept as columns, as ``add`` takes them
    (a row's tuple is never made: zipping a batch's ~130k rows into tuples, then out of them
    again, cost more than their merge); iterated, the rows."""

    def __init__(self, columns: list[Sequence[Any]]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[0])

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return zip(*self.columns, strict=True)


def rows_of(table: Any) -> Columns:
    """A pyarrow Table holding ``collect_columns``' columns as ``add`` takes its rows, made a
    column at a time: ``fb`` normalized (``_norm``) only when it holds a NaN or a zero, each
    string column through its dictionary (one str object per distinct value: cheaper made,
    and hashed once), the events' structs alone."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols: list[Sequence[Any]] = []
    for name in [*KEYS, "sid", "row", *VALS, "_h"]:
        col = table.column(name)
        n, t = len(col), col.type
        if col.null_count == n:
            cols.append([None] * n)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            d = pc.dictionary_encode(col.combine_chunks(), null_encoding="encode")
            cols.append(list(map(d.dictionary.to_pylist().__getitem__,
                                 d.indices.to_numpy().tolist())))
        elif pa.types.is_struct(t):
            out: list[Any] = [None] * n
            valid = pc.is_valid(col)
            for i, v in zip(pc.indices_nonzero(valid).to_pylist(),
                            col.filter(valid).to_pylist(), strict=True):
                out[i] = v
            cols.append(out)
        elif col.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t)):
            cols.append(col.to_numpy().tolist())
        else:
            cols.append(col.to_pylist())
        if name == "fb" and pc.any(pc.or_(pc.is_nan(col), pc.equal(col, 0.0))).as_py():
            cols[-1] = [_norm(x) for x in cols[-1]]
    return Columns(cols)


def _columns(rows: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """Rows (Spark's, tuples) as ``Columns``' columns, ``fb`` (the keys' only double)
    normalized."""
    cols: list[Sequence[Any]] = list(zip(*rows, strict=True))
    if cols:
        cols[FB] = [_norm(x) for x in cols[FB]]
    return cols


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


def merge_each(acc: list[Any], vals: Sequence[Any]) -> None:
    """``vals`` merged into ``acc``, a function call a value: the rules as written
    (``merge_into`` is their code, made once for VALS)."""
    for i, f in enumerate(_FUNCS):
        acc[i] = f(acc[i], vals[i])


# ``_sum``, ``_max``, ``_min`` of ``a`` (acc[i]) and a value ``x`` not null, inline
_INLINE = {"sum": ["a[{i}] = x if y is None else y + x"],
           "max": ["if y is None or x != x or (y == y and x > y):", "    a[{i}] = x"],
           "min": ["if y is None or y != y or (x == x and x < y):", "    a[{i}] = x"]}


def _merge_source() -> str:
    """``merge_into``'s code: ``merge_each``'s rules inline, a block a value of VALS."""
    lines = ["def merge_into(a, v):", f"    {', '.join(f'v{i}' for i in range(len(HOW)))}, = v"]
    for i, how in enumerate(HOW):
        lines += [f"    if v{i} is not None:", f"        x, y = v{i}, a[{i}]"]
        lines += [f"        {line.format(i=i)}" for line in _INLINE[how]]
    return "\n".join(lines) + "\n"


def _made_merge() -> Callable[[list[Any], Sequence[Any]], None]:
    """``merge_each`` as one function, with no call a value (a quarter of its time)."""
    scope: dict[str, Any] = {}
    exec(compile(_merge_source(), f"<fstate merge of {', '.join(HOW)}>", "exec"), scope)
    return scope["merge_into"]  # type: ignore[no-any-return]


merge_into = _made_merge()


def _total(xs: Sequence[Any]) -> tuple[Sequence[Any], Any]:
    """``xs`` but their nulls, and their sum (one pass in C, for ``_sum_of``, ``_max_of``,
    ``_min_of``): a long, or a double that is NaN where the values hold a NaN (or infinities
    of both signs), or where a sum cannot be had (a long past a double's range)."""
    try:
        return xs, sum(xs)
    except TypeError:      # a null among them (the only values that are not numbers)
        xs = [x for x in xs if x is not None]
    except OverflowError:
        return xs, _NAN
    try:
        return xs, sum(xs)
    except OverflowError:
        return xs, _NAN


def _sum_of(a: Any, xs: Sequence[Any]) -> Any:
    """``_sum`` folded over ``xs`` from ``a``: longs in one ``sum`` (exact in any order),
    doubles one by one (their rounding depends on the order)."""
    xs, s = _total(xs)
    if not xs:
        return a
    if type(s) is int and (a is None or type(a) is int):
        return s if a is None else a + s
    for x in xs:
        if x is not None:
            a = x if a is None else a + x
    return a


def _max_of(a: Any, xs: Sequence[Any]) -> Any:
    """``_max`` folded over ``xs`` from ``a``: the builtin's (its first maximum, as the fold
    keeps) when no NaN is among them, else the fold."""
    xs, s = _total(xs)
    if not xs:
        return a
    if s == s:
        return _max(a, max(xs))
    for x in xs:
        a = _max(a, x)
    return a


def _min_of(a: Any, xs: Sequence[Any]) -> Any:
    """``_min`` folded over ``xs`` from ``a`` (as ``_max_of``)."""
    xs, s = _total(xs)
    if not xs:
        return a
    if s == s:
        return _min(a, min(xs))
    for x in xs:
        a = _min(a, x)
    return a


_FOLDS = tuple({"sum": _sum_of, "max": _max_of, "min": _min_of}[h] for h in HOW)
COLUMNS_FROM = 8    # a key's values merged a column at a time from this many (else one by one)


def merge_rows(acc: dict[tuple[Any, ...], list[Any]], keys: Iterable[tuple[Any, ...]],
               ix: Iterable[int], vals: Sequence[Sequence[Any]],
               cols: Sequence[Sequence[Any]] | None = None) -> None:
    """Rows ``ix`` of ``vals`` merged into ``acc``, each at its key (of ``keys``, one a row
    of ``ix``), as ``_merge`` one at a time would: ``merge_groups`` of them gathered per
    key."""
    by: dict[tuple[Any, ...], list[int]] = {}
    get = by.get
    for k, i in zip(keys, ix, strict=True):
        rows = get(k)
        if rows is None:
            by[k] = [i]
        else:
            rows.append(i)
    merge_groups(acc, by, vals, cols)


def merge_groups(acc: dict[tuple[Any, ...], list[Any]], by: dict[tuple[Any, ...], list[int]],
                 vals: Sequence[Sequence[Any]], cols: Sequence[Sequence[Any]] | None) -> None:
    """Rows of ``vals`` merged into ``acc`` at their key (``by``: a key's rows, rising; the
    keys in the order of their first row), as ``_merge`` one row at a time would (the same
    values, the keys new to ``acc`` added in the same order): one by one when they are few,
    else a column at a time (a fold of each: ``_FOLDS``), out of ``cols`` (``vals``' columns)
    when given (a tuple's values are slow to gather again)."""
    for k, rows in by.items():
        a = acc.get(k)
        if len(rows) < COLUMNS_FROM:
            if a is None:
                a = acc[k] = list(vals[rows[0]])
                rows = rows[1:]
            for i in rows:
                merge_into(a, vals[i])
            continue
        if cols is None:
            columns: Iterable[Sequence[Any]] = zip(*_pick(vals, rows), strict=True)
        else:
            columns = [_pick(c, rows) for c in cols]
        if a is None:
            acc[k] = [f(None, c) for f, c in zip(_FOLDS, columns, strict=True)]
        else:
            a[:] = [f(x, c) for f, x, c in zip(_FOLDS, a, columns, strict=True)]


def _rising(lists: list[list[int]]) -> list[int]:
    """Rising lists of row numbers as one."""
    return lists[0] if len(lists) == 1 else sorted(chain.from_iterable(lists))


def is_lag_key(key: tuple[Any, ...]) -> bool:
    """A lag group's key: neither bad nor counted (``read.is_lag_group``; ``row`` is null in
    every group)."""
    return key[0] is None and key[5] is None


_N, _T0, _T1 = VALS.index("n"), VALS.index("ts_min"), VALS.index("ts_max")
_LAG_COUNT = (None, "replica_lag")   # the lag rows' key in the counts


class Counts:
    """``job.pass_counts``' figures per (bad, event), added to as rows are: a row counts
    once whatever group it joins later (a redraw, a coarser bucket move no count)."""

    def __init__(self) -> None:
        self.acc: dict[tuple[Any, str], list[Any]] = {}    # n, t0, t1, runs, ranks

    def entry(self, key: tuple[Any, str]) -> list[Any]:
        """The key's figures (made where there are none: the keys stay in the order met)."""
        a = self.acc.get(key)
        if a is None:
            a = self.acc[key] = [0, None, None, set(), set()]
        return a

    def add(self, key: tuple[Any, str], ns: Sequence[Any], t0s: Sequence[Any],
            t1s: Sequence[Any]) -> None:
        """Rows' ``n``, ``ts_min`` and ``ts_max`` (their runs and ranks: ``entry``'s sets)."""
        a = self.entry(key)
        a[0] = _sum_of(a[0], ns)
        a[1] = _min_of(a[1], t0s)
        a[2] = _max_of(a[2], t1s)


def run_of(key: tuple[Any, ...]) -> str:
    """A lag group's run, as ``job.pass_counts`` joins it (master, replica, run_id)."""
    return "\n".join(x for x in key[1:4] if x is not None)


_LB, _LM = VALS.index("lb_max"), VALS.index("lm_max")


def _pick(xs: Sequence[Any], ix: Sequence[int]) -> Sequence[Any]:
    """``[xs[i] for i in ix]`` (``ix`` rising), without a Python loop."""
    if len(ix) == len(xs):
        return xs
    if len(ix) > 1:
        return itemgetter(*ix)(xs)  # type: ignore[no-any-return]
    return [xs[i] for i in ix]


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
        """Merge collected rows (``collect_columns``: ``rows_of``'s columns, or rows) of an
        aggregate drawn at a modulus dividing ``every``; the state is drawn at
        ``max(self.every, every)`` after.

        One loop sorts the rows out (an event; a lag key's sample kept, or row joining its
        group; another group's row); each target (counts, series, samples, samples per link,
        groups) then takes its rows a key or a column at a time, in the rows' order: the
        state is the one a row at a time made, for a fraction of the interpreter's work (the
        tests hold the two to the same)."""
        self.redraw(max(self.every, every))
        cols = rows.columns if isinstance(rows, Columns) else _columns(rows)
        if not cols or not len(cols[0]):
            return
        nk, nv = len(KEYS), len(VALS)
        vals = list(zip(*cols[nk + 2:nk + 2 + nv], strict=True))
        vcols, hs = cols[nk + 2:nk + 2 + nv], cols[-1]
        every = self.every
        # a lag key's rows and samples kept; its first tuple, which its samples share (a
        # row's own key tuple, made as the loop goes, is gone before the next is made)
        lag: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[int], list[int]]] = {}
        lag_rows: list[int] = []  # every lag row,
        kept: list[int] = []      # the samples kept,
        grouped: list[int] = []   # every row that joins a group, and their keys
        kept_keys: list[tuple[Any, ...]] = []
        grouped_keys: list[tuple[Any, ...]] = []
        first: dict[tuple[Any, str], int] = {}           # the counts' keys, as first met,
        counted: dict[tuple[Any, str], list[int]] = {}   # their rows (but the lag rows)
        ranks: dict[tuple[Any, str], set[int]] = {}
        for i, k, r, s in zip(range(len(vals)), zip(*cols[:nk], strict=True), cols[nk + 1],
                              cols[nk], strict=True):
            if r is not None:
                row = r.asDict() if hasattr(r, "asDict") else dict(r)
                self.events.append((row, vals[i]))
                ck = (None, row["event"])
                ranks.setdefault(ck, set()).add(source_rank(row))
            elif k[0] is None and k[5] is None:
                mine = lag.get(k)
                if mine is None:
                    first.setdefault(_LAG_COUNT, i)
                    mine = lag[k] = (k, [], [])
                mine[1].append(i)
                lag_rows.append(i)
                if s is not None and hs[i] % every == 0:
                    mine[2].append(i)
                    kept.append(i)
                    kept_keys.append(mine[0])
                else:
                    grouped.append(i)
                    grouped_keys.append(mine[0])
                continue
            else:
                grouped.append(i)
                grouped_keys.append(k)
                ck = (k[0], k[5] or "replica_lag")
            ix = counted.get(ck)
            if ix is None:
                first.setdefault(ck, i)
                counted[ck] = [i]
            else:
                ix.append(i)
        # the counts (their keys new to the state in the order first met)
        for ck in sorted(first, key=first.__getitem__):
            ix = counted.get(ck, [])
            a = self.counts.entry(ck)
            if ck == _LAG_COUNT:
                ix = _rising([ix, lag_rows]) if ix else lag_rows
                a[3].update({run_of(k) for k in lag})
            self.counts.add(ck, _pick(vcols[_N], ix), _pick(vcols[_T0], ix),
                            _pick(vcols[_T1], ix))
            a[4].update(ranks.get(ck, ()))
        if lag and self._series is not None:
            b, acc = self._series
            series: dict[tuple[Any, ...], list[list[int]]] = {}
            for k, (_, ix, _) in lag.items():
                series.setdefault((k[1], k[2], k[3], in_bucket(k[FB], b)), []).append(ix)
            merge_groups(acc, {sk: _rising(ixs) for sk, ixs in series.items()}, vals, vcols)
        if kept:
            self.samples += zip(kept_keys, _pick(vals, kept), _pick(hs, kept), strict=True)
            if self._by_link is not None:
                self._to_links(lag, vcols)
        if grouped:
            merge_rows(self.groups, grouped_keys, grouped, vals, vcols)

    def _to_links(self, lag: dict[tuple[Any, ...], tuple[Any, list[int], list[int]]],
                  vcols: Sequence[Sequence[Any]]) -> None:
        """The samples kept (``lag``: per lag key, its rows and the samples kept of them)
        added to ``link_samples``, each link's in the rows' order (a new link where its
        first sample is)."""
        assert self._by_link is not None
        by: dict[tuple[Any, Any], list[list[int]]] = {}
        for k, (_, _, ix) in lag.items():
            if ix:
                by.setdefault((k[1], k[2]), []).append(ix)
        for link, ixs in sorted(by.items(), key=lambda e: min(ix[0] for ix in e[1])):
            ix = _rising(ixs)
            lists = self._by_link.get(link)
            if lists is None:
                lists = self._by_link[link] = ([], [])
            lists[0].extend(_pick(vcols[_LB], ix))
            lists[1].extend(_pick(vcols[_LM], ix))

    def _group(self, key: tuple[Any, ...], vals: Sequence[Any]) -> None:
        _merge(self.groups, key, vals)

    def redraw(self, every: int) -> None:
        """The samples not drawn at ``every`` (a multiple of the state's) join their
        groups (gathered per key first: ``merge_groups``)."""
        if every == self.every:
            return
        self._by_link = None
        keep: list[tuple[tuple[Any, ...], tuple[Any, ...], int]] = []
        by: dict[tuple[Any, ...], list[int]] = {}   # the others' rows (in vals) per key
        vals: list[Sequence[Any]] = []
        get = by.get
        for s in self.samples:
            if s[2] % every:
                rows = get(s[0])
                if rows is None:
                    by[s[0]] = [len(vals)]
                else:
                    rows.append(len(vals))
                vals.append(s[1])
            else:
                keep.append(s)
        self.samples = keep
        merge_groups(self.groups, by, vals, None)
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
