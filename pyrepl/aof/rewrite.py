"""AOF rewrite: the base file a forked child writes, and what the parent does around it.

Theory of operation (Redis's rewriteAppendOnlyFileBackground and backgroundRewriteDoneHandler):

1. At the fork the parent flushes its buffer, opens a *new* incr file and records it in the
   manifest (or, while AOF waits for its first rewrite, a temporary incr file), so every write
   from the fork on is in a file the rewrite does not cover.
2. The child writes the whole dataset it forked with to ``temp-rewriteaof-bg-<pid>.aof`` in
   ``dir``: an RDB (``aof-use-rdb-preamble yes``, with the ``aof-base`` aux field) or commands
   (:mod:`pyrepl.aof.commands`), fsynced, then exits.
3. When it exits with success the parent renames that file to the next base, turns the old
   base and the incr files before the new one into history, persists the manifest
   atomically, then deletes the history (unless ``aof-disable-auto-gc yes``). Any failure
   leaves the old manifest in force: the files it names are untouched.

:func:`write_base` is step 2 (it runs in the child); the parent's steps are
:meth:`pyrepl.aof.appendonly.AppendOnly.rewrite_background` and ``rewrite_done``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from pyrepl.rdb.encoder import save_rdb_file, write_atomically

AUTOSYNC_BYTES = 4 * 1024 * 1024   # REDIS_AUTOSYNC_BYTES


def temp_base_path(dirpath: str, pid: int) -> str:
    """The child's output (Redis's temp-rewriteaof-bg-<pid>.aof, in the working dir)."""
    return os.path.join(dirpath, f"temp-rewriteaof-bg-{pid}.aof")


def write_base(path: str, dbs: Sequence[Any], *, rdb_preamble: bool, functions: Sequence[bytes],
               checksum: bool, now_ms: int, timestamp: bytes,
               key_hook: Callable[[], None] | None = None,
               progress: Callable[[int], None] | None = None,
               incremental_fsync: bool = False, compress: bool = False) -> None:
    """rewriteAppendOnlyFile: the dataset to ``path``, atomically (temp file, fsync, rename,
    fsync of the directory), with ``aof-rewrite-incremental-fsync`` an fdatasync every 4 MiB
    (REDIS_AUTOSYNC_BYTES); ``compress``: rdbcompression for the RDB preamble. Raises OSError."""
    autosync = AUTOSYNC_BYTES if incremental_fsync else 0
    if rdb_preamble:
        save_rdb_file(path, dbs, aux={"aof-base": 1}, functions=functions, checksum=checksum,
                      now_ms=now_ms, key_hook=key_hook, progress=progress, autosync=autosync,
                      compress=compress)
        return
    from pyrepl.aof.commands import write_dataset

    def fill(write: Callable[[bytes], Any]) -> None:
        if timestamp:
            write(timestamp)
        write_dataset(write, dbs, now_ms, functions, key_hook=key_hook, progress=progress)

    write_atomically(path, fill, autosync)
