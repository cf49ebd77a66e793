"""Rows on the driver as tables: Spark's (a local relation parsed from JSON in the JVM) or
Arrow's. An output table the driver's finish made (``RowTable``) is written as Parquet by
pyarrow, with no Spark job, where its destination is local; it becomes a DataFrame only where
Spark must write it (a remote path) or a reader asks for one."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pyrepl.analytics.schema import table_columns

# Driver-built tables up to this many rows reach Spark as JSON text (see ``json_frame``)
JSON_FRAME_ROWS = 100_000
PART = "part-00000.zstd.parquet"    # the one file of a table pyarrow writes


def json_relation(spark: Any, ddl: str, rows: list[dict[str, Any]]) -> Any:
    """Rows (dicts of JSON values) as a DataFrame of schema ``ddl``, sent to the JVM as one
    JSON text (a py4j call) and parsed there: a local relation, any master. Unlike
    ``createDataFrame`` of Python rows (whose first use starts Spark's Python workers: 2-3 s)
    no Python process is involved. Floats are written in Python's shortest round-trip form,
    which Jackson reads back to the same double (NaN and infinities as Jackson's words)."""
    from pyspark.sql import DataFrame

    jvm = spark.sparkContext._jvm
    js = spark._jsparkSession
    text = jvm.java.util.ArrayList() if not rows else jvm.java.util.regex.Pattern.compile(
        "\n").splitAsStream("\n".join(json.dumps(r, separators=(",", ":")) for r in rows)) \
        .toList()
    ds = js.createDataset(text, jvm.org.apache.spark.sql.Encoders.STRING())
    return DataFrame(js.read().schema(ddl).json(ds), spark)


def _values(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with their table's columns only, doubles as floats, nulls left out."""
    cols = table_columns(name)
    out = []
    for x in rows:
        e = {}
        for n, t in cols:
            v = x[n]
            if v is not None:
                e[n] = float(v) if t == "double" else v
        out.append(e)
    return out


def json_frame(spark: Any, name: str, rows: list[dict[str, Any]]) -> Any:
    """The rows of output table ``name`` as a DataFrame (``json_relation``)."""
    return json_relation(spark, ", ".join(f"`{n}` {t}" for n, t in table_columns(name)),
                         _values(name, rows))


ARROW_TYPES = {"string": "string", "bigint": "int64", "double": "float64", "boolean": "bool_"}


def arrow_table(name: str, rows: list[dict[str, Any]]) -> Any:
    """The rows of output table ``name`` as a pyarrow Table of its columns (every column
    nullable, as Spark writes them)."""
    import pyarrow as pa

    cols = table_columns(name)
    arrays = []
    for n, t in cols:
        vals = [x[n] for x in rows]
        if t == "double":
            vals = [None if v is None else float(v) for v in vals]
        arrays.append(pa.array(vals, getattr(pa, ARROW_TYPES[t])()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(
        [pa.field(n, getattr(pa, ARROW_TYPES[t])(), True) for n, t in cols]))


def write_parquet(table: Any, directory: str) -> None:
    """A pyarrow Table as Parquet in a new ``directory``: one zstd file and ``_SUCCESS``,
    the layout of a Spark write of one partition."""
    import pyarrow.parquet as pq

    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    pq.write_table(table, os.path.join(directory, PART), compression="zstd")
    open(os.path.join(directory, "_SUCCESS"), "wb").close()


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


@dataclass
class RowTable:
    """Output table ``name`` as the driver's finish made it: its rows, in its keys' order."""
    spark: Any
    name: str
    rows: list[dict[str, Any]]

    @cached_property
    def frame(self) -> Any:
        """As a DataFrame: a local relation (JSON text; above ``JSON_FRAME_ROWS``, the
        Arrow table)."""
        if len(self.rows) <= JSON_FRAME_ROWS:
            return json_frame(self.spark, self.name, self.rows)
        return self.spark.createDataFrame(arrow_table(self.name, self.rows))

    def write(self, dest: str) -> None:
        """As Parquet at ``dest``: by pyarrow where it is local (``write_parquet``), else by
        Spark."""
        if is_local(dest):
            write_parquet(arrow_table(self.name, self.rows), local_path(dest))
        else:
            self.frame.coalesce(1).write.mode("overwrite").parquet(dest)


def as_frame(table: Any) -> Any:
    """An output table as a DataFrame, whichever finish made it."""
    return table.frame if isinstance(table, RowTable) else table
