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


def _build_config(config_file: str | None, args: list[str],
                  overrides: list[tuple[str, list[str]]] | None = None):
    """The file, then redis-server's arguments as the config lines it appends (pyrepl.config
    .option_lines), then ``overrides``; a bad one ends the start with Redis's report."""
    from pyrepl.config import Config, ConfigError, option_lines
    from pyrepl.core.acl_file import check_config_users

    try:
        cfg = Config.load(config_file, overrides or (), lines=option_lines(args))
        _rename_commands(cfg)
        check_config_users(cfg)     # (the `user` lines' rules need the command table)
    except ConfigError as e:
        if e.line is not None and e.reason:     # loadServerConfigFromString's report
            where = f"\n(in {e.path}:{e.lineno})" if e.path and e.path != "<command line>" \
                else ""
            click.echo(f"\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\n"
                       f"Reading the configuration file, at line {e.lineno or 0}\n"
                       f">>> '{e.line}'\n{e.reason}{where}", err=True)
        else:
            click.echo(f"*** FATAL CONFIG FILE ERROR ***\n{e}", err=True)
        sys.exit(1)
    except OSError as e:
        click.echo(f"Fatal error, can't open config file '{config_file}': {e.strerror}", err=True)
        sys.exit(1)
    if cfg.logfile:
        # As Redis at load time: a log file that cannot be opened stops the start, clearly.
        from pyrepl.net.log import log_path
        try:
            open(log_path(cfg.logfile, cfg.dir), "a").close()  # noqa: SIM115
        except OSError as e:
            click.echo(f"*** FATAL CONFIG FILE ERROR ***\nCan't open the log file: {e.strerror}",
                       err=True)
            sys.exit(1)
    return cfg


def _rename_commands(cfg) -> None:
    """The ``rename-command`` lines applied to this process's command table (before the users'
    rules are read, as Redis reads the file in order; raises ConfigError at the failing line)."""
    from pyrepl.commands.table import apply_renames
    from pyrepl.config import ConfigError

    failed = apply_renames((r.old, r.new) for r in cfg.renames)
    if failed is not None:
        i, reason = failed
        r = cfg.renames[i]
        raise ConfigError(f"{r.where}: {reason}", reason=reason, path=r.path or "<command line>",
                          lineno=r.lineno, line=r.line)


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
@click.pass_context
def master(ctx: click.Context, config_file: str | None) -> None:
    """Run a master in the foreground (Ctrl-C / SIGTERM: clean shutdown, saving if configured).

    Then `--<directive> VALUE...` sets any redis.conf directive, with redis-server's rules:
    `--port 6380`, `--bind 127.0.0.1 ::1`, `--dir ./var`, `--save ""`,
    `--repl-backlog-size 64mb`, or a whole line as one argument (`"--port 6380"`).
    """
    _account_memory()
    cfg = _build_config(config_file, ctx.args)
    _serve(cfg)


@main.command(context_settings=CONTEXT)
@click.option("--master", "master_addr", required=True, metavar="HOST:PORT",
              help="The master to follow.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="redis.conf-style configuration file.")
@click.pass_context
def replica(ctx: click.Context, master_addr: str, config_file: str | None) -> None:
    """Run a replica of HOST:PORT in the foreground.

    Same directives as `master`; `--master` sets the `replicaof` directive.
    """
    _account_memory()
    host, sep, mport = master_addr.rpartition(":")
    if not sep or not host or not mport.isdigit():
        raise click.BadParameter("expected HOST:PORT", param_hint="--master")
    cfg = _build_config(config_file, ctx.args, [("replicaof", [host, mport])])
    _serve(cfg)


from pyrepl.cli.collect import collect  # noqa: E402
from pyrepl.cli.metrics import metrics  # noqa: E402

main.add_command(metrics)
main.add_command(collect)

if __name__ == "__main__":
    main()
