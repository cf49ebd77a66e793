"""``pyrepl collect``: INFO samples of Redis, Valkey or pyrepl nodes -> sync events.

``pyrepl collect HOST:PORT... --out DIR [--every SECONDS] [--count N] [--duration S]
[--user U --password P] [--tls --cacert F --cert F --key F]``

Polls each node's INFO and appends pyrepl's sync-event schema to ``DIR/collect.ndjson``
(rotated by size), so ``pyrepl metrics`` reads it beside pyrepl's own sync logs. Only parsing
here: the work is in ``pyrepl.collect`` (sans-io) and ``pyrepl.net.collect`` (the I/O).
"""

from __future__ import annotations

import os
import sys

import click


def _size(value: str) -> int:
    from pyrepl.config import parse_memory

    try:
        return parse_memory(value.strip())
    except ValueError as e:
        raise click.BadParameter(f"{value!r}: expected bytes, or a size like 64mb") from e


@click.command("collect", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("nodes", nargs=-1, required=True, metavar="HOST:PORT...")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for collect.ndjson (and its rotated files .1, .2 ...).")
@click.option("--every", type=float, default=1.0, show_default=True, metavar="SECONDS",
              help="Seconds between two polls of every node.")
@click.option("--count", type=click.IntRange(min=1), metavar="N",
              help="Stop after N poll rounds.")
@click.option("--duration", type=float, metavar="SECONDS", help="Stop after SECONDS.")
@click.option("--user", "username", metavar="U", help="ACL user to authenticate as.")
@click.option("--password", metavar="P", envvar="REDISCLI_AUTH",
              help="Password (default: the REDISCLI_AUTH environment variable).")
@click.option("--tls", is_flag=True, help="Connect with TLS.")
@click.option("--cacert", type=click.Path(dir_okay=False, exists=True), metavar="F",
              help="CA certificate that signed the servers' certificates (TLS).")
@click.option("--cert", type=click.Path(dir_okay=False, exists=True), metavar="F",
              help="Client certificate (TLS, when the servers ask for one).")
@click.option("--key", type=click.Path(dir_okay=False, exists=True), metavar="F",
              help="Private key of --cert.")
@click.option("--timeout", type=float, default=2.0, show_default=True, metavar="SECONDS",
              help="Connect and reply timeout per node.")
@click.option("--max-size", default="64mb", show_default=True, metavar="BYTES",
              help="Rotate collect.ndjson when it would pass this size (0: never).")
@click.option("--max-files", type=click.IntRange(min=0), default=8, show_default=True,
              metavar="N", help="Rotated files kept.")
@click.option("--progress/--quiet", "progress", default=None,
              help="A progress line on stderr every 10 s (default: only on a terminal).")
def collect(nodes: tuple[str, ...], out_dir: str, every: float, count: int | None,
            duration: float | None, username: str | None, password: str | None, tls: bool,
            cacert: str | None, cert: str | None, key: str | None, timeout: float,
            max_size: str, max_files: int, progress: bool | None) -> None:
    """Poll the INFO of Redis, Valkey or pyrepl nodes and write sync events (NDJSON in
    pyrepl's schema) for `pyrepl metrics`."""
    from pyrepl.net.collect import CollectConfig, run, split_addr

    for n in nodes:
        try:
            split_addr(n)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="HOST:PORT") from e
    if not every > 0:
        raise click.BadParameter("must be > 0", param_hint="--every")
    if duration is not None and not duration > 0:
        raise click.BadParameter("must be > 0", param_hint="--duration")
    if not timeout > 0:
        raise click.BadParameter("must be > 0", param_hint="--timeout")
    if (cacert or cert or key) and not tls:
        raise click.UsageError("--cacert, --cert and --key need --tls")
    if bool(cert) != bool(key):
        raise click.UsageError("--cert and --key go together")
    if progress is None:
        progress = sys.stderr.isatty() and not os.environ.get("CI")
    cfg = CollectConfig(nodes=tuple(nodes), out_dir=out_dir, every=every, count=count,
                        duration=duration, username=username, password=password, tls=tls,
                        cacert=cacert, cert=cert, key=key, timeout=timeout,
                        max_size=_size(max_size), max_files=max_files, progress=progress)
    sys.exit(run(cfg))


def main() -> None:
    collect(prog_name="pyrepl collect")


if __name__ == "__main__":
    sys.exit(main())
