"""Writes pyrepl/commands/keyspecs.json (which pyrepl/commands/keyspecs.py reads) from the
command JSON files of Redis's source.

    .venv/bin/python scripts/gen_keyspecs.py      (after `make redis-src`)

Redis 7.0.15's files (.cache/redis-src/redis-7.0.15/src/commands), then Redis 8's for the
commands 7.0 does not have (the hash-field TTL family, CLIENT SETINFO). The output is data:
each command's tips and key specs exactly as COMMAND INFO reports them, which
COMMAND GETKEYSANDFLAGS walks.
"""

from __future__ import annotations

import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = [os.path.join(ROOT, ".cache/redis-src/redis-7.0.15/src/commands"),
           os.path.join(ROOT, ".cache/redis-src/redis-8/src/commands")]
UPPER = {"RO", "RW", "OW", "RM"}
FLAG_ORDER = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
              "incomplete", "variable_flags"]


def spec(ks: dict) -> tuple:
    named = [f if f in UPPER else f.lower() for f in ks.get("flags", [])]
    flags = tuple(sorted(named, key=FLAG_ORDER.index))     # Redis's addReplyFlagsForKeyArgs
    bs = ks["begin_search"]
    if "index" in bs:
        begin: tuple = ("index", bs["index"]["pos"])
    elif "keyword" in bs:
        begin = ("keyword", bs["keyword"]["keyword"], bs["keyword"]["startfrom"])
    else:
        begin = ("unknown",)
    fk = ks["find_keys"]
    if "range" in fk:
        r = fk["range"]
        find: tuple = ("range", r["lastkey"], r["step"], r["limit"])
    elif "keynum" in fk:
        k = fk["keynum"]
        find = ("keynum", k["keynumidx"], k["firstkey"], k["step"])
    else:
        find = ("unknown",)
    return (flags, ks.get("notes"), begin, find)


def main() -> None:
    out: dict[str, tuple] = {}
    for src in SOURCES:
        for path in sorted(glob.glob(os.path.join(src, "*.json"))):
            with open(path) as f:
                doc = json.load(f)
            for name, cmd in doc.items():
                full = (cmd["container"].lower() + "|" if "container" in cmd else "") + name.lower()
                if full in out:
                    continue
                tips = tuple(t.lower() for t in cmd.get("command_tips", []))
                out[full] = (tips, tuple(spec(ks) for ks in cmd.get("key_specs", [])))
    # one command a line, in name order; lists for the tuples (keyspecs.py makes them tuples)
    lines = [f"{json.dumps(name)}: {json.dumps(out[name])}" for name in sorted(out)]
    with open(os.path.join(ROOT, "pyrepl/commands/keyspecs.json"), "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")

if __name__ == "__main__":
    main()
