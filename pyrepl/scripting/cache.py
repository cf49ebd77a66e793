"""The script cache (SHA1 -> compiled script) and the shebang flags of Redis 7.0's eval.c.

Theory of operation: EVAL and SCRIPT LOAD compile a body once and keep it under the lowercase
hex SHA1 of the whole body (shebang included), as Redis keeps ``f_<sha>`` in the Lua registry
and the body in ``lctx.lua_scripts``; EVALSHA finds it case-insensitively. A body starting with
``#!`` declares its engine and flags (:func:`parse_shebang`, Redis's
``evalExtractShebangFlags``); without one the script runs in "eval compatibility mode"
(``COMPAT``), whose checks are those of Redis 6. The shebang line is cut before compiling but
its line feed is kept so line numbers in errors stay the user's. SCRIPT FLUSH drops the cache
together with the Lua state (the engine rebuilds both).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pyrepl.resp.reader import split_args

# Script flags (Redis's SCRIPT_FLAG_*).
NO_WRITES = 1 << 0
ALLOW_OOM = 1 << 1
ALLOW_STALE = 1 << 2
NO_CLUSTER = 1 << 3
COMPAT = 1 << 4            # SCRIPT_FLAG_EVAL_COMPAT_MODE: no shebang
ALLOW_CROSS_SLOT = 1 << 5

FLAG_NAMES = {b"no-writes": NO_WRITES, b"allow-oom": ALLOW_OOM, b"allow-stale": ALLOW_STALE,
              b"no-cluster": NO_CLUSTER, b"allow-cross-slot-keys": ALLOW_CROSS_SLOT}


class ShebangError(Exception):
    """The text Redis answers (after "ERR ") for a malformed shebang."""


def parse_shebang(body: bytes) -> tuple[int, int]:
    """(flags, length of the shebang line without its line feed); (COMPAT, 0) without one."""
    if not body.startswith(b"#!"):
        return COMPAT, 0
    end = body.find(b"\n")
    if end < 0:
        raise ShebangError("Invalid script shebang")
    parts = split_args(body[:end])
    if not parts:
        raise ShebangError("Invalid engine in script shebang")
    if parts[0] != b"#!lua":
        raise ShebangError("Unexpected engine in script shebang: "
                           + parts[0].decode("utf-8", "replace"))
    flags = 0
    for part in parts[1:]:
        if not part.startswith(b"flags="):
            raise ShebangError("Unknown lua shebang option: " + part.decode("utf-8", "replace"))
        for name in part[6:].split(b",") if part[6:] else ():   # (sdssplitlen of "": none)
            bit = FLAG_NAMES.get(name)
            if bit is None:
                raise ShebangError("Unexpected flag in script shebang: "
                                   + name.decode("utf-8", "replace"))
            flags |= bit
    return flags, end


def sha1hex(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


@dataclass(slots=True)
class Script:
    sha: str
    body: bytes
    flags: int
    func: Any          # the compiled Lua function
    ref: int = 0       # its registry reference in _luacall (0: none, the reference runs it)


class ScriptCache:
    """sha (lowercase hex) -> Script, with Redis's memory estimate of the bodies."""

    __slots__ = ("scripts", "by_sha", "memory")   # (by_sha read from C: EVALSHA's lookup)

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        self.by_sha: dict[bytes, Script] = {}   # the same under the sha's bytes (EVALSHA's)
        self.memory = 0

    def __len__(self) -> int:
        return len(self.scripts)

    def get(self, sha: str) -> Script | None:
        return self.scripts.get(sha)

    def lookup(self, arg: bytes) -> Script | None:
        """EVALSHA's script: ``arg`` as a client sent it, found whatever its case."""
        script = self.by_sha.get(arg)
        if script is None and len(arg) == 40:
            script = self.scripts.get(arg.decode("latin-1").lower())
        return script

    def add(self, script: Script) -> None:
        self.scripts[script.sha] = script
        self.by_sha[script.sha.encode()] = script
        # sdsZmallocSize(sha) + the body's sds: a header and the allocator's rounding.
        self.memory += 48 + len(script.body) + 9

    def clear(self) -> None:
        self.scripts = {}
        self.by_sha = {}
        self.memory = 0

    def overhead(self) -> int:
        """used_memory_scripts_eval: the bodies plus the dict's entries and buckets."""
        n = len(self.scripts)
        slots = 1 << max(2, (n - 1).bit_length()) if n else 0
        return self.memory + n * (24 + 16) + slots * 8
