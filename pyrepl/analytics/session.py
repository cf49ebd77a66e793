"""Building the SparkSession for ``pyrepl metrics`` (local by default, any cluster unchanged).

Theory of operation: run from a plain ``python``/``pyrepl`` process, PySpark launches its own
JVM; we then choose the master (``local[*]`` unless ``--spark-master`` says otherwise) and the
settings that make a local run quick and quiet: loopback addresses, no web UI, few shuffle
partitions (the aggregated tables are small), and our ``log4j2.properties`` (warnings of Spark
itself stay, its INFO chatter goes). Run through ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` is
set: the JVM already exists), the master and every ``--conf`` come from spark-submit and we only
fill in settings the user did not give. The console progress bar is on only when stderr is a
terminal and ``CI`` is not set.

A small input (local files of at most ``SMALL_INPUT_BYTES``: an incident's log, a demo) starts
Spark light: the JIT's first tier only and the serial GC (a quicker JVM start, and no C2
compiler threads competing for the cores), and no generated code (for a few thousand rows
Spark's interpreted expressions beat compiling a class per query stage). The results are the
same; only the time differs. Bigger inputs keep the defaults, which the input pass needs.
"""

from __future__ import annotations

import os
import sys
from typing import Any

LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
SMALL_INPUT_BYTES = 8 * 1024 * 1024  # up to this: the light start (--small-input)
# A compressed file counts as this many times its size: about its NDJSON bytes (the light start
# is for tens of thousands of lines at most: it runs a big input pass several times slower)
GZIP_RATIO = 8
PARQUET_RATIO = 20
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LIGHT_CONF = {"spark.sql.codegen.wholeStage": "false",
              "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def local_input_bytes(paths: list[str], limit: int | None = None) -> int | None:
    """The bytes of the input files when they are all local (.gz and .parquet files counted
    GZIP_RATIO and PARQUET_RATIO times),
    None when a path is a URI of another file system or a glob; stops counting past
    ``limit``."""
    import glob

    total = 0
    for p in paths:
        if "://" in p and not p.startswith("file://"):
            return None
        p = p.removeprefix("file://")
        if glob.has_magic(p):
            return None
        found = [p] if os.path.isfile(p) else []
        if os.path.isdir(p):
            found = (os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs)
        elif not found:
            return None
        for f in found:
            try:
                n = os.path.getsize(f)
            except OSError:
                continue
            total += n * (GZIP_RATIO if f.endswith(".gz") else PARQUET_RATIO
                          if f.endswith(".parquet") else 1)
            if limit is not None and total > limit:
                return total
    return total


def under_spark_submit() -> bool:
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def show_progress() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


def active_session() -> Any:
    """The SparkSession already running in this process, if any (the tests' fixture)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def build_session(master: str | None = None, app_name: str = "pyrepl-metrics",
                  conf: dict[str, str] | None = None, progress: bool | None = None,
                  light: bool = False) -> Any:
    """A SparkSession: ``master`` (default ``local[*]``) unless launched by spark-submit;
    ``light``: the small-input start (see the module docstring)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    submitted = under_spark_submit()
    if not submitted:
        master = master or "local[*]"
    local = (master or "").startswith("local")
    if progress is None:
        progress = show_progress()
    defaults: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if progress else "false",
        "spark.sql.session.timeZone": "UTC",
        # the tables after the first pass are small: adaptive execution would only split every
        # query into more jobs
        "spark.sql.adaptive.enabled": "false",
        # the tables we shuffle are per link / per sync: small
        "spark.sql.shuffle.partitions": str(max(2, 2 * (os.cpu_count() or 2))),
        "spark.sql.files.maxPartitionBytes": str(64 * 1024 * 1024),
        "spark.sql.parquet.compression.codec": "zstd",
    }
    if light:
        defaults.update(LIGHT_CONF)
    if not submitted:
        java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J2}"
        if light and local:
            java_opts += " " + LIGHT_JVM
        defaults["spark.driver.extraJavaOptions"] = java_opts
        # 768m of heap keeps the whole process tree under 1.5 GB of RSS; the job caches only
        # small aggregates (more for very large fleets: --conf spark.driver.memory=2g)
        defaults.setdefault("spark.driver.memory", "768m")
        if local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # glibc's per-thread malloc arenas can add hundreds of MB to a JVM's RSS
            os.environ.setdefault("MALLOC_ARENA_MAX", "2")
            defaults["spark.driver.host"] = "127.0.0.1"
            defaults["spark.driver.bindAddress"] = "127.0.0.1"
            # list local directories in the driver, not with a Spark job per 32+ of them
            defaults["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "4096"
        else:
            defaults["spark.executor.extraJavaOptions"] = java_opts
    existing = SparkConf()  # under spark-submit: its --conf and spark-defaults.conf
    builder = SparkSession.builder.appName(app_name)
    if master and not submitted:
        builder = builder.master(master)
    for k, v in defaults.items():
        if k not in conf and not existing.contains(k):
            builder = builder.config(k, v)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
