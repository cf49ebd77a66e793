"""Process management as redis-server does it: daemonize, the pid file, supervision.

Theory of operation: ``redis-server`` decides at start whether it runs under a supervisor
(``supervised upstart|systemd|auto``: ``auto`` looks at ``UPSTART_JOB`` / ``NOTIFY_SOCKET``),
detaches only when ``daemonize yes`` and not supervised (fork, the parent exits 0 at once,
``setsid``, standard streams to /dev/null), writes its pid file when detached or when
``pidfile`` is set (``/var/run/redis.pid`` when detached without one; a failure is logged,
never fatal) and removes it at shutdown. Under systemd it sends ``STATUS=...`` and ``READY=1``
datagrams to ``NOTIFY_SOCKET`` (an abstract socket when the name starts with ``@``) once it
accepts connections, ``STOPPING=1`` when it shuts down; under upstart it stops itself
(SIGSTOP) right away, as Redis 7.0 does. This module does exactly that, before the event loop exists
(nothing of asyncio or uvloop may cross the fork).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Protocol

#: Redis's CONFIG_DEFAULT_PID_FILE: the pid file of a daemon that names none.
DEFAULT_PID_FILE = "/var/run/redis.pid"


class Log(Protocol):
    def notice(self, msg: str) -> None: ...
    def warning(self, msg: str) -> None: ...
    def verbose(self, msg: str) -> None: ...


def supervision(mode: str, log: Log, env: dict[str, str] | None = None) -> str:
    """redisIsSupervised: the supervisor in effect, ``"no"`` when none could be set up."""
    env = dict(os.environ) if env is None else env
    if mode == "auto":
        if env.get("UPSTART_JOB"):
            log.verbose("Upstart supervision detected.")
            mode = "upstart"
        elif env.get("NOTIFY_SOCKET"):
            log.verbose("Systemd supervision detected.")
            mode = "systemd"
    if mode == "upstart":
        if not env.get("UPSTART_JOB"):
            log.warning("upstart supervision requested, but UPSTART_JOB not found!")
            return "no"
        log.notice("supervised by upstart, will stop to signal readiness.")
        os.kill(os.getpid(), signal.SIGSTOP)    # as Redis 7.0: at once, not once serving
        os.environ.pop("UPSTART_JOB", None)
        return "upstart"
    if mode == "systemd":
        if sd_notify("STATUS=Redis is loading...\n", log, env) <= 0:
            return "no"
        log.notice("Supervised by systemd. Please make sure you set appropriate values for "
                   "TimeoutStartSec and TimeoutStopSec in your service unit.")
        return "systemd"
    return "no"


def sd_notify(message: str, log: Log | None = None, env: dict[str, str] | None = None) -> int:
    """sd_notify(0, message): 1 when sent, 0 without NOTIFY_SOCKET, -1 on an error."""
    env = dict(os.environ) if env is None else env
    path = env.get("NOTIFY_SOCKET", "")
    if not path:
        if log is not None:
            log.warning("systemd supervision error: NOTIFY_SOCKET not found!")
        return 0
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(message.encode(), address)
    except OSError as e:
        if log is not None:
            log.warning(f"systemd supervision error: sd_notify: {-(e.errno or 1)}")
        return -1
    return 1


def daemonize() -> None:
    """Redis's daemonize(): the parent exits 0 at once; the child leads a new session with its
    standard streams on /dev/null (so with an empty ``logfile`` it logs nowhere, as Redis)."""
    if os.fork() != 0:
        os._exit(0)
    os.setsid()
    try:
        fd = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for target in (0, 1, 2):
        os.dup2(fd, target)
    if fd > 2:
        os.close(fd)


def invoked_as() -> str:
    """The command this process was started as (Redis's argv[0], its title's ``{title}``)."""
    return sys.argv[0] if sys.argv and sys.argv[0] else "pyrepl"


def set_title(text: str) -> None:
    """setproctitle: what ps and /proc/<pid>/cmdline show for this process."""
    import setproctitle

    setproctitle.setproctitle(text)


def write_pidfile(path: str, log: Log) -> bool:
    """createPidFile: best effort; a failure is logged (Redis 8's text), never fatal."""
    try:
        with open(path, "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError as e:
        log.warning(f"Failed to write PID file: {e.strerror}")
        return False
    return True


def remove_pidfile(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class OomScore:
    """setOOMScoreAdj: this process's /proc/self/oom_score_adj under ``oom-score-adj``. The
    score from before pyrepl first changed it is kept, so ``relative`` adds to it and ``no``
    restores it (the process-wide statics of Redis's function)."""

    PATH = "/proc/self/oom_score_adj"

    def __init__(self) -> None:
        self.adjusted = False
        self.base = 0

    def apply(self, mode: str, values: list[int], process_class: int, log: Log) -> bool:
        """``process_class``: 0 master, 1 replica, 2 a background child. False (logged) when
        the file cannot be read or written."""
        if mode != "no":
            if not self.adjusted:
                try:
                    with open(self.PATH) as f:
                        self.base = int(f.read().strip() or 0)
                except (OSError, ValueError) as e:
                    log.warning(f"Unable to read oom_score_adj: {getattr(e, 'strerror', e)}")
                    return False
                self.adjusted = True
            val = values[process_class]
            if mode in ("yes", "relative"):
                val += self.base
            val = max(-1000, min(1000, val))
        elif self.adjusted:
            self.adjusted = False
            val = self.base
        else:
            return True
        try:
            with open(self.PATH, "w") as f:
                f.write(f"{val}\n")
        except OSError as e:
            log.warning(f"Unable to write oom_score_adj: {e.strerror}")
            return False
        return True
