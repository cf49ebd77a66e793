"""Loading the AOF at start (and DEBUG LOADAOF): the manifest's base, then its incr files.

Theory of operation (Redis's loadAppendOnlyFiles / loadSingleAppendOnlyFile): a file that
starts with ``REDIS`` is an RDB (a base written with ``aof-use-rdb-preamble yes``, or a Redis 6
file with an RDB preamble) and is loaded as one, then whatever follows it is read as commands.
Commands are RESP arrays; lines starting with ``#`` are annotations (``#TS:``) and skipped.
Each command runs as the AOF's own client (``run``), a transaction's commands queued until its
EXEC. A file that ends inside a command or inside MULTI is *truncated*: with
``aof-load-truncated yes`` the torn tail is cut off the file (back to before the MULTI) and the
load goes on, if it is the last file; otherwise loading fails naming the file. A malformed
command in the middle fails with Redis's "Bad file format" (the offset is named too). An unknown
command fails, as in Redis. Nothing here touches the dataset but through ``run`` and
``load_rdb``; the caller swaps in an empty dataset first and clears it on failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from pyrepl.aof.manifest import BASE, AofInfo, Manifest, dir_create_if_missing, persist
from pyrepl.aof.writer import LogPort
from pyrepl.replication.wire import strtoll
from pyrepl.resp.scan import scan

# The fast path's parse: the canonical requests complete in the next 1 MiB, in one C call
# (pyrepl/resp/_scan.c, the request reader's; as plain Python, its reference); anything else
# is read by the exact loop.
_SCAN_WINDOW = 1 << 20
_SCAN_MAX_COUNT = 1 << 31
_SCAN_MAX_BULK = 1 << 62

AOF_ANNOTATION_LINE_MAX_LEN = 1024


class LoadStatus(Enum):
    OK = "ok"
    NOT_EXIST = "not_exist"
    EMPTY = "empty"
    OPEN_ERR = "open_err"
    FAILED = "failed"
    TRUNCATED = "truncated"
    BROKEN_RECOVERED = "broken_recovered"   # (Redis 8: a corrupt tail cut off)


@dataclass
class LoadPorts:
    """What loading needs from the server: run one command as the AOF client (False: no such
    command; ``in_multi``: the AOF client is inside MULTI, ``discard``: drop its open
    transaction), load an RDB file and say where it ended (raises on a bad one), and a log."""

    run: Callable[[list[bytes]], bool]
    in_multi: Callable[[], bool]
    discard: Callable[[], None]
    load_rdb: Callable[[str], int]
    log: LogPort
    clock_s: Callable[[], float] = lambda: 0.0
    # run the first requests of a batch at once (no transaction open, known plain
    # commands): how many it ran, a prefix of the batch; 0 leaves them all to ``run``
    run_batch: Callable[[list[list[bytes]]], int] = lambda reqs: 0


class _Eof(Exception):
    """The file ended inside a command (Redis's readerr with feof, then uxeof)."""


class _Format(Exception):
    """A malformed command (Redis's fmterr)."""


def load_single(ports: LoadPorts, dirname: str, name: str, old_style: bool,
                truncated_ok: bool, corrupt_tail_max: int = 0) -> LoadStatus:
    """loadSingleAppendOnlyFile (Redis 8's: a malformed command within the last
    ``corrupt_tail_max`` bytes, aof-load-corrupt-tail-max-size, is cut off as a torn tail)."""
    log = ports.log
    path = os.path.join(dirname, name)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError as e:
        log.warning(f"The append log file {name} doesn't exist: {e.strerror}")
        return LoadStatus.NOT_EXIST
    except OSError as e:
        log.warning(f"Fatal error: can't open the append log file {name} for reading: "
                    f"{e.strerror}")
        return LoadStatus.OPEN_ERR
    with f:
        data = f.read()
    if not data:
        return LoadStatus.EMPTY
    pos = 0
    if data[:5] == b"REDIS":
        log.notice("Reading RDB preamble from AOF file..." if old_style
                   else "Reading RDB base file on AOF loading...")
        try:
            pos = ports.load_rdb(path)
        except Exception as e:  # noqa: BLE001 - any decoding error aborts the load
            log.warning(f"Error reading the RDB preamble of the AOF file {name}, AOF loading "
                        f"aborted" if old_style else
                        f"Error reading the RDB base file {name}, AOF loading aborted")
            log.warning(f"Unrecoverable error reading the append only file {name}: {e}")
            return LoadStatus.FAILED
        if old_style:
            log.notice("Reading the remaining AOF tail...")
    valid_up_to = pos
    valid_before_multi = pos
    n = len(data)
    run, in_multi, run_batch = ports.run, ports.in_multi, ports.run_batch
    try:
        while pos < n:
            if data[pos] == 42:   # b"*": canonical requests parse in C, and run in batches
                reqs, ends = scan(data, pos, _SCAN_WINDOW, _SCAN_MAX_COUNT, _SCAN_MAX_BULK, 0,
                                  False)
                if reqs:
                    k = run_batch(reqs)
                    if k:
                        valid_up_to = pos = ends[k - 1]
                        continue
            line, pos = _line(data, pos)
            if line[:1] == b"#":
                continue
            if line[:1] != b"*":
                raise _Format()
            if len(line) == 1 and pos >= n and not data.endswith(b"\n"):
                raise _Eof()
            argc = strtoll(line[1:].decode("latin-1"))
            if argc < 1:
                raise _Format()
            argv: list[bytes] = []
            for _ in range(argc):
                if pos >= n:
                    raise _Eof()
                head, pos = _line(data, pos)
                if head[:1] != b"$":
                    raise _Format()
                size = strtoll(head[1:].decode("latin-1"))
                if size < 0:
                    size = 0
                if size and pos + size > n:
                    raise _Eof()
                argv.append(data[pos:pos + size])
                pos += size
                if pos + 2 > n:   # (the CRLF after the argument: read, not checked)
                    raise _Eof()
                pos += 2
            if argv[0].lower() == b"multi":
                valid_before_multi = valid_up_to
            if not run(argv):
                log.warning(f"Unknown command '{argv[0].decode('utf-8', 'replace')}' reading "
                            f"the append only file {name}")
                return LoadStatus.FAILED
            valid_up_to = pos
        if in_multi():
            log.warning(f"Revert incomplete MULTI/EXEC transaction in AOF file {name}")
            ports.discard()
            valid_up_to = valid_before_multi
            raise _Eof()
    except _Format:
        if in_multi():
            ports.discard()
        if corrupt_tail_max and n - valid_up_to < corrupt_tail_max:
            log.warning("!!! Warning: corrupt AOF file tail!!!")
            log.warning(f"!!! Truncating the AOF {path} at offset {valid_up_to} (remaining "
                        f"{n - valid_up_to}) !!!")
            try:
                os.truncate(path, valid_up_to)
            except OSError as e:
                log.warning(f"Error truncating the AOF file {name}: {e.strerror}")
            else:
                log.warning(f"AOF {path} loaded anyway because aof-load-corrupt-tail-max-size "
                            f"is enabled")
                return LoadStatus.BROKEN_RECOVERED
        # (where first, so that the last line is Redis's: its tests read it)
        log.warning(f"The malformed command starts at offset {valid_up_to} of {name}")
        log.warning(f"Bad file format reading the append only file {name}: make a backup of "
                    f"your AOF file, then use ./redis-check-aof --fix <filename.manifest>")
        return LoadStatus.FAILED
    except _Eof:
        if in_multi():
            ports.discard()
        if truncated_ok:
            log.warning(f"!!! Warning: short read while loading the AOF file {name}!!!")
            log.warning(f"!!! Truncating the AOF {name} at offset {valid_up_to} !!!")
            try:
                os.truncate(path, valid_up_to)
            except OSError as e:
                log.warning(f"Error truncating the AOF file {name}: {e.strerror}")
            else:
                log.warning(f"AOF {name} loaded anyway because aof-load-truncated is enabled")
                return LoadStatus.TRUNCATED
        log.warning(f"Unexpected end of file reading the append only file {name}. You can: "
                    f"1) Make a backup of your AOF file, then use ./redis-check-aof --fix "
                    f"<filename.manifest>. 2) Alternatively you can set the "
                    f"'aof-load-truncated' configuration option to yes and restart the server.")
        return LoadStatus.FAILED
    return LoadStatus.OK


def _line(data: bytes, pos: int) -> tuple[bytes, int]:
    """fgets with Redis's annotation-sized buffer: up to and including '\\n'."""
    end = data.find(b"\n", pos, pos + AOF_ANNOTATION_LINE_MAX_LEN - 1)
    if end == -1:
        end = min(len(data), pos + AOF_ANNOTATION_LINE_MAX_LEN - 1)
        return data[pos:end], end
    return data[pos:end + 1], end + 1


def file_size(dirname: str, name: str) -> int | None:
    try:
        return os.stat(os.path.join(dirname, name)).st_size
    except OSError:
        return None


def upgrade_if_needed(am: Manifest, dirpath: str, aofdir: str, filename: str,
                      log: LogPort) -> None:
    """loadAppendOnlyFiles' upgrade check and aofUpgradePrepare: a Redis 6 single-file
    ``appendonly.aof`` in ``dir`` becomes the base of a new manifest in ``appenddirname``.
    Raises OSError when that cannot be done (Redis exits)."""
    old = os.path.join(dirpath, filename)
    if not os.path.isfile(old):
        return
    inside = os.path.exists(os.path.join(aofdir, filename))
    if not (not os.path.isdir(aofdir) or am.is_empty() or
            (am.base is not None and not am.incr and am.base.name == filename and not inside)):
        return
    try:
        dir_create_if_missing(aofdir)
    except OSError as e:
        log.warning(f"Can't open or create append-only dir {os.path.basename(aofdir)}: "
                    f"{e.strerror}")
        raise
    am.base = AofInfo(filename, 1, BASE)
    am.base_seq = 1
    am.dirty = True
    persist(aofdir, filename, am)
    try:
        os.rename(old, os.path.join(aofdir, filename))
    except OSError as e:
        log.warning(f"Error trying to move the old AOF file {filename} into dir {aofdir}: "
                    f"{e.strerror}")
        raise
    log.notice(f"Successfully migrated an old-style AOF file ({filename}) into the AOF "
               f"directory ({os.path.basename(aofdir)}).")


def load_files(ports: LoadPorts, am: Manifest, aofdir: str, filename: str,
               truncated_ok: bool, corrupt_tail_max: int = 0) -> tuple[LoadStatus, int, int]:
    """loadAppendOnlyFiles: (status, total size of base + incr files, the base's size)."""
    log = ports.log
    if am.is_empty():
        return LoadStatus.NOT_EXIST, 0, 0
    files = am.files()
    total = 0
    for info in files:
        size = file_size(aofdir, info.name)
        if size is None:
            log.warning(f"Unable to obtain the AOF file {info.name} length. stat: "
                        f"No such file or directory")
            return LoadStatus.FAILED, 0, 0
        total += size
    if total == 0:
        return LoadStatus.EMPTY, 0, 0
    base_size = 0
    status = LoadStatus.OK
    for k, info in enumerate(files):
        last = k == len(files) - 1
        is_base = info is am.base
        if is_base:
            base_size = file_size(aofdir, info.name) or 0
        start = ports.clock_s()
        status = load_single(ports, aofdir, info.name, old_style=info.name == filename,
                             truncated_ok=truncated_ok, corrupt_tail_max=corrupt_tail_max)
        if status is LoadStatus.BROKEN_RECOVERED:
            status = LoadStatus.TRUNCATED     # (the same rules from here on)
        if status is LoadStatus.EMPTY and not is_base:
            status = LoadStatus.OK
        if status is LoadStatus.OK or (status is LoadStatus.TRUNCATED and last):
            log.notice(f"DB loaded from {'base' if is_base else 'incr'} file {info.name}: "
                       f"{ports.clock_s() - start:.3f} seconds")
        if status is LoadStatus.TRUNCATED and not last:
            log.warning("Fatal error: the truncated file is not the last file")
            return LoadStatus.FAILED, total, base_size
        if status in (LoadStatus.OPEN_ERR, LoadStatus.FAILED, LoadStatus.NOT_EXIST):
            return (LoadStatus.FAILED if status is LoadStatus.NOT_EXIST else status), total, \
                base_size
    return status, total, base_size
