"""Redis-style log lines: ``pid:R dd Mon yyyy hh:mm:ss.mmm <level> message``.

The role letter is M (master), S (replica) or C (child); the level marks are Redis's:
``.`` debug, ``-`` verbose, ``*`` notice, ``#`` warning. Lines go to ``logfile``, or to stdout
when it is empty, as Redis's serverLog (``log_to_stdout``); :meth:`Logger.raw` writes text as it
is (serverLogRaw with LL_RAW: the startup banner).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

LEVELS = {"debug": 0, "verbose": 1, "notice": 2, "warning": 3, "nothing": 4}
MARKS = {"debug": ".", "verbose": "-", "notice": "*", "warning": "#"}


def log_path(logfile: str, directory: str) -> str:
    """Where ``logfile`` is: Redis opens it relative to its working directory, which is
    ``dir`` once the config is read (it chdir()s; pyrepl never does, so it joins)."""
    if not logfile or os.path.isabs(logfile):
        return logfile
    return os.path.join(directory, logfile)


class Logger:
    def __init__(self, loglevel: str = "notice", logfile: str = "") -> None:
        self.min_level = LEVELS.get(loglevel, 2)
        self.logfile = logfile
        self._fh: TextIO | None = None
        self.role = "M"

    def set_level(self, loglevel: str) -> None:
        self.min_level = LEVELS.get(loglevel, 2)

    def _stream(self) -> TextIO:
        if not self.logfile:
            return sys.stdout
        if self._fh is None:
            self._fh = open(self.logfile, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        return self._fh

    def log(self, level: str, msg: str) -> None:
        if LEVELS[level] < self.min_level:
            return
        now = time.time()
        stamp = time.strftime("%d %b %Y %H:%M:%S", time.localtime(now))
        self._write(f"{os.getpid()}:{self.role} {stamp}.{int(now * 1000) % 1000:03d} "
                    f"{MARKS[level]} {msg}\n")

    def raw(self, level: str, text: str) -> None:
        """``text`` as it is, no prefix (Redis's LL_RAW), at ``level``."""
        if LEVELS[level] >= self.min_level:
            self._write(text)

    def _write(self, text: str) -> None:
        try:
            s = self._stream()
            s.write(text)
            s.flush()
        except OSError:
            pass

    def debug(self, msg: str) -> None:
        self.log("debug", msg)

    def verbose(self, msg: str) -> None:
        self.log("verbose", msg)

    def notice(self, msg: str) -> None:
        self.log("notice", msg)

    def warning(self, msg: str) -> None:
        self.log("warning", msg)
