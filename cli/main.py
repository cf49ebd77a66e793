"""The ``pyrepl`` command line: parse flags, build a Config, run the server.

``pyrepl master --config FILE [--port N] [--bind ADDR] [--dir PATH] [--<directive> VALUE...]``
``pyrepl replica --master HOST:PORT [--config FILE] [same flags]``

Any redis.conf directive can be given as ``--<directive> value...`` (as redis-server accepts);
flags override the file.
"""

from __future__ import annotations

import sys

import click

from pyrepl import REDIS_VERSION, __version__, native

# No "-h" here: click would find it inside an ACL rule given on the command line
# (``--user alice on -@hash`` reads as -@ -h -a -s -h) and print the help instead of starting.
CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True,
           "help_option_names": ["--help"]}


def parse_directive_flags(args: list[str]) -> list[tuple[str, list[str]]]:
    """``["--save", "", "--replicaof", "h", "p"]`` -> ``[("save", [""]), ("replicaof", ["h", "p"])]``.

    Like redis-server: a value that itself starts with ``--`` is not possible, and a directive
    takes every following word up to the next ``--name``.
    """
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--") or len(a) < 3:
            raise click.UsageError(f"unexpected argument {a!r} (directives are --name value)")
        name = a[2:]
        vals: list[str] = []
        i += 1
        while i < len(args) and not (args[i].startswith("--") and len(args[i]) > 2):
            vals.append(args[i])
            i += 1
        # "--replicaof '127.0.0.1 6380'" -> one quoted word holding both arguments
        if len(vals) == 1 and " " in vals[0] and name.lower() in ("replicaof", "slaveof", "save",
                                                                   "client-output-buffer-limit"):
            vals = vals[0].split()
            if not vals:
                vals = [""]
        out.append((name, vals))
    return out


def _build_config(config_file: str | None, overrides: list[tuple[str, list[str]]]):
    from pyrepl.config import Config, ConfigError
    from pyrepl.core.acl_file import check_config_users

    try:
        cfg = Config.load(config_file, overrides)
        check_config_users(cfg)     # (the `user` lines' rules need the command table)
    except ConfigError as e:
        click.echo(f"*** FATAL CONFIG FILE ERROR ***\n{e}", err=True)
        sys.exit(1)
    except OSError as e:
        click.echo(f"Fatal error, can't open config file '{config_file}': {e.strerror}", err=True)
        sys.exit(1)
    if cfg.logfile:
        # As Redis at load time: a log file that cannot be opened stops the start, clearly.
        try:
            open(cfg.logfile, "a").close()  # noqa: SIM115
        except OSError as e:
            click.echo(f"*** FATAL CONFIG FILE ERROR ***\nCan't open the log file: {e.strerror}",
                       err=True)
            sys.exit(1)
    return cfg


def _common_overrides(port: int | None, bind: str | None, dir_: str | None,
                      extra: list[str]) -> list[tuple[str, list[str]]]:
    ov: list[tuple[str, list[str]]] = []
    if port is not None:
        ov.append(("port", [str(port)]))
    if bind is not None:
        ov.append(("bind", bind.split()))
    if dir_ is not None:
        ov.append(("dir", [dir_]))
    ov.extend(parse_directive_flags(extra))
    return ov


def _account_memory() -> None:
    """Memory accounting (pyrepl/memacct.py) in place before the server's allocations: the
    arenas pymalloc makes from here on are the ones its pool walk knows."""
    from pyrepl import memacct

    memacct.install()


def _serve(config) -> None:
    from pyrepl.net.server import run

    sys.exit(run(config))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-v",
                      message=f"pyrepl %(version)s (Redis {REDIS_VERSION} compatible; "
                              f"{native.mode()})")
def main() -> None:
    """pyrepl: a Redis-compatible master/replica replication daemon.

    Run a master with `pyrepl master --config conf/master.conf`, a replica with
    `pyrepl replica --master HOST:PORT`. Talk to either with redis-cli or any Redis client.
    """


@main.command(context_settings=CONTEXT)
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="redis.conf-style configuration file.")
@click.option("--port", type=int, help="TCP port to listen on (overrides the file).")
@click.option("--bind", help="Addresses to listen on, space separated (overrides the file).")
@click.option("--dir", "dir_", help="Working directory for the RDB file (overrides the file).")
@click.pass_context
def master(ctx: click.Context, config_file: str | None, port: int | None, bind: str | None,
           dir_: str | None) -> None:
    """Run a master in the foreground (Ctrl-C / SIGTERM: clean shutdown, saving if configured).

    Extra flags `--<directive> VALUE...` set any redis.conf directive, e.g. `--save ""`
    or `--repl-backlog-size 64mb`.
    """
    _account_memory()
    overrides = _common_overrides(port, bind, dir_, ctx.args)
    cfg = _build_config(config_file, overrides)
    _serve(cfg)


@main.command(context_settings=CONTEXT)
@click.option("--master", "master_addr", required=True, metavar="HOST:PORT",
              help="The master to follow.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="redis.conf-style configuration file.")
@click.option("--port", type=int, help="TCP port to listen on (overrides the file).")
@click.option("--bind", help="Addresses to listen on, space separated (overrides the file).")
@click.option("--dir", "dir_", help="Working directory for the RDB file (overrides the file).")
@click.pass_context
def replica(ctx: click.Context, master_addr: str, config_file: str | None, port: int | None,
            bind: str | None, dir_: str | None) -> None:
    """Run a replica of HOST:PORT in the foreground.

    Same flags as `master`; `--master` sets the `replicaof` directive.
    """
    _account_memory()
    host, sep, mport = master_addr.rpartition(":")
    if not sep or not host or not mport.isdigit():
        raise click.BadParameter("expected HOST:PORT", param_hint="--master")
    overrides = _common_overrides(port, bind, dir_, ctx.args)
    overrides.append(("replicaof", [host, mport]))
    cfg = _build_config(config_file, overrides)
    _serve(cfg)


from pyrepl.cli.collect import collect  # noqa: E402
from pyrepl.cli.metrics import metrics  # noqa: E402

main.add_command(metrics)
main.add_command(collect)

if __name__ == "__main__":
    main()
