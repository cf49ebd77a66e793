"""The sync event log file: NDJSON lines, rotated by size.

``sync-log-file`` names the file (relative to ``dir``); when a write would take it past
``sync-log-max-size`` bytes (0 = never rotate), it is renamed to ``<file>.1`` (older ones shift
to ``.2``, ``.3`` ...) and a new file starts; at most ``sync-log-max-files`` rotated files are
kept. Many moderate files also let Spark read an archive in parallel (gzip is not splittable).
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from pyrepl.events import to_json_line


class RotatingNdjsonWriter:
    def __init__(self, path: str, max_size: int = 64 * 1024 * 1024, max_files: int = 8) -> None:
        self.path = path
        self.max_size = max_size
        self.max_files = max_files
        self._fh: TextIO | None = None
        self._size = 0
        self.rotations = 0

    def _open(self) -> TextIO:
        if self._fh is None:
            d = os.path.dirname(self.path)
            if d:
                os.makedirs(d, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            self._size = self._fh.tell()
        return self._fh

    def rotate(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self.max_files <= 0:
            os.unlink(self.path)
        else:
            for i in range(self.max_files - 1, 0, -1):
                src = f"{self.path}.{i}"
                if os.path.exists(src):
                    os.replace(src, f"{self.path}.{i + 1}")
            os.replace(self.path, f"{self.path}.1")
            excess = f"{self.path}.{self.max_files + 1}"
            if os.path.exists(excess):
                os.unlink(excess)
        self.rotations += 1

    def write(self, event: dict[str, Any]) -> None:
        line = to_json_line(event)
        n = len(line.encode("utf-8"))
        try:
            fh = self._open()
            if self.max_size and self._size and self._size + n > self.max_size:
                self.rotate()
                fh = self._open()
            fh.write(line)
            fh.flush()
            self._size += n
        except OSError:
            pass  # the event log must never take the server down

    def set_limits(self, max_size: int, max_files: int) -> None:
        self.max_size = max_size
        self.max_files = max_files

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
