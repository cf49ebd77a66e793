"""Loading the AOF into a server: the AOF client, the dataset swap, DEBUG LOADAOF.

Theory of operation: :func:`load_into` runs :mod:`pyrepl.aof.loader` with the server as its
ports. The commands run as Redis's AOF client does (createAOFClient): a client of its own that
no one sees, whose replies are dropped, running each handler directly (no ACL, no READONLY, no
MISCONF, no stats: cmd->proc), a transaction's commands queued until EXEC. While it runs the
server is *loading*: nothing expires (keyIsExpired returns 0 while loading; a PEXPIREAT in the
past sets the time instead of deleting), as a replica applying its master's stream. An RDB base
replaces the dataset as a whole (the RDB loader of a start, functions included).
"""

from __future__ import annotations

from typing import Any

from pyrepl.aof.loader import LoadPorts, LoadStatus, load_files, upgrade_if_needed
from pyrepl.resp.types import ReplyError

CLIENT_ID_AOF = 2**64 - 1
_TRANSACTION = (b"multi", b"exec", b"discard")


def load_into(core: Any, clock_s: Any = lambda: 0.0) -> LoadStatus:
    """loadDataFromDisk's AOF branch. The manifest is ``core.aof.manifest`` (loaded before);
    ManifestError / OSError from an upgrade propagate (the start fails)."""
    aof = core.aof
    cfg = core.config
    upgrade_if_needed(aof.manifest, cfg.dir, aof.dirpath, aof.filename, core.log)
    c = core.internal_client("aof", CLIENT_ID_AOF)

    plain: dict[bytes, Any] = {}   # exact spelling -> a plain command (run_batch takes it)

    def run(argv: list[bytes]) -> bool:
        cmd = core.lookup_command(argv)
        if cmd is None:
            return False
        name = argv[0].lower()
        # (a subcommand is not what its first word names: FUNCTION LOAD is not FUNCTION DELETE)
        if not cmd.subcommands and "|" not in cmd.name and name not in _TRANSACTION and \
                cmd.handler is not None:
            plain[argv[0]] = cmd
        if c.in_multi and name not in _TRANSACTION:
            c.multi_queue.append((cmd, argv))
            return True
        try:
            cmd.handler(c, argv)
        except ReplyError:
            pass
        c.out.clear()
        if core._pending:
            core._pending = []
        return True

    def run_batch(reqs: list[list[bytes]]) -> int:
        """The plain commands at the batch's head at C speed (the replica's batch apply:
        core.run_plain, a whole run of one command in one call)."""
        if c.in_multi:
            return 0
        cmds = []
        get = plain.get
        for argv in reqs:
            cmd = get(argv[0])
            if cmd is None:
                break
            cmds.append(cmd)
        k = len(cmds)
        if not k:
            return 0
        replies: list[object] = []
        core.run_plain(c, cmds, reqs if k == len(reqs) else reqs[:k], replies,
                       cmds.count(cmds[0]) == k)
        c.out.clear()
        if core._pending:
            core._pending = []
        return k

    def load_rdb(path: str) -> int:
        """An RDB base (or a Redis 6 preamble): expired keys kept, as Redis loads one with
        RDBFLAGS_AOF_PREAMBLE; where it ended in the file."""
        end: int = core.persistence.install_rdb(path, None).bytes_read
        return end

    ports = LoadPorts(run=run, in_multi=lambda: c.in_multi, discard=c.discard_transaction,
                      load_rdb=load_rdb, log=core.log, clock_s=clock_s, run_batch=run_batch)
    saved = (core.loading, core.expiry_deletes, core.applying_master_stream)
    core.loading, core.expiry_deletes, core.applying_master_stream = True, False, True
    try:
        status, total, base = load_files(ports, aof.manifest, aof.dirpath, aof.filename,
                                         cfg.aof_load_truncated,
                                         cfg.aof_load_corrupt_tail_max_size)
    finally:
        core.loading, core.expiry_deletes, core.applying_master_stream = saved
        core.refresh_gate()     # (a script's gate may have been raised meanwhile)
        c.discard_transaction()
    if status in (LoadStatus.OK, LoadStatus.TRUNCATED):
        aof.loaded(total, base)
    return status
