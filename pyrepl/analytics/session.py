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
same; only the time differs. Bigger inputs keep both JIT tiers, which the input pass needs,
with C2 taking only the hotter methods, and get the parallel collector (less CPU than G1 for
the pass's short-lived garbage); once their pass is over, C2 takes no more methods
(``c1_from_now``: the rest of the run is too short for its compiles to pay back). The end
stops Spark without PySpark's idle wait for its accumulator server (``stop``).

The command's own JVM (``cds=True``: not under spark-submit, where the JVM is not ours) maps a
class-data-sharing archive of the classes a run loads (Spark's, Hadoop's, Parquet's ... some
15k of them): the JVM then starts and runs its first queries without parsing and verifying
them again, 3-6 s less per run. The first run without a usable archive records one
(``-XX:ArchiveClassesAtExit``: the run takes ~10 s longer, then waits for its JVM to write the
archive) under the virtual environment the command runs from (``.venv/var/pyrepl-spark-cds/``;
``PYREPL_SPARK_CDS`` names another directory, ``0`` turns it off; outside a virtual
environment there is none). The archive's name holds a hash of the Java runtime and Spark's
jars, so an upgrade of either records a new one (and removes the old); an archive the JVM
cannot use is ignored by it silently. ``python -m pyrepl.analytics.session`` records it ahead
(``make spark-deps`` does).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
# A compiler directive: no more C2 compiles (see ``c1_from_now``)
JIT_AFTER_PASS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jit-after-pass.json")
SMALL_INPUT_BYTES = 8 * 1024 * 1024  # up to this: the light start (--small-input)
# A compressed file counts as this many times its size: about its NDJSON bytes (the light start
# is for tens of thousands of lines at most: it runs a big input pass several times slower)
GZIP_RATIO = 8
PARQUET_RATIO = 20
# Both: no collection for class metadata. At its default (21 MB) the metaspace's first
# high-water mark stops the JVM for a full collection a few seconds in, as the queries' classes
# load: 0.27 s of a light run's ~7 s (serial collector), 0.15 s at the start of a big input's
# pass (parallel); a run uses ~35 MB of it (plus the class-data-sharing archive's, not counted)
METASPACE = "-XX:MetaspaceSize=96m"
LIGHT_JVM = f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {METASPACE}"
# Any other input: the parallel (throughput) collector. The pass over the input allocates a
# row's strings and parse state for every line; G1's concurrent work for that heap cost
# ~15-20% more CPU (5M Parquet rows: 13-14.6 against 11.0 CPU-s cold, 6.5 against 5.4 warm).
# And fewer methods for the optimising JIT (C2): a run's JVM compiled as much as it ran
# (20M Parquet rows: ~14 CPU-s in the compiler threads, ~14 in the tasks), much of it Spark's
# planning and each query's generated code, used for a short while; 4x its call counts before
# C2 takes a method: 20M Parquet 38.3 / 39.7 / 38.4 -> 35.9 / 36.1 / 36.7 CPU-s, NDJSON
# 76.8 / 72.6 -> 71.9 / 71.4 (the process tree, alternating runs; C1 only, or C2 only, cost
# 10-15% more); 10x (and 10x the loop counts): Parquet 36.6 / 36.6 / 36.0 -> 35.0 / 35.0 /
# 35.6, NDJSON 73.2 / 74.5 -> 72.1 / 72.1.
PASS_JVM = ("-XX:+UseParallelGC -XX:Tier4InvocationThreshold=50000 "
            f"-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000 {METASPACE}")
LIGHT_CONF = {"spark.sql.codegen.wholeStage": "false",
              "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


CDS_ENV = "PYREPL_SPARK_CDS"
CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # an unusable archive: no warning on stdout


@dataclass
class Archive:
    """The class-data-sharing archive of this installation: ``path`` when it exists (used),
    else ``recording`` (the temporary file this run's JVM writes at exit)."""
    path: str
    recording: str | None = None

    def java_option(self) -> str:
        if self.recording is not None:
            return f"-XX:ArchiveClassesAtExit={self.recording} {CDS_QUIET}"
        return f"-XX:SharedArchiveFile={self.path} {CDS_QUIET}"


def cds_dir() -> str | None:
    """Where the archive lives: ``$PYREPL_SPARK_CDS``, else under the virtual environment
    (None outside one, or with ``PYREPL_SPARK_CDS=0``)."""
    env = os.environ.get(CDS_ENV)
    if env == "0":
        return None
    if env:
        return env
    if sys.prefix == sys.base_prefix:
        return None
    return os.path.join(sys.prefix, "var", "pyrepl-spark-cds")


def _java() -> str | None:
    import shutil

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def cds_key() -> str | None:
    """A hash of what the archive depends on: the Java runtime (its binary and class library)
    and the jars of Spark's installation (names, sizes, times); None when one is missing."""
    import hashlib

    from pyspark.find_spark_home import _find_spark_home

    java = _java()
    jars = os.path.join(_find_spark_home(), "jars")
    if java is None or not os.path.isdir(jars):
        return None
    h = hashlib.sha256()
    home = os.path.dirname(os.path.dirname(java))
    for f in (java, os.path.join(home, "lib", "modules"),
              *sorted(os.path.join(jars, n) for n in os.listdir(jars))):
        try:
            st = os.stat(f)
        except OSError:
            continue
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def cds_archive() -> Archive | None:
    """The archive to use, or the one this run records (None: none, e.g. no place for it)."""
    d = cds_dir()
    if d is None:
        return None
    try:
        key = cds_key()
    except (ImportError, OSError):
        return None
    if key is None:
        return None
    path = os.path.join(d, f"spark-{key}.jsa")
    if os.path.isfile(path):
        return Archive(path)
    try:
        os.makedirs(d, exist_ok=True)
        if not os.access(d, os.W_OK):
            return None
    except OSError:
        return None
    return Archive(path, f"{path}.{os.getpid()}.tmp")


def finish_archive(archive: Archive | None, proc: Any, timeout: float = 300) -> bool:
    """After ``spark.stop()`` of a recording run: end the JVM (its stdin closes), wait while it
    writes the archive, put the archive in place and remove older ones; True when it did."""
    if archive is None or archive.recording is None or proc is None:
        return False
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout)
    except Exception:  # noqa: BLE001 - a JVM that does not end: no archive this time
        return False
    rec = archive.recording
    if not os.path.isfile(rec) or os.path.getsize(rec) == 0:
        return False
    os.replace(rec, archive.path)
    d, keep = os.path.split(archive.path)
    for name in os.listdir(d):  # archives of other runtimes/jars, recordings that died
        f = os.path.join(d, name)
        if name != keep and name.startswith("spark-") and (name.endswith(".jsa") or (
                name.endswith(".tmp") and _older(f, 3600))):
            with contextlib.suppress(OSError):
                os.remove(f)
    return True


def _older(path: str, seconds: float) -> bool:
    import time

    try:
        return time.time() - os.path.getmtime(path) > seconds
    except OSError:
        return False


def gateway_process(spark: Any) -> Any:
    """The JVM process this Python process launched (None under spark-submit)."""
    gw = getattr(spark.sparkContext, "_gateway", None)
    return getattr(gw, "proc", None)


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
        found: Iterable[str] = [p] if os.path.isfile(p) else []
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
                  light: bool = False, archive: Archive | None = None) -> Any:
    """A SparkSession: ``master`` (default ``local[*]``) unless launched by spark-submit;
    ``light``: the small-input start; ``archive``: the driver JVM's class-data-sharing archive
    (see the module docstring)."""
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
        # pyspark 4 records each Column call's Python call site in the JVM for error
        # messages: 6 py4j round trips a call, and the pass's plan is ~300 calls (a stream's
        # micro-batch builds it again each trigger: 2,400 round trips, 1 s alone, 15 s
        # and more while another driver thread holds the GIL; without it 1,000)
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if light:
        defaults.update(LIGHT_CONF)
    if not submitted:
        java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J2}"
        driver_opts = java_opts
        if light and local:
            driver_opts += " " + LIGHT_JVM
        elif local:
            driver_opts += " " + PASS_JVM
        if archive is not None:
            driver_opts += " " + archive.java_option()
        defaults["spark.driver.extraJavaOptions"] = driver_opts
        # 768m of heap keeps the whole process tree under 1.5 GB of RSS; the job caches only
        # small aggregates (more for very large fleets: --conf spark.driver.memory=2g)
        defaults.setdefault("spark.driver.memory", "768m")
        if local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # glibc's per-thread malloc arenas can add hundreds of MB to a JVM's RSS
            os.environ.setdefault("MALLOC_ARENA_MAX", "2")
            # Python workers (the Redis logs' parsing, --follow's streaming source) run the
            # driver's interpreter, which has pyspark's dependencies (pyarrow), unless the
            # environment names another (the SparkContext reads it: ``sc.pythonExec``)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            defaults["spark.driver.host"] = "127.0.0.1"
            defaults["spark.driver.bindAddress"] = "127.0.0.1"
            # list local directories in the driver, not with a Spark job per 32+ of them
            defaults["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "4096"
        else:
            defaults["spark.executor.extraJavaOptions"] = f"{java_opts} {PASS_JVM}"
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


def stop(spark: Any, end_jvm: bool = False) -> None:
    """``spark.stop()`` without its idle wait; with ``end_jvm`` the JVM is told to exit too
    (its stdin closed), so that its own shutdown (~0.3 s) overlaps Python's. PySpark's
    accumulator server is a ``socketserver`` that looks for a stop request every 0.5 s, and
    ``stop`` waits for it: 0-0.5 s of every run's end spent idle. Its ``shutdown`` (called by
    ``stop`` once the JVM's context has stopped, as before) here also raises the request itself
    and wakes the server with a connection, which it sees and leaves unanswered. Without the
    private flag (another Python) the server stops as before."""
    quick_shutdown(getattr(spark.sparkContext, "_accumulatorServer", None))
    proc = gateway_process(spark)
    spark.stop()
    if end_jvm and proc is not None and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def quick_shutdown(server: Any) -> None:
    """Make a ``socketserver`` server's ``shutdown`` wake it instead of waiting for its next
    poll (see ``stop``); nothing for None or a server without the flag."""
    if server is None or not hasattr(server, "_BaseServer__shutdown_request"):
        return
    shutdown = server.shutdown

    def quick() -> None:
        server._BaseServer__shutdown_request = True
        _wake(server.server_address)
        shutdown()

    server.shutdown = quick


def _wake(address: Any) -> None:
    import socket

    with contextlib.suppress(OSError):
        if isinstance(address, str):  # a Unix socket's path
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(address)
        else:
            socket.create_connection(address[:2], timeout=1).close()


def c1_from_now(spark: Any) -> bool:
    """Tell the JVM's optimising compiler (C2) to take no more methods: a compiler directive
    (``JIT_AFTER_PASS``, as ``jcmd Compiler.directives_add`` adds one). For the end of a big
    local run, after the input pass: what runs then (the small queries after it, pickling the
    rows collected, code generation, the tables' Parquet writers) runs for a second or two, too
    short for C2's compiles to pay back, yet it got hot enough for them: a third of C2's CPU of
    a 20M Parquet run (2.4 of 7 CPU-s) came after the pass, competing with the end for the two
    cores. Code C2 already compiled stays; methods that get hot from now on stay at C1 (which
    takes them without profiling once C2 cannot). Results are the same. False when the JVM
    refused (then nothing changed)."""
    try:
        out = jvm_command(spark, "compilerDirectivesAdd", JIT_AFTER_PASS)
    except Exception:  # noqa: BLE001 - another JVM, no JMX: the run goes on as it was
        return False
    return "1 compiler directives added" in out


def jvm_command(spark: Any, name: str, *args: str) -> str:
    """A diagnostic command of the driver's JVM (as ``jcmd``; ``name`` as the
    DiagnosticCommand MBean spells it: ``compilerDirectivesAdd``...) and its output."""
    sc = spark.sparkContext
    jvm, gw = sc._jvm, sc._gateway
    cls = jvm.java.lang.Class.forName
    # MBeanServer.invoke through reflection: py4j does not find it on the JMX server's class,
    # which its module does not open
    params = gw.new_array(jvm.java.lang.Class, 4)
    for i, n in enumerate(("javax.management.ObjectName", "java.lang.String",
                           "[Ljava.lang.Object;", "[Ljava.lang.String;")):
        params[i] = cls(n)
    invoke = cls("javax.management.MBeanServer").getMethod("invoke", params)
    strings = gw.new_array(jvm.java.lang.String, len(args))
    for i, a in enumerate(args):
        strings[i] = a
    argv = gw.new_array(jvm.java.lang.Object, 1)
    argv[0] = strings
    sig = gw.new_array(jvm.java.lang.String, 1)
    sig[0] = "[Ljava.lang.String;"
    call = gw.new_array(jvm.java.lang.Object, 4)
    call[0] = jvm.javax.management.ObjectName("com.sun.management:type=DiagnosticCommand")
    call[1] = name
    call[2] = argv
    call[3] = sig
    server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
    return str(invoke.invoke(server, call))


def record_archive() -> int:
    """Record the class-data-sharing archive ahead (``python -m pyrepl.analytics.session``):
    ``pyrepl metrics`` over a few synthetic events, from NDJSON and from Parquet, in a
    directory beside the archive (removed after)."""
    import shutil
    import tempfile

    archive = cds_archive()
    if archive is None:
        print("no class-data-sharing archive here (not in a virtual environment, or "
              f"{CDS_ENV}=0)", file=sys.stderr)
        return 0
    if archive.recording is None:
        print(f"class-data-sharing archive: {archive.path}", file=sys.stderr)
        return 0
    import json

    from pyrepl.analytics import job, read, report

    work = tempfile.mkdtemp(prefix="train-", dir=os.path.dirname(archive.path))
    try:
        os.makedirs(os.path.join(work, "logs"))
        with open(os.path.join(work, "logs", "sync.ndjson"), "w", encoding="utf-8") as f:
            for e in _training_events():
                f.write(json.dumps(e, separators=(",", ":")) + "\n")
        # generated code on (as for big inputs), NDJSON and Parquet read: their classes too
        spark = build_session("local[2]", progress=False, archive=archive)
        proc = gateway_process(spark)
        try:
            logs, pq = os.path.join(work, "logs"), os.path.join(work, "pq")
            report.write_report(job.run(spark, [logs]), os.path.join(work, "out"))
            read.convert(spark, [logs], pq)
            report.write_report(job.run(spark, [pq]), os.path.join(work, "out"))
        finally:
            stop(spark)
        ok = finish_archive(archive, proc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"class-data-sharing archive: {archive.path}" if ok else
          "class-data-sharing archive: not written", file=sys.stderr)
    return 0 if ok else 1


def _training_events() -> list[dict[str, Any]]:
    """A replica's partial resync after a link loss, and lag samples: the events of a demo."""
    m, r, rid, rep = "10.0.0.1:6379", "10.0.0.2:6379", "7d5c39f1", "57ba26fb" * 5
    t, off = 1735689600.0, 1_000_000
    link = {"peer": r, "sync_id": f"{rid}-1", "replid": rep}
    out: list[dict[str, Any]] = [
        {"ts": t + 60 * i, "event": "replica_lag", "node": m, "run_id": rid, "peer": r,
         "offset": off + 1000 * i, "lag_bytes": 100 * i, "lag_ms": 10.0 * i} for i in range(20)]
    out += [
        {"ts": t + 100, "event": "link_down", "node": r, "role": "replica", "peer": m,
         "reason": "timeout", "offset": off},
        {"ts": t + 101, "event": "psync_sent", "node": r, "role": "replica", "peer": m,
         "sync_id": f"{rid}-1", "req_replid": rep, "req_offset": off + 1},
        {"ts": t + 101.002, "event": "psync_decision", "node": m, "role": "master", **link,
         "req_replid": rep, "req_offset": off + 1, "result": "continue", "reason": "continue",
         "master_repl_offset": off + 5000, "backlog_size": 1 << 20, "backlog_histlen": 1 << 20},
        {"ts": t + 101.002, "event": "partial_sent", "node": m, "role": "master", **link,
         "offset": off + 1, "bytes": 4999, "master_repl_offset": off + 5000},
        {"ts": t + 101.003, "event": "replica_online", "node": m, "role": "master", **link,
         "offset": off + 5000},
        {"ts": t + 101.004, "event": "psync_reply", "node": r, "role": "replica", "peer": m,
         "sync_id": f"{rid}-1", "result": "continue", "replid": rep, "offset": off},
        {"ts": t + 101.004, "event": "link_up", "node": r, "role": "replica", "peer": m,
         "sync_id": f"{rid}-1", "result": "continue", "duration_ms": 1004.0},
        {"ts": t + 101.01, "event": "caught_up", "node": r, "role": "replica", "peer": m,
         "sync_id": f"{rid}-1", "offset": off + 5000, "bytes": 4999},
        {"not json": "missing fields"}]
    return out


if __name__ == "__main__":
    sys.exit(record_archive())
