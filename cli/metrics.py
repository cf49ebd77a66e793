"""``pyrepl metrics``: sync-event logs -> sync metrics, backlog advice, charts and a report.

``pyrepl metrics LOGS... --out DIR [--spark-master URL] [--since T] [--until T]
[--convert-to parquet DIR]``

LOGS are NDJSON sync logs (plain or .gz; files, directories, globs, any URI Spark reads) or
Parquet written by ``--convert-to``, and Redis / Valkey log files (recognised by their first
lines; their timestamps are local time: ``--log-timezone``). The job runs on ``local[*]`` unless ``--spark-master``
names a cluster; launched by ``spark-submit`` (see ``pyrepl/analytics/submit.py``) it uses
spark-submit's master and settings. Only parsing here: the work is in ``pyrepl.analytics``,
which imports pyspark and matplotlib (the ``spark`` extra) when the command runs.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import click

SWITCH_S = 0.0005   # --follow's GIL switch interval (see run_follow)


def parse_time(value: str | None) -> float | None:
    """Unix seconds, or an ISO 8601 date/time (UTC unless it has an offset)."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    text = value.strip().replace("Z", "+00:00")
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise click.BadParameter(f"{value!r}: expected unix seconds or an ISO 8601 time") from e
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


def parse_conf(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--conf")
        out[k.strip()] = v.strip()
    return out


@click.command("metrics", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("logs", nargs=-1, required=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Directory for summary.json, report.html, the charts and the Parquet tables.")
@click.option("--spark-master", metavar="URL",
              help="Spark master (default local[*]; ignored under spark-submit).")
@click.option("--since", metavar="T", help="Only events at or after T (unix seconds or ISO 8601).")
@click.option("--until", metavar="T", help="Only events before T.")
@click.option("--bucket", "bucket_s", type=float, metavar="SECONDS",
              help="Time-bucket size for the per-bucket tables (default: from the time span).")
@click.option("--format", "fmt", type=click.Choice(["auto", "json", "parquet"]), default="auto",
              show_default=True, help="Input format (auto: Parquet when the paths end in "
                                      ".parquet or hold Parquet files).")
@click.option("--convert-to", nargs=2, type=(click.Choice(["parquet"]), str), default=None,
              metavar="parquet DIR", help="Convert the logs to Parquet at DIR (once, for big "
                                          "archives); with --out, the metrics then read it.")
@click.option("--tables-out", metavar="URI",
              help="Where the Parquet tables go (default OUT/tables; any path Spark writes).")
@click.option("--log-timezone", "log_tz", metavar="TZ", default="UTC", show_default=True,
              help="Time zone of Redis/Valkey log timestamps: UTC, +02:00 or an IANA name.")
@click.option("--driver-rows", type=click.IntRange(min=0), default=None, metavar="N",
              help="Finish on the driver when the aggregates after the input pass have at most "
                   "N rows (sync events + lag series rows; default 200000; 0: always the Spark "
                   "steps).")
@click.option("--small-input", "small_mb", type=click.FloatRange(min=0), default=8.0,
              show_default=True, metavar="MB",
              help="Local inputs up to this many MB (.gz counted x8, Parquet x20) start Spark "
                   "light: first JIT tier, serial GC, no generated code (0: never).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting, e.g. --conf spark.driver.memory=2g (repeatable).")
@click.option("--progress/--quiet", "progress", default=None,
              help="Progress on stderr (default: only on a terminal, never when CI is set).")
@click.option("--follow", is_flag=True,
              help="Keep running over the growing files under LOGS (local directories or "
                   "files): the outputs are updated every --trigger seconds (Spark Structured "
                   "Streaming; needs --out and --checkpoint).")
@click.option("--trigger", "trigger_s", type=click.FloatRange(min=0.1), default=10.0,
              show_default=True, metavar="SECONDS", help="With --follow: seconds between "
                                                         "micro-batches.")
@click.option("--checkpoint", type=click.Path(file_okay=False), metavar="DIR",
              help="With --follow: the stream's state (offsets and stored aggregates); a "
                   "restart with the same DIR goes on where it stopped, counting each line "
                   "once.")
@click.option("--prometheus-port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="With --follow: serve the headline figures at http://BIND:PORT/metrics "
                   "in Prometheus's text format.")
@click.option("--prometheus-bind", default="127.0.0.1", show_default=True, metavar="HOST",
              help="The address the Prometheus endpoint listens on (0.0.0.0: every "
                   "interface).")
@click.option("--max-bytes-per-trigger", type=click.IntRange(min=0), default=0, metavar="BYTES",
              help="With --follow: at most this many new bytes a micro-batch (0: all).")
@click.option("--compact-every", type=click.IntRange(min=1), default=10, show_default=True,
              metavar="N", help="With --follow: the micro-batches' stored aggregates are "
                                "merged into one every N batches.")
def metrics(logs: tuple[str, ...], out_dir: str | None, spark_master: str | None,
            since: str | None, until: str | None, bucket_s: float | None, fmt: str,
            convert_to: tuple[str, str] | None, tables_out: str | None, log_tz: str,
            driver_rows: int | None, small_mb: float, confs: tuple[str, ...],
            progress: bool | None, follow: bool, trigger_s: float, checkpoint: str | None,
            prometheus_port: int | None, prometheus_bind: str,
            max_bytes_per_trigger: int, compact_every: int) -> None:
    """Turn sync-event logs into sync metrics, backlog advice, charts and report.html."""
    if out_dir is None and convert_to is None:
        raise click.UsageError("give --out DIR (and/or --convert-to parquet DIR)")
    if follow:
        if checkpoint is None or out_dir is None:
            raise click.UsageError("--follow needs --out DIR and --checkpoint DIR")
        if convert_to is not None or tables_out is not None or fmt == "parquet":
            raise click.UsageError("--follow reads NDJSON and Redis/Valkey logs and writes "
                                   "its tables under --out (no --convert-to, --tables-out "
                                   "or --format parquet)")
        missing = [p for p in logs if not os.path.exists(p)]
        if missing:
            raise click.BadParameter(f"{missing[0]}: no such file or directory",
                                     param_hint="LOGS")
    elif checkpoint is not None or prometheus_port is not None:
        raise click.UsageError("--checkpoint and --prometheus-port go with --follow")
    t_since, t_until = parse_time(since), parse_time(until)
    try:
        from pyrepl.analytics.logread import timezone

        timezone(log_tz)
    except (ValueError, KeyError, ImportError) as e:
        raise click.BadParameter(f"{log_tz!r}: expected UTC, +HH:MM or an IANA time zone name",
                                 param_hint="--log-timezone") from e
    conf = parse_conf(confs)
    try:
        from pyrepl.analytics import job, present, read, report, session
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise click.ClickException(f"{e}: install the spark extra (pip install "
                                   f"'pyrepl[spark]') and a Java 17+ runtime") from e
    show = session.show_progress() if progress is None else progress
    t0 = time.monotonic()

    def say(msg: str) -> None:
        if show:
            click.echo(f"[{time.monotonic() - t0:6.1f}s] {msg}", err=True)

    if out_dir is not None:  # matplotlib loads while the JVM starts (the charts need it)
        import threading

        threading.Thread(target=present.pyplot, daemon=True).start()
    owned = session.active_session() is None and not session.under_spark_submit()
    limit = int(small_mb * 1024 * 1024)
    size = session.local_input_bytes(list(logs), limit) if owned and limit and not follow \
        else None
    light = size is not None and size <= limit
    # the class-data-sharing archive of our own JVM (recorded by the first run)
    archive = session.cds_archive() if owned and "spark.driver.extraJavaOptions" not in conf \
        else None
    say("starting Spark" + (f" (light: {size:,} bytes of input)" if light else "")
        + ("; recording the JVM's class archive (once: later runs start faster)"
           if archive is not None and archive.recording else ""))
    spark = session.build_session(spark_master, conf=conf, progress=show, light=light,
                                  archive=archive)
    jvm = session.gateway_process(spark) if archive is not None else None
    from pyspark.errors import PySparkException

    paths = list(logs)
    try:
        if follow:
            cfg = job.JobConfig(since=t_since, until=t_until, bucket_s=bucket_s, log_tz=log_tz)
            if driver_rows is not None:
                cfg.driver_max_rows = driver_rows
            assert out_dir is not None and checkpoint is not None
            run_follow(spark, paths, out_dir, checkpoint, cfg, trigger_s, prometheus_port,
                       prometheus_bind, max_bytes_per_trigger, compact_every, say)
            return
        if convert_to is not None:
            dest = convert_to[1]
            say(f"converting to Parquet at {dest}")
            res = read.convert(spark, paths, dest, fmt, t_since, t_until, log_tz)
            click.echo(f"converted {res['events']:,} events to {dest} "
                       f"({res['malformed_lines']:,} malformed lines skipped)")
            # the metrics (if asked for) read the converted copy: window already applied
            paths, fmt, t_since, t_until = [dest], "parquet", None, None
        if out_dir is not None:
            # our own JVM, both JIT tiers: C2 stops after the pass (a light JVM has no C2)
            cfg = job.JobConfig(since=t_since, until=t_until, bucket_s=bucket_s, fmt=fmt,
                                log_tz=log_tz, c1_after_pass=owned and not light)
            if driver_rows is not None:
                cfg.driver_max_rows = driver_rows
            result = job.run(spark, paths, cfg, progress=say)
            say(f"writing {out_dir}")
            summary = report.write_report(result, out_dir, tables_out)
            click.echo(report.text_report(summary))
        say("done")
    except PySparkException as e:  # a path that does not exist, a cluster that refuses ...
        text = str(e).strip()
        raise click.ClickException(text.splitlines()[0] if text else type(e).__name__) from e
    finally:
        if owned:
            session.stop(spark, end_jvm=True)
            if session.finish_archive(archive, jvm):
                say(f"class archive written: {archive.path}")


def run_follow(spark: Any, paths: list[str], out_dir: str, checkpoint: str, cfg: Any,
               trigger_s: float, prometheus_port: int | None, prometheus_bind: str,
               max_bytes: int, compact_every: int, say: Callable[[str], None]) -> None:
    """``--follow``: the streaming query until SIGTERM / SIGINT (then it stops between two
    steps; what the last trigger did not commit runs again at the next start)."""
    from pyrepl.analytics import follow, prom

    exporter = None
    if prometheus_port is not None:
        try:
            exporter = prom.Exporter(prometheus_bind, prometheus_port)
        except OSError as e:
            raise click.ClickException(f"--prometheus-port {prometheus_port}: {e}") from e
        say(f"Prometheus endpoint at http://{prometheus_bind}:{exporter.port}/metrics")

    def published(t: Any) -> None:
        if exporter is not None:
            exporter.update(prom.exposition(t.summary, t.batch, t.seconds, time.time()))
        click.echo(f"trigger {t.batch}: {t.summary['input']['events']:,} events, "
                   f"{t.summary['psync']['full']} full / {t.summary['psync']['partial']} "
                   f"partial syncs ({t.seconds:.1f} s)")

    fc = follow.FollowConfig(paths, out_dir, checkpoint, trigger_s, cfg,
                             max_bytes_per_trigger=max_bytes, compact_every=compact_every)
    try:
        follower = follow.Follower(spark, fc, say, published)
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    # a micro-batch builds its plan in ~1,000 py4j round trips while the last trigger's
    # charts are drawn in another thread: each trip waits for the GIL, up to the switch
    # interval (5 ms by default: seconds a trigger)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)
    query = follower.start()
    say(f"following {len(paths)} path(s), a trigger every {trigger_s:g} s")
    try:
        while not stop.is_set():
            if query.awaitTermination(0.5):
                break
        exc = query.exception()
        if exc is not None:
            raise click.ClickException(f"the stream stopped: {str(exc).splitlines()[0]}")
    finally:
        if query.isActive:
            query.stop()
        follower.close()
        for s, h in old.items():
            signal.signal(s, h)
        sys.setswitchinterval(switch)
        if exporter is not None:
            exporter.close()
    say("stopped")


def main() -> None:
    metrics(prog_name="pyrepl metrics")


if __name__ == "__main__":
    sys.exit(main())
