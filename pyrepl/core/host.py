"""What the core asks of the outside world: ``Host``, the operating-system services the I/O
shell provides (net/server.py's NetHost subclasses it; this base serves sans-io tests), and
``NullLog``, the log a core without a shell keeps in memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pyrepl.aof.writer import FsyncPort, InlineFsync
from pyrepl.core.lazyfree import FreePort, InlineFree
from pyrepl.core.stats import Counter, PlainCounter
from pyrepl.resp.types import ReplyError

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.replication.ports import MasterIOPort, ReplicaIOPort
    from pyrepl.scripting.ldb import LdbChannelPort


class NullLog:
    """Keeps log lines in memory (tests); the I/O shell installs a real logger."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def _add(self, level: str, msg: str) -> None:
        self.lines.append((level, msg))
        if len(self.lines) > 10000:
            del self.lines[:5000]

    def debug(self, msg: str) -> None:
        self._add("debug", msg)

    def verbose(self, msg: str) -> None:
        self._add("verbose", msg)

    def notice(self, msg: str) -> None:
        self._add("notice", msg)

    def warning(self, msg: str) -> None:
        self._add("warning", msg)


class MigrateLinkPort(Protocol):
    """A blocking connection MIGRATE talks through (pyrepl/net/migrate_links.py): OSError on
    a socket error, TimeoutError past the timeout."""

    last_dbid: int

    def send(self, data: bytes, timeout_ms: int) -> None: ...

    def read_line(self, timeout_ms: int, limit: int = 1024) -> bytes: ...


class Host:
    """Operating-system services the core asks the I/O shell for (the shell subclasses this).

    ``master_io`` / ``replica_io`` are the replication sides' I/O adapters (sockets, files,
    the snapshot child); ``None`` when the shell provides none (pure sans-io tests).
    """

    master_io: MasterIOPort | None = None
    replica_io: ReplicaIOPort | None = None

    def fork_child(self, job: Callable[[], int], purpose: str) -> int:
        raise OSError("fork is not available")

    def kill_child(self, pid: int) -> None:
        pass

    def request_shutdown(self) -> None:
        pass

    def final_save(self, save: Callable[[], bool], temp_path: str) -> bool:
        """The save before exiting, ``save()`` (blocking the loop): the shell lets a second
        SIGINT meanwhile end the process at once (removing ``temp_path``), as Redis's signal
        handler does ("You insist... exiting now.")."""
        return save()

    def sleep(self, seconds: float) -> None:
        pass

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` at the next pass of the event loop (Redis's 0 ms time event: an
        eviction cycle that ran out of time goes on there). Sans-io: kept in ``soon`` for
        the test to run."""
        self.__dict__.setdefault("soon", []).append(fn)

    def set_proc_title(self, title: str) -> None:
        """The process title ps shows (setproctitle); here only remembered."""
        self.__dict__["proc_title"] = title

    def set_oom_score_adj(self, process_class: int) -> bool:
        """setOOMScoreAdj under the config's ``oom-score-adj`` (0 master, 1 replica; the
        snapshot child sets 2 itself): False when it failed (logged)."""
        return True

    def notify_supervisor(self, message: str) -> None:
        """A systemd sd_notify line (``STOPPING=1\\n`` ...) when supervised by systemd."""

    def crash(self, sig: int, si_code: int) -> None:
        """The crash report, then the process dies by ``sig`` (the shell's)."""
        raise RuntimeError(f"crashed by signal: {sig}")

    def panic(self, message: str) -> None:
        """Redis's serverPanic: the shell logs and aborts the process."""
        raise RuntimeError(message)

    def ldb_channel(self, client: Client) -> LdbChannelPort:
        """The Lua debugger's direct line to ``client``'s socket (its pending replies sent
        first). None here: no sockets."""
        raise ReplyError("ERR the Lua debugger needs a network connection")

    def close_client(self, client: Client) -> None:
        """Close a client's connection at once (CLIENT KILL, limits)."""
        client.close_after_reply = True

    def output_buffered(self, client: Client) -> int:
        """Bytes of ``client``'s output the transport holds, not yet on the socket (its part
        of Redis's reply list: maxmemory-clients, CLIENT LIST ``omem``). None here."""
        return 0

    def listening_port_changed(self, port: int) -> None:
        pass

    # -- MIGRATE's blocking connections (Redis's migrate_cached_sockets) --------------------
    def migrate_link(self, host: bytes, port: bytes, timeout_ms: int) -> MigrateLinkPort:
        """The cached connection to ``host:port``, or a new one; OSError when it cannot
        connect within ``timeout_ms``. None here: no network."""
        raise OSError("no network")

    def migrate_close(self, host: bytes, port: bytes) -> None:
        """Close and forget the cached connection to ``host:port`` (after a socket error)."""

    def migrate_close_idle(self, now_s: float) -> None:
        """Close the cached connections unused for more than 10 seconds (the cron)."""

    def migrate_links(self) -> int:
        """How many are cached (INFO's migrate_cached_sockets)."""
        return 0

    def time_us(self) -> int:
        """Wall-clock time in microseconds (TIME, INFO server_time_usec)."""
        return 0

    def key_save_delay_hook(self) -> Callable[[], None] | None:
        """``rdb-key-save-delay``: a per-key sleep for snapshot children (None when 0)."""
        return None

    def shared_counter(self) -> Counter:
        """A counter a forked child can set and the parent read (save progress). The shell
        gives one in shared memory; here it is a plain one (no real fork)."""
        return PlainCounter()

    def child_cow_bytes(self, pid: int) -> int | None:
        """Memory the child ``pid`` has copied on write so far (its private dirty pages), or
        None when it cannot be known."""
        return None

    @staticmethod
    def clock_ns() -> int:
        """A monotonic clock in nanoseconds (the time each command takes: commandstats). The
        shell gives ``time.perf_counter_ns``; sans-io cores count 0."""
        return 0

    def process_events_while_blocked(self, protected: Client | None) -> None:
        """Redis's processEventsWhileBlocked: serve what clients sent, without returning to the
        event loop, while a long script runs (``protected``, the script's caller, is not
        read). Nothing here: no I/O in a sans-io core."""

    def process_info(self) -> dict[str, float]:
        """rss, peak_rss, total_system_memory, cpu_user, cpu_sys, ... (INFO memory/cpu)."""
        return {}

    def background_fsync(self) -> FsyncPort:
        """The AOF's background fsync (Redis's bio thread); here done at once."""
        return InlineFsync()

    def background_free(self) -> FreePort:
        """The lazy free's thread (Redis's bio); here done at once."""
        return InlineFree()

    def exit_now(self, code: int) -> None:
        """exit(code) where Redis exits at once (an AOF it cannot write under ``always``)."""
        raise SystemExit(code)
