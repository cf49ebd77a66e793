"""Reading sync-event logs (NDJSON, plain or gzip, or Parquet) into classified rows, the one
aggregation pass over them, and the conversion to Parquet.

Theory of operation: the logs are read once, with the schema built from
``pyrepl.events.FIELDS`` (never inferred); each line is classified (good, unparseable, missing
``ts``/``event``/``node``, unknown event). ``aggregate_all`` is the one pass over the input: the
periodic ``replica_lag`` samples (the bulk of any log) are summed per link and 10 s bucket
(or per the run's bucket when it is known before the pass: ``job.footer_bucket``), exactly,
``pyrepl collect``'s ``info_sample`` lines are only counted (per node), every other good event
stays a row of its own, and bad lines are counted per kind.

Redis and Valkey log files among the inputs are found by their first lines and parsed into the
same rows by ``logread`` (Python, one rotated set per task); the NDJSON files keep the JVM
path. ``parse_inputs`` unions the two."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pyrepl.analytics.logread import LOG_BAD, file_statuses
from pyrepl.analytics.schema import (
    CORRUPT,
    COUNTED_ONLY,
    field_names,
    spark_schema,
)
from pyrepl.analytics.sql import _F
from pyrepl.events import EVENTS, FIELDS

# -- reading ------------------------------------------------------------------------------------

# The writer's exact bytes for a lag sample: lines holding them are parsed for LAG_FIELDS only.
LAG_MARK = '"event":"replica_lag"'
LAG_FIELDS = ("ts", "event", "node", "run_id", "peer", "offset", "lag_bytes", "lag_ms")
LINE_BYTES = 150  # a short line's length: a file's bytes over it guess its lines
FINE_BUCKET_S = 10.0  # lag samples are first summed per 10 s, then per chosen bucket
SAMPLE_TARGET = 200_000  # lag percentiles come from about this many samples at most
# lag_ms's fractions are summed as integers in units of 1 / LAG_MS_FRAC ms (``aggregate_all``):
# at most LAG_MS_FRAC a sample, so a long holds the sum of 2^31 samples
LAG_MS_FRAC = 1 << 32
# A line that is not the writer's lag sample goes to the JSON reader behind this character,
# which no JSON text starts with: it comes back whole as a corrupt record (column RAW)
WRAP = "\u0001"
RAW = "_pyrepl_raw"
sql_type = {"string": "string", "long": "bigint", "double": "double"}
# Parquet's physical types (and the string annotation) of FIELDS' types, as Spark writes them
_PARQUET_TYPES = {"string": 6, "long": 2, "double": 5}  # BYTE_ARRAY, INT64, DOUBLE


def detect_format(paths: Sequence[str]) -> str:
    def is_parquet(p: str) -> bool:
        q = p.rstrip("/")
        if q.endswith(".parquet"):
            return True
        if os.path.isdir(q):
            for _, _, files in os.walk(q):
                if any(f.endswith(".parquet") for f in files):
                    return True
                if any(not f.startswith((".", "_")) for f in files):
                    return False
        return False

    return "parquet" if paths and all(is_parquet(p) for p in paths) else "json"


def _struct(names: Sequence[str]) -> Any:
    from pyspark.sql import types as T

    full = {f.name: f for f in spark_schema(with_corrupt=True).fields}
    return T.StructType([full[n] for n in (*names, CORRUPT)])


def parse_lines(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """Every record as FIELDS plus ``_corrupt_record`` and ``lagline``.

    NDJSON is read as text and each non-blank line parsed once: a line holding LAG_MARK (how
    the writer spells a lag sample, the bulk of any log and most of the parsing cost) for the
    lag fields only, any other line with the whole schema. Parquet rows come as they are.

    The lag lines are parsed by Spark's JSON reader of a Dataset of lines (``_json_lines``),
    which hands Jackson each line as it is; ``from_json`` (used for every other line, and
    before for all of them) wraps each in a character decoder first, which made it cost
    twice as much a line. Both are the same parser with the same options (the reader's only
    difference, a top-level array read as several records, cannot arise: only lines that
    start with ``{`` go that way), so the rows are the same. (Other lines go behind WRAP,
    not inside a JSON object built by ``to_json``: that cost more CPU than the reader saves.)
    5M lines: the pass over them 22.8 -> 16.8 CPU-s warm."""
    if fmt == "auto":
        fmt = detect_format(paths)
    reader = spark.read.option("recursiveFileLookup", "true")
    # (projections as SQL text: one call to the JVM each, not several per column)
    if fmt == "parquet":
        if parquet_fits_fields(paths):  # no schema inference (a one-task Spark job)
            df = reader.schema(", ".join(f"`{n}` {sql_type[t]}" for n, t, _ in FIELDS)) \
                .parquet(*paths)
        else:
            df = reader.parquet(*paths)
        have = set(df.columns)
        sql = sql_type
        return df.selectExpr(*[f"CAST({f'`{name}`' if name in have else 'NULL'} AS {sql[t]}) "
                               f"AS `{name}`" for name, t, _ in FIELDS],
                             f"CAST(NULL AS string) AS `{CORRUPT}`", "false AS lagline")
    return parse_text(spark, reader.text(list(paths)))


def parse_text(spark: Any, text: Any) -> Any:
    """``parse_lines`` of a DataFrame of lines (one string column ``value``): every record as
    FIELDS plus ``_corrupt_record`` and ``lagline`` (``follow`` gives it a stream batch's)."""
    F = _F()
    v = F.col("value")
    # a substring test, as the oracle's ``in``: ``contains`` tries a byte offset only where the
    # mark's first byte is; ``instr`` (here before, twice a line: in the blank-line filter and
    # in the select) compared the whole mark at every character, ~15% of the CPU of the pass
    mark = v.contains(LAG_MARK)
    # a lag line goes to the reader as it is when it starts with "{" (an object); any other
    # line goes with WRAP in front, which makes it a corrupt record (the reader's
    # ``_corrupt_record`` gives it back), parsed after with from_json (they are few). (A line
    # with the mark is never blank: the filter needs no mark.)
    lines = text.filter(F.trim(v) != "").select(
        F.when(v.startswith("{") & mark, v).otherwise(F.concat(F.lit(WRAP), v)).alias("value"))
    first = _json_lines(spark, lines, _struct(LAG_FIELDS))
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    raw = F.when(F.col(CORRUPT).startswith(WRAP), F.expr(f"substr(`{CORRUPT}`, 2)"))
    parsed = first.select(*[F.col(n).alias(f"_l_{n}") for n in (*LAG_FIELDS, CORRUPT)],
                          raw.alias(RAW))
    wrapped = F.col(RAW).isNotNull()
    parsed = parsed.select("*", (~wrapped | F.col(RAW).contains(LAG_MARK)).alias("lagline"))
    # each parse once per line: the results are columns, then merged field by field
    parsed = parsed.select(
        "*",
        F.when(wrapped & F.col("lagline"), F.from_json(RAW, _struct(LAG_FIELDS), opts))
        .alias("jn"),
        F.when(wrapped & ~F.col("lagline"), F.from_json(RAW, spark_schema(), opts))
        .alias("jf"))
    cols = []
    for n in (*field_names(), CORRUPT):
        if n in LAG_FIELDS or n == CORRUPT:
            cols.append(f"CASE WHEN `{RAW}` IS NULL THEN `_l_{n}` WHEN lagline THEN jn.`{n}` "
                        f"ELSE jf.`{n}` END AS `{n}`")
        else:
            cols.append(f"jf.`{n}` AS `{n}`")
    return parsed.selectExpr(*cols, "lagline")


def _json_lines(spark: Any, lines: Any, schema: Any) -> Any:
    """Spark's JSON reader (PERMISSIVE, corrupt lines in ``_corrupt_record``) over a
    DataFrame of one string column: ``DataFrameReader.json`` of a ``Dataset[String]``."""
    from pyspark.sql import DataFrame

    jvm = spark.sparkContext._jvm
    ds = getattr(lines._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
    ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    jdf = spark._jsparkSession.read().schema(ddl).option("mode", "PERMISSIVE") \
        .option("columnNameOfCorruptRecord", CORRUPT).json(ds)
    return DataFrame(jdf, spark)


def parse_inputs(spark: Any, paths: Sequence[str], fmt: str = "auto",
                 log_tz: str | None = None, whole: bool = False
                 ) -> tuple[Any, dict[str, Any] | None]:
    """``parse_lines`` (or, with ``whole``, ``read_raw``) of the NDJSON inputs, unioned with
    the rows of the Redis/Valkey logs among them (plus ``logbad``: a bad log line's kind), and
    the logs' summary (None without logs)."""
    from pyrepl.analytics.logread import read_logs, split_inputs

    F = _F()
    if fmt == "auto":
        fmt = detect_format(paths)
    one = read_raw if whole else parse_lines
    if fmt == "parquet":
        return one(spark, paths, fmt), None
    ndjson, logs = split_inputs(spark, paths)
    if not logs:
        return one(spark, paths, fmt), None
    ldf, summary = read_logs(spark, logs, log_tz)
    if whole:
        ldf = ldf.drop("lagline")
    if not ndjson:
        return ldf, summary
    return one(spark, ndjson, fmt).withColumn("logbad", F.lit(None).cast("string")) \
        .unionByName(ldf), summary


def read_raw(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """Every record as FIELDS plus ``_corrupt_record``, each line parsed with the whole schema
    (the conversion to Parquet keeps every field)."""
    F = _F()
    if fmt == "auto":
        fmt = detect_format(paths)
    if fmt == "parquet":
        return parse_lines(spark, paths, fmt).drop("lagline")
    text = spark.read.option("recursiveFileLookup", "true").text(list(paths))
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    return text.filter(F.trim(F.col("value")) != "") \
        .select(F.from_json("value", spark_schema(), opts).alias("j")).select("j.*")


def estimate_lines(spark: Any, paths: Sequence[str], fmt: str = "auto") -> int:
    """About how many lines/rows the input has (to size the lag sample): Parquet footers, or
    the bytes of the files (any Hadoop file system) over a short line's length."""
    if fmt == "auto":
        fmt = detect_format(paths)
    if fmt == "parquet":
        n = parquet_rows(spark, paths)
        if n is None:
            n = spark.read.option("recursiveFileLookup", "true").parquet(*paths).count()
        return int(n)
    total = 0
    for f in file_statuses(spark, paths):
        n = int(f.getLen())
        total += n * 8 if f.getPath().getName().endswith(".gz") else n
    return total // LINE_BYTES


def parquet_rows(spark: Any, paths: Sequence[str]) -> int | None:
    """The rows of the Parquet files under the paths (the files Spark reads: names not
    starting with "." or "_"), from their footers: read here for local files, by the JVM's
    Parquet reader for other file systems; None when a footer cannot be read (then a Spark
    count decides). Milliseconds, where a Spark count of 20M rows in 57 files took 3-5 s."""
    from pyrepl.analytics.logread import _local

    local = [_local(p) for p in paths]
    if all(p is not None and os.path.exists(p) for p in local):  # no py4j call per file
        n = _local_rows([p for p in local if p is not None])
        if n is not None:
            return n
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    pq = jvm.org.apache.parquet.hadoop
    total = 0
    try:
        for st in file_statuses(spark, paths):
            path = st.getPath()
            if path.getName().startswith((".", "_")):
                continue
            lpath = _local(path.toString())
            n = footer_rows(lpath) if lpath is not None else None
            if n is None:
                reader = pq.ParquetFileReader.open(pq.util.HadoopInputFile.fromStatus(st, conf))
                try:
                    n = int(reader.getRecordCount())
                finally:
                    reader.close()
            total += n
    except Exception:  # noqa: BLE001 - py4j's errors: not Parquet, unreadable ...
        return None
    return total


def _local_rows(paths: Sequence[str]) -> int | None:
    total = 0
    for p in paths:
        for f in _visible_files(p):
            n = footer_rows(f)
            if n is None:
                return None
            total += n
    return total


def _visible_files(path: str) -> list[str]:
    """The files Spark reads under a local path: none whose name (or a directory's on the
    way) starts with "." or "_"."""
    if not os.path.isdir(path):
        return [path]
    out = []
    for d, dirs, files in os.walk(path):
        dirs[:] = [x for x in dirs if not x.startswith((".", "_"))]
        out += [os.path.join(d, f) for f in files if not f.startswith((".", "_"))]
    return out


def parquet_fits_fields(paths: Sequence[str]) -> bool:
    """Whether every Parquet file under the (local) paths holds FIELDS' columns, where it has
    them, with their types as Spark writes them, and nothing nested: then the files are read
    with FIELDS as their schema (a column a file lacks reads as null, as the CAST of a missing
    column gave), sparing Spark's schema inference, a Spark job of its own at the start of
    every run. False for any doubt (another file system, a footer not read, another type):
    then Spark infers the schema as before."""
    from pyrepl.analytics.logread import _local

    want = {n: _PARQUET_TYPES[t] for n, t, _ in FIELDS}
    local = [_local(p) for p in paths]
    if not local or not all(p is not None and os.path.exists(p) for p in local):
        return False
    seen = False
    for p in local:
        for f in _visible_files(p or ""):
            cols = footer_columns(f)
            if cols is None:
                return False
            for name, (kind, utf8) in cols.items():
                if name in want and (kind != want[name] or (kind == 6) != utf8):
                    return False
            seen = True
    return seen


def footer_columns(path: str) -> dict[str, tuple[int, bool]] | None:
    """The top-level columns of a local Parquet file, name -> (physical type, string
    annotation); None when it is not one, or has nested or repeated columns."""
    meta = _footer(path)
    if meta is None:
        return None
    try:
        elems = _ThriftCompact(meta).schema_elements()
    except (IndexError, ValueError):
        return None
    if not elems or elems[0].get(5) != len(elems) - 1:  # the root, then flat leaves only
        return None
    out = {}
    for e in elems[1:]:
        name = e.get(4)
        if not isinstance(name, bytes) or 5 in e or 1 not in e or e.get(3, 0) == 2:
            return None  # no name, a group, no type or a repeated column
        out[name.decode("utf-8", "replace")] = (e[1], e.get(6) == 0 or 10 in e)
    return out


def _footer(path: str) -> bytes | None:
    """The FileMetaData bytes of a local Parquet file; None when it is not one."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 12:
                return None
            f.seek(size - 8)
            tail = f.read(8)
            if tail[4:] != b"PAR1":
                return None
            n = int.from_bytes(tail[:4], "little")
            if n <= 0 or n > size - 12:
                return None
            f.seek(size - 8 - n)
            return f.read(n)
    except OSError:
        return None


def footer_rows(path: str) -> int | None:
    """``num_rows`` of a local Parquet file's footer (FileMetaData, Thrift compact protocol:
    field 1 the version, 2 the schema, 3 the rows); None when it is not one."""
    meta = _footer(path)
    if meta is None:
        return None
    try:
        return _ThriftCompact(meta).field_i64(3)
    except (IndexError, ValueError):
        return None


def footer_span(paths: Sequence[str], column: str = "ts") -> tuple[float, float] | None:
    """The smallest and largest value of a double column in the Parquet files under the local
    paths, from their footers' row-group statistics (parquet-mr's, as Spark writes them, leave
    NaN out); None for any doubt: another file system, a footer not read, a row group with
    rows but no statistics for the column, a file without it."""
    import struct

    from pyrepl.analytics.logread import _local

    local = [_local(p) for p in paths]
    if not local or not all(p is not None and os.path.exists(p) for p in local):
        return None
    lo = hi = None
    want = [column.encode()]
    for p in local:
        for f in _visible_files(p or ""):
            meta = _footer(f)
            if meta is None:
                return None
            try:
                fmd = _ThriftCompact(meta).value(12)
                for rg in fmd.get(4, []):
                    if not rg.get(3):  # no rows
                        continue
                    cm = next((c.get(3, {}) for c in rg.get(1, [])
                               if c.get(3, {}).get(3) == want), None)
                    if cm is None or cm.get(1) != _PARQUET_TYPES["double"]:
                        return None
                    st = cm.get(12, {})
                    if st.get(3) == rg.get(3):  # every value null: nothing to count
                        continue
                    a, b = st.get(6, st.get(2)), st.get(5, st.get(1))
                    if not isinstance(a, bytes) or not isinstance(b, bytes) or \
                            len(a) != 8 or len(b) != 8:
                        return None
                    x, y = struct.unpack("<d", a)[0], struct.unpack("<d", b)[0]
                    lo = x if lo is None else min(lo, x)
                    hi = y if hi is None else max(hi, y)
            except (IndexError, ValueError, AttributeError, TypeError):
                return None
    return None if lo is None or hi is None or not lo <= hi else (lo, hi)


class _ThriftCompact:
    """Just enough of Thrift's compact protocol to find one i64 field of a struct, and the
    schema's elements."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def next_field(self, fid: int) -> tuple[int, int]:
        """The next field's id and type in a struct whose last field was ``fid`` (type 0:
        the struct's end)."""
        head = self.byte()
        kind = head & 0x0F
        if kind == 0:
            return fid, 0
        delta = head >> 4
        return (fid + delta if delta else self.zigzag()), kind

    def field_i64(self, want: int) -> int | None:
        fid = 0
        while True:
            fid, kind = self.next_field(fid)
            if kind == 0:
                return None
            if fid == want and kind == 6:
                return self.zigzag()
            self.skip(kind)

    def schema_elements(self) -> list[dict[int, Any]]:
        """FileMetaData's field 2, its list of SchemaElements, each as {field id: value} for
        1 (type), 3 (repetition), 4 (name, bytes), 5 (children), 6 (converted type) and 10
        (logical type: True when there)."""
        fid = 0
        while True:
            fid, kind = self.next_field(fid)
            if kind == 0:
                return []
            if fid == 2 and kind == 9:
                head = self.byte()
                size = head >> 4 if head >> 4 != 15 else self.varint()
                if head & 0x0F != 12:
                    raise ValueError("schema: not a list of structs")
                return [self.struct_fields() for _ in range(size)]
            self.skip(kind)

    def struct_fields(self) -> dict[int, Any]:
        out: dict[int, Any] = {}
        fid = 0
        while True:
            fid, kind = self.next_field(fid)
            if kind == 0:
                return out
            if kind == 5:  # i32
                out[fid] = self.zigzag()
            elif kind == 8:  # binary
                n = self.varint()
                out[fid] = self.data[self.pos:self.pos + n]
                self.pos += n
                if self.pos > len(self.data):
                    raise ValueError("truncated")
            else:
                if kind == 12:
                    out[fid] = True
                self.skip(kind)

    def skip(self, kind: int) -> None:
        if kind in (1, 2):  # booleans: in the field header
            return
        if kind == 3:
            self.pos += 1
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.pos += 8
        elif kind == 8:
            n = self.varint()  # (not ``pos += varint()``: varint moves pos first)
            self.pos += n
        elif kind in (9, 10):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(size):
                self.skip_value(head & 0x0F)
        elif kind == 11:
            size = self.varint()
            if size:
                kv = self.byte()
                for _ in range(size):
                    self.skip_value(kv >> 4)
                    self.skip_value(kv & 0x0F)
        elif kind == 12:
            self.skip_struct()
        else:
            raise ValueError(f"thrift compact type {kind}")
        if self.pos > len(self.data):
            raise ValueError("truncated")

    def value(self, kind: int) -> Any:
        """One value of a compact type, read whole: a struct as {field id: value}, a list or
        set as a list, binary as bytes, integers as ints (booleans as bools)."""
        if kind in (1, 2):
            return self.byte() == 1
        if kind == 3:
            return self.byte()
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            self.pos += 8
            return self.data[self.pos - 8:self.pos]
        if kind == 8:
            n = self.varint()
            self.pos += n
            if self.pos > len(self.data):
                raise ValueError("truncated")
            return self.data[self.pos - n:self.pos]
        if kind in (9, 10):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            return [self.value(head & 0x0F) for _ in range(size)]
        if kind == 12:
            out: dict[int, Any] = {}
            fid = 0
            while True:
                head = self.byte()
                k = head & 0x0F
                if k == 0:
                    return out
                delta = head >> 4
                fid = fid + delta if delta else self.zigzag()
                out[fid] = k == 1 if k in (1, 2) else self.value(k)
        self.skip(kind)  # a map: not needed here
        return None

    def skip_value(self, kind: int) -> None:
        if kind in (1, 2):  # a boolean inside a list or map: one byte
            self.pos += 1
        else:
            self.skip(kind)

    def skip_struct(self) -> None:
        fid = 0
        while True:
            fid, kind = self.next_field(fid)
            if kind == 0:
                return
            self.skip(kind)


def classify(raw: Any, since: float | None = None, until: float | None = None) -> Any:
    """FIELDS plus ``bad``: null for a good event, else why the line is not one. Good events
    outside [since, until) are dropped. (One SQL select: a follower builds this plan again
    each micro-batch, and as Column calls it was ~300 py4j round trips, a third of the
    plan's.)"""
    lagline = "`lagline`" if "lagline" in raw.columns else "false"
    logbad = "`logbad`" if "logbad" in raw.columns else "CAST(NULL AS STRING)"
    events = ", ".join(f"'{e}'" for e in EVENTS)
    bad = (f"CASE WHEN {logbad} IS NOT NULL THEN {logbad}"
           f" WHEN `{CORRUPT}` IS NOT NULL THEN 'unparseable'"
           " WHEN ts IS NULL OR event IS NULL OR node IS NULL THEN 'missing-required'"
           f" WHEN {lagline} AND event != 'replica_lag' THEN 'unparseable'"
           f" WHEN NOT event IN ({events}) THEN 'unknown-event' END AS bad")
    return _window(raw.selectExpr(*[f"`{n}`" for n in field_names()], bad), since, until)


def _window(df: Any, since: float | None, until: float | None) -> Any:
    F = _F()
    keep = None
    if since is not None:
        keep = F.col("ts") >= F.lit(float(since))
    if until is not None:
        c = F.col("ts") < F.lit(float(until))
        keep = c if keep is None else keep & c
    return df if keep is None else df.filter(F.col("bad").isNotNull() | keep)


def aggregate_all(ev: Any, fine_s: float, every: int) -> Any:
    """The one pass over the input (FIELDS + bad). Lag samples are summed per (master,
    replica, run_id, fine bucket): count, sums, maxima, offset range; every ``every``-th one (by
    a hash of node, peer and ts) stays a row of its own (``sid`` set) for the percentiles. Every
    other good event stays a row of its own too, whole, in ``row``; bad lines are counted per
    kind. Each record lands in exactly one group; the result is small.

    Every aggregate is exact, so a group's figures do not depend on how its samples were split
    into groups first or in what order they were added (``lag.series_groups`` sums these
    groups again per the chosen bucket; a pass over Parquet may group per that bucket
    directly: ``job.footer_bucket``; both must give the same series): counts and the
    lag_bytes sum are integers (sums of longs are associative, even past overflow), minima
    and maxima are order-free. lag_ms is a double, whose sum is not: it is summed as integers
    in two parts, ``lm_int`` = floor(lag_ms) and ``lm_frac`` = its fraction in units of
    2^-32 ms rounded half up (LAG_MS_FRAC: an error below 2^-33 ms a sample; none for
    lag_ms with whole milliseconds, all that pyrepl and Redis give), and the non-finite
    values alone (NaN, infinities, whose sum is order-free) in ``lm_odd``; ``series_groups``
    makes the double of them. (The bucket keys agree too: for a double t and a bucket B
    that is a multiple of 10, floor(t / B) = floor(floor(t / 10) * 10 / B) with the divisions
    rounded, since a rounded quotient never rounds up onto an integer for such t.)"""
    F = _F()
    c = F.col
    lm = c("lag_ms")
    finite = ~F.isnan(lm) & (F.abs(lm) < F.lit(float("inf")))  # null where lag_ms is
    good = c("bad").isNull()
    lag = good & (c("event") == "replica_lag")
    sampled = lag if every <= 1 else lag & (
        F.pmod(F.xxhash64("node", "peer", "ts"), F.lit(every)) == 0)
    counted = good & c("event").isin(*COUNTED_ONLY)  # info samples: counts and span only
    other = good & ~lag & ~counted
    mro = c("offset") + c("lag_bytes")
    return ev.groupBy(
        c("bad"),
        F.when(lag, c("node")).alias("master"), F.when(lag, c("peer")).alias("replica"),
        F.when(lag, c("run_id")).alias("run_id"),
        F.when(lag, F.floor(c("ts") / F.lit(fine_s)) * F.lit(fine_s)).alias("fb"),
        F.when(counted, c("event")).alias("counted"),
        # the nodes they name (logread.name_unknown): the sampled one, its master
        F.when(counted, c("node")).alias("cnode"), F.when(counted, c("peer")).alias("cpeer"),
        F.when(sampled | other, F.monotonically_increasing_id()).alias("sid"),
        # the whole event as a grouping key, not an aggregate: only fixed-width aggregation
        # buffers keep this a hash aggregation (a string buffer would make Spark sort it all)
        F.when(other, F.expr(f"struct({', '.join(f'`{n}`' for n in field_names())})"))
        .alias("row"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.count("lag_bytes").alias("nb"), F.count("lag_ms").alias("nm"),
        F.sum("lag_bytes").alias("lb_sum"), F.max("lag_bytes").alias("lb_max"),
        F.sum(F.when(finite, F.floor(lm))).alias("lm_int"),
        F.sum(F.when(finite, F.floor((lm - F.floor(lm)) * F.lit(float(LAG_MS_FRAC))
                                     + F.lit(0.5)))).alias("lm_frac"),
        F.sum(F.when(~finite, lm)).alias("lm_odd"), F.max("lag_ms").alias("lm_max"),
        F.min(mro).alias("mro_min"), F.max(mro).alias("mro_max"),
        F.min("ts").alias("ts_min"), F.max("ts").alias("ts_max"))


def is_lag_group() -> Any:
    """Of ``aggregate_all``'s rows, the lag groups: neither bad, nor an event, nor counted."""
    c = _F().col
    return c("bad").isNull() & c("row").isNull() & c("counted").isNull()


# aggregate_all's grouping columns, and how each of its figures merges
AGG_KEYS = ("bad", "master", "replica", "run_id", "fb", "counted", "cnode", "cpeer", "sid", "row")
AGG_MERGE = (("n", "sum"), ("nb", "sum"), ("nm", "sum"), ("lb_sum", "sum"), ("lb_max", "max"),
             ("lm_int", "sum"), ("lm_frac", "sum"), ("lm_odd", "sum"), ("lm_max", "max"),
             ("mro_min", "min"), ("mro_max", "max"), ("ts_min", "min"), ("ts_max", "max"))


def merge_aggregates(aggs: Any, every: int, bucket: float | None = None) -> Any:
    """Several ``aggregate_all`` results over disjoint inputs (a stream's batches, each with
    its own sampling ``every``, a power of two dividing ``every``) -> the one
    ``aggregate_all`` of their union with ``every`` would give, up to ``sid`` values.

    Rows with a ``sid`` are records of their own: an event (kept as it is) or a sampled lag
    sample (kept when sampled at ``every`` too: the same hash of node, peer and ts, here the
    lag group's master, replica and ts; else it joins its link's, run's and bucket's group, as
    a sample not drawn). Every other group is keyed by its columns without ``sid`` and merges
    exactly (counts and integer sums add, minima and maxima: ``aggregate_all``). A batch's
    ``sid`` values may equal another's: only the records of one batch are told apart by them,
    and here nothing groups by them. With ``bucket`` (a multiple of FINE_BUCKET_S), the lag
    groups are summed per that bucket (``fb``), as a pass grouping by it would have: the
    finish's bucket must then be a multiple of it (``follow.stored_bucket``)."""
    F = _F()
    c = F.col
    if bucket is not None:
        aggs = aggs.withColumn("fb", F.floor(c("fb") / F.lit(float(bucket))) * F.lit(
            float(bucket)))
    drawn = is_lag_group() & c("sid").isNotNull() & (F.pmod(F.xxhash64(c("master"), c("replica"),
                                                            c("ts_min")), F.lit(every)) == 0)
    own = c("row").isNotNull() | drawn
    groups = aggs.filter(~own).withColumn("sid", F.lit(None).cast("bigint")) \
        .groupBy(*AGG_KEYS).agg(*[getattr(F, how)(n).alias(n) for n, how in AGG_MERGE])
    return aggs.filter(own).select(*AGG_KEYS, *[n for n, _ in AGG_MERGE]) \
        .unionByName(groups)


def convert(spark: Any, paths: Sequence[str], dest: str, fmt: str = "auto",
            since: float | None = None, until: float | None = None,
            log_tz: str | None = None) -> dict[str, Any]:
    """NDJSON (or Parquet) logs -> Parquet of FIELDS at ``dest``, good events only; returns
    the counts (events, malformed by kind). One pass: the counts are observed while the
    Parquet is written (nothing is cached, so any size converts in bounded memory)."""
    from pyspark.sql import Observation

    F = _F()
    c = F.col
    raw, logs = parse_inputs(spark, paths, fmt, log_tz, whole=True)
    cl = classify(raw, since, until)
    kinds = ("unparseable", "missing-required", "unknown-event", *(LOG_BAD if logs else ()))
    obs = Observation("pyrepl-convert")
    cl.observe(obs, F.count(F.when(c("bad").isNull(), 1)).alias("events"),
               *[F.count(F.when(c("bad") == k, 1)).alias(k) for k in kinds]) \
        .filter(c("bad").isNull()).drop("bad").write.mode("overwrite").parquet(dest)
    got = obs.get
    malformed = {k: int(got.get(k, 0)) for k in kinds}
    return {"events": int(got.get("events", 0)), "malformed_lines": sum(malformed.values()),
            "malformed": malformed, "parquet": dest}
