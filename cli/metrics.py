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
import sys
import time

import click


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
def metrics(logs: tuple[str, ...], out_dir: str | None, spark_master: str | None,
            since: str | None, until: str | None, bucket_s: float | None, fmt: str,
            convert_to: tuple[str, str] | None, tables_out: str | None, log_tz: str,
            driver_rows: int | None, small_mb: float, confs: tuple[str, ...],
            progress: bool | None) -> None:
    """Turn sync-event logs into sync metrics, backlog advice, charts and report.html."""
    if out_dir is None and convert_to is None:
        raise click.UsageError("give --out DIR (and/or --convert-to parquet DIR)")
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
    size = session.local_input_bytes(list(logs), limit) if owned and limit else None
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


def main() -> None:
    metrics(prog_name="pyrepl metrics")


if __name__ == "__main__":
    sys.exit(main())
