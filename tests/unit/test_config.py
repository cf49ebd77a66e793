"""Tests for pyrepl.config: redis.conf parsing, overrides, CONFIG GET / CONFIG SET semantics.

The expected texts and values are Redis 7.0.15's (checked against a real redis-server by the
slow interop tests at the end of this file).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.config import (
    BEYOND_REDIS_7,
    DIRECTIVES,
    INT_MAX,
    LLONG_MAX,
    ULLONG_MAX,
    Config,
    ConfigError,
    lookup,
    parse_memory,
    split_args,
    stringmatch,
)

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def load_text(tmp_path: Path, text: str, name: str = "test.conf") -> Config:
    return Config.load(write(tmp_path / name, text))


def load_error(tmp_path: Path, text: str, name: str = "test.conf") -> ConfigError:
    path = write(tmp_path / name, text)
    with pytest.raises(ConfigError) as info:
        Config.load(path)
    return info.value


# ---------------------------------------------------------------------------------------------
# split_args (sdssplitargs)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("port 6379", ["port", "6379"]),
        ("  save   900\t1  ", ["save", "900", "1"]),
        ('requirepass "a b c"', ["requirepass", "a b c"]),
        ('x "tab\\there" "nl\\n" "cr\\r" "bs\\b" "bell\\a"',
         ["x", "tab\there", "nl\n", "cr\r", "bs\b", "bell\a"]),
        ('x "\\x41\\x62" "q\\"uote" "back\\\\slash" "other\\z"',
         ["x", "Ab", 'q"uote', "back\\slash", "otherz"]),
        ('x "\\x4"', ["x", "x4"]),                   # not two hex digits: \x is just 'x'
        ("x 'single quoted' 'it\\'s' 'no\\nescape'",
         ["x", "single quoted", "it's", "no\\nescape"]),
        ('x a"b c"d', None),                            # closing quote must end the token
        ('x a"b c" d', ["x", "ab c", "d"]),            # quoted part joins the unquoted prefix
        ('x ""', ["x", ""]),
        ("x ''", ["x", ""]),
        ('x "unterminated', None),
        ("x 'unterminated", None),
        ('x "a"b', None),
        ("x 'a'b", None),
        ("", []),
        ("   ", []),
    ],
)
def test_split_args(line: str, expected: list[str] | None) -> None:
    assert split_args(line) == expected


def test_split_args_high_hex_escape_is_a_raw_byte() -> None:
    (value,) = split_args('"\\xe9\\x41"')  # type: ignore[misc]
    assert value.encode("utf-8", "surrogateescape") == b"\xe9A"


def sds_repr(arg: str) -> str:
    """Quote like Redis's sdscatrepr (what redis-server does with command-line values)."""
    out = ['"']
    for ch in arg:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\a":
            out.append("\\a")
        elif ch == "\b":
            out.append("\\b")
        elif ch.isprintable() and ord(ch) < 0x80:
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
    out.append('"')
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=6))
def test_split_args_inverts_quoting(args: list[str]) -> None:
    parsed = split_args(" ".join(sds_repr(a) for a in args))
    assert parsed is not None
    assert [p.encode("utf-8", "surrogateescape") for p in parsed] == \
        [a.encode("utf-8", "surrogateescape") for a in args]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters=" \t\n\r\v\f\"'\x00"),
                        min_size=1, max_size=8), max_size=6))
def test_split_args_plain_words(words: list[str]) -> None:
    assert split_args("  ".join(words)) == words


# ---------------------------------------------------------------------------------------------
# memory units
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0), ("5", 5), ("10b", 10), ("10B", 10),
        ("1k", 1000), ("1K", 1000), ("1kb", 1024), ("1KB", 1024), ("1Kb", 1024),
        ("1m", 1000**2), ("1mb", 1024**2), ("64MB", 64 * 1024**2),
        ("1g", 1000**3), ("1gb", 1024**3), ("1Gb", 1024**3), ("2gB", 2 * 1024**3),
        ("007", 7),
        ("", 0), ("kb", 0),                     # as Redis's memtoull: no digits reads as 0
    ],
)
def test_parse_memory(text: str, expected: int) -> None:
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["-1", "+5", " 5", "5 ", "1.5mb", "1tb", "1kbb", "mb1", "0x10"])
def test_parse_memory_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_memory(text)


def test_parse_memory_wraps_like_c() -> None:
    # strtoull saturates, the multiplication wraps modulo 2**64 (Redis does no overflow check).
    assert parse_memory("99999999999999999999") == ULLONG_MAX
    assert parse_memory("18446744073709551615kb") == (ULLONG_MAX * 1024) % 2**64


# ---------------------------------------------------------------------------------------------
# stringmatch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "string", "nocase", "expected"),
    [
        ("*", "anything", False, True),
        ("*", "", False, False),                # Redis quirk: nothing matches an empty string
        ("", "", False, True),
        ("", "a", False, False),
        ("repl-*", "repl-timeout", False, True),
        ("repl-*", "replica-read-only", False, False),
        ("*-max-*", "min-replicas-max-lag", False, True),
        ("p?rt", "port", False, True),
        ("p?rt", "prt", False, False),
        ("[mp]ort", "port", False, True),
        ("[^mp]ort", "port", False, False),
        ("[^mp]ort", "sort", False, True),
        ("[a-c]x", "bx", False, True),
        ("[c-a]x", "bx", False, True),          # reversed range
        ("[a-c]x", "dx", False, False),
        ("PORT", "port", True, True),
        ("PORT", "port", False, False),
        ("[A-C]x", "bx", True, True),
        ("a\\*b", "a*b", False, True),
        ("a\\*b", "axb", False, False),
        ("[\\]]", "]", False, True),
        ("[abc", "a", False, True),             # unterminated class: Redis still matches
        ("a**b", "ab", False, True),
        ("*a*b*", "xxaxxbxx", False, True),
        ("*a*b*", "xxbxxaxx", False, False),
        ("??", "abc", False, False),
        ("abc*", "ab", False, False),
    ],
)
def test_stringmatch(pattern: str, string: str, nocase: bool, expected: bool) -> None:
    assert stringmatch(pattern, string, nocase) is expected


@pytest.mark.parametrize(("pattern", "expected"), [
    (b"[\xff-z]ort", True),   # bytes >= 0x80 are negative C chars: -1..'z' holds 'p'
    (b"[a-\xff]ort", False),  # and -1..'a' does not
    (b"[^\xff]ort", True),
    (b"p\xc3\xa9rt", False),
    (b"[P]ORT", True),
])
def test_stringmatch_sees_the_bytes_redis_sees(pattern: bytes, expected: bool) -> None:
    # What CONFIG GET <pattern> answers for "port" on redis-server 7.0.15; the server decodes
    # the pattern with surrogateescape so that the glob matches its exact bytes.
    assert stringmatch(pattern.decode("utf-8", "surrogateescape"), "port", True) is expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab*?", max_size=8), st.text(alphabet="abAB", min_size=1, max_size=10))
def test_stringmatch_agrees_with_fnmatch_on_star_and_question(pattern: str, string: str) -> None:
    # (fnmatch differs only on the empty string, which Redis never matches except with "")
    assert stringmatch(pattern, string) == fnmatch.fnmatchcase(string, pattern)
    assert stringmatch(pattern, string, nocase=True) == \
        fnmatch.fnmatchcase(string.lower(), pattern.lower())


# ---------------------------------------------------------------------------------------------
# defaults and the table
# ---------------------------------------------------------------------------------------------

# CONFIG GET * on a default-started redis-server 7.0.15 (Debian's, recorded in tests/data; port
# and dir left out), plus the Redis 8 names pyrepl takes (their Redis 8 defaults) and pyrepl's
# own sync-log-* (dir is the working directory, checked separately).
_DEFAULTS_FILE = os.path.join(os.path.dirname(__file__), "..", "data",
                              "redis-7.0.15-config-defaults.tsv")
with open(_DEFAULTS_FILE, encoding="utf-8") as _fh:
    REDIS7_DEFAULTS = dict(line.rstrip("\n").split("\t", 1) for line in _fh if line.strip())
REDIS8_DEFAULTS = {
    "repl-rdb-channel": "yes", "replica-full-sync-buffer-limit": "0", "locale-collate": "",
    "set-max-listpack-entries": "128", "set-max-listpack-value": "64",
    "aof-load-corrupt-tail-max-size": "0", "hide-user-data-from-log": "no",
    "key-memory-histograms": "no", "lookahead": "16", "max-new-connections-per-cycle": "10",
    "max-new-tls-connections-per-cycle": "1", "stream-idmp-duration": "100",
    "stream-idmp-maxsize": "100", "cluster-announce-human-nodename": "",
    "cluster-compatibility-sample-ratio": "0",
    "cluster-slot-migration-handoff-max-lag-bytes": "1048576",
    "cluster-slot-migration-write-pause-timeout": "10000", "cluster-slot-stats-enabled": "no",
    "tls-auth-clients-user": "off",
}
ALIASES = {  # Redis 7.0's aliases, and Redis 8's dashed names of the cpulist directives
    "slaveof": "replicaof", "slave-serve-stale-data": "replica-serve-stale-data",
    "slave-read-only": "replica-read-only", "slave-priority": "replica-priority",
    "slave-announce-ip": "replica-announce-ip", "slave-announce-port": "replica-announce-port",
    "repl-ping-slave-period": "repl-ping-replica-period",
    "min-slaves-to-write": "min-replicas-to-write", "min-slaves-max-lag": "min-replicas-max-lag",
    "cluster-slave-no-failover": "cluster-replica-no-failover",
    "slave-lazy-flush": "replica-lazy-flush", "slave-ignore-maxmemory": "replica-ignore-maxmemory",
    "cluster-slave-validity-factor": "cluster-replica-validity-factor",
    "list-max-ziplist-size": "list-max-listpack-size", "lua-time-limit": "busy-reply-threshold",
    "hash-max-ziplist-entries": "hash-max-listpack-entries",
    "zset-max-ziplist-entries": "zset-max-listpack-entries",
    "hash-max-ziplist-value": "hash-max-listpack-value",
    "zset-max-ziplist-value": "zset-max-listpack-value",
    "server-cpulist": "server_cpulist", "bio-cpulist": "bio_cpulist",
    "aof-rewrite-cpulist": "aof_rewrite_cpulist", "bgsave-cpulist": "bgsave_cpulist",
}
REDIS_DEFAULTS = {
    **{k: v for k, v in REDIS7_DEFAULTS.items() if k not in ALIASES},
    # hidden in Redis 7.0 (CONFIG GET * does not list them)
    "rdb-key-save-delay": "0", "key-load-delay": "0",
    "loading-process-events-interval-bytes": "2097152", "use-exit-on-panic": "no",
    "watchdog-period": "0", "lua-enable-deprecated-api": "no",
    **REDIS8_DEFAULTS,
    "sync-log-file": "", "sync-log-max-size": str(64 * 1024 * 1024), "sync-log-max-files": "8",
    "repl-full-sync-spill-threshold": "0", "repl-sync-max-bandwidth": "0",
    "repl-full-sync-max-concurrent": "0", "repl-full-sync-resume-window": "60",
    "repl-full-sync-resume-tail": str(32 * 1024 * 1024),
}
# Redis 7.0's config.c flags (IMMUTABLE_CONFIG, PROTECTED_CONFIG, HIDDEN_CONFIG), plus the
# Redis 8 names, hidden because Redis 7.0 has no such config.
IMMUTABLE = {
    "aclfile", "always-show-logo", "aof_rewrite_cpulist", "appenddirname", "appendfilename",
    "bgsave_cpulist", "bio_cpulist", "cluster-config-file", "cluster-enabled", "cluster-port",
    "daemonize", "databases", "disable-thp", "enable-debug-command", "enable-module-command",
    "enable-protected-configs", "io-threads", "io-threads-do-reads", "logfile", "pidfile",
    "rdbchecksum", "replicaof", "server_cpulist", "set-proc-title", "socket-mark-id",
    "supervised", "syslog-enabled", "syslog-facility", "syslog-ident", "tcp-backlog",
    "unixsocket", "unixsocketperm", "lua-enable-deprecated-api"}
PROTECTED = {"dir", "dbfilename"}
HIDDEN = {"key-load-delay", "loading-process-events-interval-bytes", "rdb-key-save-delay",
          "use-exit-on-panic", "watchdog-period", "lua-enable-deprecated-api"} | set(REDIS8_DEFAULTS) - {
              "replica-full-sync-buffer-limit"}


def test_names_are_the_supported_list() -> None:
    assert Config().names() == [d.name for d in DIRECTIVES]
    assert set(Config().names()) == set(REDIS_DEFAULTS) | {"dir", "port"}


def test_defaults_format_like_redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = Config()
    for name, expected in REDIS_DEFAULTS.items():
        assert cfg.get_formatted(name) == expected, name
    assert cfg.get_formatted("dir") == os.getcwd()


def test_default_typed_values() -> None:
    cfg = Config()
    assert cfg.port == 6379
    assert cfg.bind == ["*", "-::*"]
    assert cfg.save == [(3600, 1), (300, 100), (60, 10000)]
    assert cfg.client_output_buffer_limit == {
        "normal": (0, 0, 0),
        "replica": (256 * 1024**2, 64 * 1024**2, 60),
        "pubsub": (32 * 1024**2, 8 * 1024**2, 60),
    }
    assert cfg.replicaof is None
    assert cfg.maxclients == 10000
    assert cfg.proto_max_bulk_len == 512 * 1024**2
    assert cfg.repl_backlog_size == 1024**2
    assert cfg.protected_mode is True and cfg.daemonize is False
    assert cfg.sync_log_max_size == 64 * 1024**2
    assert cfg.source_file is None


def test_flags_match_redis() -> None:
    assert {d.name for d in DIRECTIVES if not d.mutable} == IMMUTABLE
    assert {d.name for d in DIRECTIVES if d.protected} == PROTECTED
    assert {d.name for d in DIRECTIVES if d.hidden} == HIDDEN
    assert {d.name for d in DIRECTIVES if d.sensitive} == {"requirepass", "masterauth",
                                                           "masteruser"}
    assert {d.name for d in DIRECTIVES if d.deny_loading} == {"dir", "appendonly",
                                                              "repl-diskless-load"}
    assert {a: d.name for d in DIRECTIVES for a in d.aliases} == ALIASES


def test_lookup() -> None:
    d = lookup("Slave-Read-Only")
    assert d is not None and d.name == "replica-read-only" and d.attr == "replica_read_only"
    assert lookup("nope") is None


def test_config_is_read_only() -> None:
    cfg = Config()
    with pytest.raises(AttributeError):
        cfg.port = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _ = cfg.no_such_thing


def test_get() -> None:
    cfg = Config()
    assert cfg.get("port") == 6379
    assert cfg.get("PORT") == 6379
    assert cfg.get("slave-priority") == 100
    with pytest.raises(KeyError):
        cfg.get("nope")


# ---------------------------------------------------------------------------------------------
# loading files
# ---------------------------------------------------------------------------------------------


def test_load_basic_syntax(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, (
        "# a comment\n"
        "\n"
        "   # indented comment\n"
        "PORT 7000\r\n"                      # CRLF and upper-case directive
        "  Repl-Backlog-Size 64KB  \n"
        "requirepass \"s3cr et\"\n"
        "masterauth 'it\\'s'\n"
        "protected-mode NO\n"
        "loglevel WARNING\n"
        "maxmemory-policy AllKeys-LRU\n"
        "timeout 30\n"
        "maxmemory 1g\n"
        "proto-max-bulk-len 1mb\n"
        "client-query-buffer-limit 2MB\n"
        "repl-rdb-channel no\n"
        "replica-full-sync-buffer-limit 8mb\n"
        "rdb-key-save-delay -10\n"
    ))
    assert cfg.port == 7000
    assert cfg.repl_backlog_size == 64 * 1024
    assert cfg.requirepass == "s3cr et"
    assert cfg.masterauth == "it's"
    assert cfg.protected_mode is False
    assert cfg.loglevel == "warning"
    assert cfg.maxmemory_policy == "allkeys-lru"
    assert cfg.timeout == 30
    assert cfg.maxmemory == 1000**3
    assert cfg.proto_max_bulk_len == 1024**2
    assert cfg.client_query_buffer_limit == 2 * 1024**2
    assert cfg.repl_rdb_channel is False
    assert cfg.replica_full_sync_buffer_limit == 8 * 1024**2
    assert cfg.rdb_key_save_delay == -10
    assert cfg.source_file == str((tmp_path / "test.conf").resolve())
    assert cfg.config_get(["repl-backlog-size", "maxmemory"]) == [
        ("repl-backlog-size", "65536"), ("maxmemory", "1000000000")]


def test_last_line_wins(tmp_path: Path) -> None:
    assert load_text(tmp_path, "port 1\nport 2\n").port == 2


def test_save_lines_accumulate(tmp_path: Path) -> None:
    assert load_text(tmp_path, "save 900 1\nsave 300 10\n").save == [(900, 1), (300, 10)]
    assert load_text(tmp_path, "save 900 1 300 10\nsave 60 5\n").save == \
        [(900, 1), (300, 10), (60, 5)]
    assert load_text(tmp_path, 'save "900 1 300 10"\n').save == [(900, 1), (300, 10)]
    assert load_text(tmp_path, 'save ""\n').save == []
    assert load_text(tmp_path, "save 900 1\nsave ''\nsave 60 5\n").save == [(60, 5)]
    assert load_text(tmp_path, "port 1\n").save == [(3600, 1), (300, 100), (60, 10000)]
    cfg = load_text(tmp_path, "save 900 1\nsave 300 10\n")
    assert cfg.config_get(["save"]) == [("save", "900 1 300 10")]


def test_client_output_buffer_limit_lines(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, (
        "client-output-buffer-limit slave 512mb 128mb 120\n"
        "client-output-buffer-limit PUBSUB 1k 1kb 0\n"
    ))
    assert cfg.client_output_buffer_limit == {
        "normal": (0, 0, 0),
        "replica": (512 * 1024**2, 128 * 1024**2, 120),
        "pubsub": (1000, 1024, 0),
    }
    assert cfg.get_formatted("client-output-buffer-limit") == (
        "normal 0 0 0 slave 536870912 134217728 120 pubsub 1000 1024 0")
    cfg = load_text(tmp_path, 'client-output-buffer-limit "replica 1mb 1mb 1 normal 1 2 3"\n')
    assert cfg.client_output_buffer_limit["replica"] == (1024**2, 1024**2, 1)
    assert cfg.client_output_buffer_limit["normal"] == (1, 2, 3)


def test_bind_and_replicaof(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "bind 127.0.0.1 -::1\nreplicaof 10.0.0.1 6380\n")
    assert cfg.bind == ["127.0.0.1", "-::1"]
    assert cfg.replicaof == ("10.0.0.1", 6380)
    assert cfg.config_get(["bind", "replicaof", "slaveof"]) == [
        ("bind", "127.0.0.1 -::1"), ("replicaof", "10.0.0.1 6380"),
        ("slaveof", "10.0.0.1 6380")]
    assert load_text(tmp_path, 'bind ""\n').bind == []
    assert load_text(tmp_path, 'replicaof "h 1"\n').replicaof == ("h", 1)
    assert load_text(tmp_path, "slaveof h 2\nreplicaof NO ONE\n").replicaof is None


@pytest.mark.parametrize(("alias", "canonical"), sorted(ALIASES.items()))
def test_aliases_in_files(tmp_path: Path, alias: str, canonical: str) -> None:
    d = lookup(canonical)
    assert d is not None
    value = {"replicaof": "h 7", "replica-announce-ip": "10.1.2.3"}.get(canonical)
    if value is None:
        value = ("no" if d.default == "yes" else "yes") if d.kind == "bool" else "7"
    cfg = load_text(tmp_path, f"{alias} {value}\n")
    expected = Config().get(canonical)
    assert cfg.get(canonical) != expected
    assert cfg.get(canonical) == cfg.get(alias)
    assert cfg.get_formatted(canonical) == value


def test_dir_is_absolute_and_chdir_like(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_text(tmp_path, "dir ./var/master\n")
    assert cfg.dir == str(tmp_path / "var" / "master")          # need not exist at load
    cfg = load_text(tmp_path, "dir a\ndir b\n")                   # Redis chdir()s each time
    assert cfg.dir == str(tmp_path / "a" / "b")
    cfg = load_text(tmp_path, "dir /tmp\ndbfilename x.rdb\n")
    assert cfg.get_formatted("dir") == "/tmp"
    assert cfg.in_dir(cfg.dbfilename) == "/tmp/x.rdb"
    assert cfg.in_dir("") == ""


def test_hz_is_clamped(tmp_path: Path) -> None:
    assert load_text(tmp_path, "hz 1000\n").hz == 500
    assert load_text(tmp_path, "hz 0\n").hz == 1


def test_backlog_size_floor_only_on_config_set(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "repl-backlog-size 1\n")
    assert cfg.repl_backlog_size == 1                        # Redis keeps it at load time
    cfg.set("repl-backlog-size", "100")
    assert cfg.repl_backlog_size == 16384                    # ...and floors it on CONFIG SET


# -- include --


def test_include_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "common.conf", "port 7001\ntimeout 5\n")
    main = write(tmp_path / "sub" / "main.conf", "include common.conf\nport 7002\n")
    cfg = Config.load(main)
    assert (cfg.port, cfg.timeout) == (7002, 5)


def test_include_relative_to_including_file(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "conf" / "base.conf", "port 7003\nsave 10 1\n")
    main = write(tmp_path / "conf" / "main.conf", "save 20 2\ninclude base.conf\ntimeout 9\n")
    cfg = Config.load(main)
    assert (cfg.port, cfg.timeout) == (7003, 9)
    assert cfg.save == [(20, 2), (10, 1)]                 # save accumulates across includes


def test_include_cwd_wins_over_including_dir(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "x.conf", "port 1111\n")
    write(tmp_path / "conf" / "x.conf", "port 2222\n")
    assert Config.load(write(tmp_path / "conf" / "m.conf", "include x.conf\n")).port == 1111


def test_include_absolute_and_wildcard(tmp_path: Path) -> None:
    write(tmp_path / "d" / "20-b.conf", "port 7020\n")
    write(tmp_path / "d" / "10-a.conf", "port 7010\ntimeout 3\n")
    main = write(tmp_path / "m.conf", f"include {tmp_path}/d/*.conf\n")
    cfg = Config.load(main)
    assert (cfg.port, cfg.timeout) == (7020, 3)           # alphabetical order
    assert Config.load(write(tmp_path / "m2.conf", f"include {tmp_path}/none/*.conf\n")).port \
        == 6379                                           # an empty wildcard is not an error


def test_include_errors(tmp_path: Path) -> None:
    err = load_error(tmp_path, "port 1\ninclude nowhere.conf\n")
    assert str(err).startswith(f"{tmp_path / 'test.conf'}:2: can't open config file")
    assert "No such file or directory" in str(err)
    err = load_error(tmp_path, "include a b\n")
    assert err.reason == "Bad directive or wrong number of arguments"
    write(tmp_path / "loop2.conf", f"include {tmp_path}/loop1.conf\n")
    err = load_error(tmp_path, f"include {tmp_path}/loop2.conf\n", name="loop1.conf")
    assert "include loop" in str(err)
    assert err.path == str(tmp_path / "loop2.conf") and err.lineno == 1


def test_error_in_included_file_names_that_file(tmp_path: Path) -> None:
    inc = write(tmp_path / "inc.conf", "\n\nport nope\n")
    err = load_error(tmp_path, f"include {inc}\n")
    assert str(err) == f"{inc}:3: argument couldn't be parsed into an integer"


def test_rename_command_lines_are_kept_in_order(tmp_path: Path) -> None:
    """``rename-command`` lines are read (in order, with where they were) for the command
    table to apply at start (pyrepl.commands.table.apply_renames, tested end to end in
    tests/e2e/test_process_management.py)."""
    path = write(tmp_path / "r.conf", "port 7000\nrename-command FLUSHALL ''\n"
                                      "rename-command get fetch\n")
    cfg = Config.load(str(path))
    assert [(r.old, r.new, r.lineno) for r in cfg.renames] == [("FLUSHALL", "", 2),
                                                               ("get", "fetch", 3)]


# -- errors --


# A file whose line 1 is bad: the line and the reason its error gives.
LINE_ERRORS: dict[str, str] = {
    "rename-command FLUSHALL\n": "Bad directive or wrong number of arguments",
    "rename-command FLUSHALL a b\n": "Bad directive or wrong number of arguments",
    "port\n": "wrong number of arguments",
    "port 1 2\n": "wrong number of arguments",
    "port 6379 # inline comments are not comments\n": "wrong number of arguments",
    "port abc\n": "argument couldn't be parsed into an integer",
    "port +1\n": "argument couldn't be parsed into an integer",
    "port 70000\n": "argument must be between 0 and 65535 inclusive",
    "port -1\n": "argument must be between 0 and 65535 inclusive",
    "databases 0\n": "argument must be between 1 and 2147483647 inclusive",
    "maxclients 0\n": "argument must be between 1 and 4294967295 inclusive",
    "maxclients -1\n": "argument must be between 1 and 4294967295 inclusive",
    "repl-timeout 0\n": "argument must be between 1 and 2147483647 inclusive",
    "active-expire-effort 11\n": "argument must be between 1 and 10 inclusive",
    "protected-mode maybe\n": "argument must be 'yes' or 'no'",
    "protected-mode 1\n": "argument must be 'yes' or 'no'",
    "maxmemory 10x\n": "argument must be a memory value",
    "maxmemory -1\n": "argument must be a memory value",
    "repl-backlog-size 0\n": "argument must be between 1 and 9223372036854775807 inclusive",
    "proto-max-bulk-len 1000\n":
        "argument must be between 1048576 and 9223372036854775807 inclusive",
    "client-query-buffer-limit 1kb\n":
        "argument must be between 1048576 and 9223372036854775807 inclusive",
    "loglevel loud\n": "argument(s) must be one of the following: debug, verbose, notice, warning",
    "maxmemory-policy lru\n":
        "argument(s) must be one of the following: volatile-lru, volatile-lfu, "
        "volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction",
    "repl-diskless-load flushdb\n":
        "argument(s) must be one of the following: disabled, on-empty-db, swapdb",
    "save 900\n": "Invalid save parameters",
    "save 0 1\n": "Invalid save parameters",
    "save 10 -1\n": "Invalid save parameters",
    "save ten 1\n": "Invalid save parameters",
    "client-output-buffer-limit x\n": "Wrong number of arguments in buffer limit configuration.",
    "client-output-buffer-limit ''\n": "Wrong number of arguments in buffer limit configuration.",
    "client-output-buffer-limit master 1 2 3\n":
        "Invalid client class specified in buffer limit configuration.",
    "client-output-buffer-limit normal 1 2 -3\n":
        "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
    "client-output-buffer-limit normal 1x 2 3\n":
        "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
    "replicaof onlyhost\n": "wrong number of arguments",
    "replicaof h 65536\n": "Invalid master port",
    "replicaof h port\n": "Invalid master port",
    "bind " + " ".join(f"10.0.0.{i}" for i in range(17)) + "\n":
        "Too many bind addresses specified.",
    "dbfilename dir/dump.rdb\n": "dbfilename can't be a path, just a filename",
    'requirepass "abc\n': "Unbalanced quotes in configuration line",
    "requirepass 'a'b\n": "Unbalanced quotes in configuration line",
}


@pytest.mark.parametrize(
    ("text", "lineno", "reason"),
    [("port 1\n\nfoo bar\n", 3, "Bad directive or wrong number of arguments"),
     *((text, 1, reason) for text, reason in LINE_ERRORS.items())],
)
def test_file_errors(tmp_path: Path, text: str, lineno: int, reason: str) -> None:
    err = load_error(tmp_path, text)
    path = str(tmp_path / "test.conf")
    assert str(err) == f"{path}:{lineno}: {reason}"
    assert (err.path, err.lineno, err.reason) == (path, lineno, reason)
    assert err.line == text.split("\n")[lineno - 1].strip()


def test_daemonize_and_appendonly_accepted(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "daemonize yes\nappendonly yes\n")
    assert cfg.daemonize is True and cfg.appendonly is True
    assert not lookup("appendonly").noop and not lookup("daemonize").noop   # (AOF: pyrepl.aof)
    assert load_text(tmp_path, "cluster-enabled yes\n").cluster_enabled is True  # (pyrepl.cluster)
    err = load_error(tmp_path, "cluster-enabled yes\nreplicaof 127.0.0.1 6379\n")
    assert str(err) == "replicaof directive not allowed in cluster mode"   # (as Redis refuses it)
    assert load_text(tmp_path, "tls-port 6380\n").tls_port == 6380   # (TLS: pyrepl.net.tls)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Config.load(str(tmp_path / "absent.conf"))
    assert "can't open config file" in str(info.value)
    assert "No such file or directory" in str(info.value)


def test_shipped_conf_files_load() -> None:
    master = Config.load(str(REPO / "conf" / "master.conf"))
    replica = Config.load(str(REPO / "conf" / "replica.conf"))
    assert master.port == 6380 and master.replicaof is None
    assert replica.port == 6381 and replica.replicaof == ("127.0.0.1", 6380)
    assert master.dir.endswith(os.path.join("var", "master"))
    assert replica.dir.endswith(os.path.join("var", "replica"))
    assert master.save == [(3600, 1), (300, 100), (60, 10000)]


@pytest.mark.parametrize("name", ["master.conf", "replica.conf"])
def test_shipped_conf_files_show_every_directive(name: str) -> None:
    """Every directive with an effect in pyrepl is shown (those accepted with no effect are
    listed in the README's table)."""
    shown = set()
    for raw in (REPO / "conf" / name).read_text().splitlines():
        argv = split_args(raw.strip())
        if argv and not raw.strip().startswith("#"):
            shown.add(argv[0].lower())
    assert shown >= {d.name for d in DIRECTIVES if not d.noop and not d.hidden}


# ---------------------------------------------------------------------------------------------
# overrides and from_args
# ---------------------------------------------------------------------------------------------


def test_overrides_apply_after_file(tmp_path: Path) -> None:
    path = write(tmp_path / "a.conf", "port 7000\ntimeout 5\nsave 60 1\n")
    cfg = Config.load(path, [("port", ["7001"]), ("replicaof", ["127.0.0.1 7000"]),
                             ("SAVE", ["30 2"]), ("client-output-buffer-limit",
                                                  ["replica", "1mb", "1mb", "0"])])
    assert (cfg.port, cfg.timeout) == (7001, 5)
    assert cfg.replicaof == ("127.0.0.1", 7000)
    assert cfg.save == [(60, 1), (30, 2)]              # Redis: command-line saves accumulate too
    assert cfg.client_output_buffer_limit["replica"] == (1024**2, 1024**2, 0)
    assert Config.load(path, [("save", [""])]).save == []
    assert Config.load(None, [("port", ["1"])]).port == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([("port", ["abc"])], 'command line: --port "abc": argument couldn\'t be parsed into an '
                              "integer"),
        ([("nope", ["1"])], 'command line: --nope "1": Bad directive or wrong number of '
                            "arguments"),
        ([("port", [])], "command line: --port: wrong number of arguments"),
        ([("save", ['1 "2'])], 'command line: --save "1 \\"2": Unbalanced quotes in '
                               "configuration line"),
    ],
)
def test_override_errors(overrides: list[tuple[str, list[str]]], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.load(None, overrides)
    assert str(info.value) == message
    assert info.value.lineno is None


def test_from_args(tmp_path: Path) -> None:
    path = write(tmp_path / "r.conf", "port 7000\nreplicaof 127.0.0.1 6380\n")
    cfg = Config.from_args([path, "--port", "7001", "--replicaof", "127.0.0.1 7000",
                            "--requirepass", "a b", "--save"])
    assert cfg.source_file == str(Path(path).resolve())
    assert cfg.port == 7001
    assert cfg.replicaof == ("127.0.0.1", 7000)
    assert cfg.requirepass == "a b"
    assert cfg.save == []


def test_from_args_redis_quirks() -> None:
    cfg = Config.from_args(["--save", "--port", "7002"])       # --save followed by --x
    assert cfg.save == [] and cfg.port == 7002
    cfg = Config.from_args(["--port 7003", "--bind", "127.0.0.1", "::1"])   # name+value in one
    assert cfg.port == 7003 and cfg.bind == ["127.0.0.1", "::1"]
    cfg = Config.from_args(["--masterauth", "--starts-with-dashes"])
    assert cfg.masterauth == "--starts-with-dashes"
    cfg = Config.from_args(["--save", "900", "1", "--save", "60", "5"])
    assert cfg.save == [(900, 1), (60, 5)]
    cfg = Config.from_args([])
    assert cfg.port == 6379 and cfg.source_file is None


def test_from_args_errors() -> None:
    with pytest.raises(ConfigError, match="Bad directive"):
        Config.from_args(["--foo", "bar"])
    with pytest.raises(ConfigError, match="wrong number of arguments"):
        Config.from_args(["--port", "1", "2"])
    with pytest.raises(ConfigError, match="stdin"):
        Config.from_args(["-"])
    with pytest.raises(ConfigError, match="can't open config file"):
        Config.from_args(["/nonexistent/pyrepl.conf"])


# ---------------------------------------------------------------------------------------------
# CONFIG GET
# ---------------------------------------------------------------------------------------------


def test_config_get_star() -> None:
    cfg = Config()
    got = cfg.config_get(["*"])
    keys = [k for k, _ in got]
    redis8_names = {"server-cpulist", "bio-cpulist", "aof-rewrite-cpulist", "bgsave-cpulist"}
    expected = [key for d in DIRECTIVES if not d.hidden for key in (d.name, *d.aliases)
                if key not in redis8_names]
    assert keys == expected
    assert len(keys) == len(set(keys))
    assert dict(got)["slave-read-only"] == dict(got)["replica-read-only"] == "yes"


def test_config_get_patterns() -> None:
    cfg = Config()
    assert cfg.config_get(["PORT"]) == [("PORT", "6379")]
    assert cfg.config_get(["port", "PORT", "Port"]) == [("port", "6379")]
    assert cfg.config_get(["nope"]) == []
    assert cfg.config_get(["nope*"]) == []
    assert cfg.config_get(["[mp]ort"]) == [("port", "6379")]
    assert cfg.config_get(["?ort"]) == [("port", "6379")]
    assert [k for k, _ in cfg.config_get(["REPL-BACKLOG-*"])] == [
        "repl-backlog-size", "repl-backlog-ttl"]
    assert sorted(k for k, _ in cfg.config_get(["slave*"])) == sorted([
        "slaveof", "slave-serve-stale-data", "slave-read-only", "slave-priority",
        "slave-announce-ip", "slave-announce-port", "slave-ignore-maxmemory",
        "slave-lazy-flush"])
    assert sorted(k for k, _ in cfg.config_get(["port", "*port"])) == sorted([
        "port", "replica-announce-port", "slave-announce-port", "cluster-port",
        "cluster-announce-port", "cluster-announce-bus-port", "cluster-announce-tls-port",
        "tls-port"])
    assert [k for k, _ in cfg.config_get(["maxmemory*", "maxmemory"])] == [
        "maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity",
        "maxmemory-clients"]


def test_config_get_hidden_needs_exact_name() -> None:
    cfg = Config()
    assert cfg.config_get(["rdb-key*"]) == []
    assert cfg.config_get(["rdb-key-save-delay"]) == [("rdb-key-save-delay", "0")]
    assert cfg.config_get(["repl-rdb-channel"]) == [("repl-rdb-channel", "yes")]
    assert "repl-rdb-channel" not in dict(cfg.config_get(["repl-*"]))


# ---------------------------------------------------------------------------------------------
# CONFIG SET
# ---------------------------------------------------------------------------------------------


def set_error(cfg: Config, *pairs: tuple[str, str], force: bool = False) -> str:
    with pytest.raises(ConfigError) as info:
        cfg.set_many(list(pairs), force=force)
    return str(info.value)


def failed(name: str, reason: str) -> str:
    return f"ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("port", "abc", "argument couldn't be parsed into an integer"),
        ("port", "007", "argument couldn't be parsed into an integer"),
        ("port", "70000", "argument must be between 0 and 65535 inclusive"),
        ("protected-mode", "maybe", "argument must be 'yes' or 'no'"),
        ("loglevel", "loud",
         "argument(s) must be one of the following: debug, verbose, notice, warning"),
        ("maxmemory", "1x", "argument must be a memory value"),
        ("maxmemory", "-1", "argument must be a memory value"),
        ("repl-backlog-size", "0", "argument must be between 1 and 9223372036854775807 "
                                   "inclusive"),
        ("repl-backlog-size", "99999999999999999999",
         "argument must be between 1 and 9223372036854775807 inclusive"),
        ("proto-max-bulk-len", "1000",
         "argument must be between 1048576 and 9223372036854775807 inclusive"),
        ("maxclients", "0", "argument must be between 1 and 4294967295 inclusive"),
        ("hz", "-1", "argument must be between 0 and 2147483647 inclusive"),
        ("save", "1 2 3", "Invalid save parameters"),
        ("save", "a b", "Invalid save parameters"),
        ("save", "100  10", "Invalid save parameters"),        # split on single spaces
        ("client-output-buffer-limit", "master 1 2 3",
         "Invalid client class specified in buffer limit configuration."),
        ("client-output-buffer-limit", "normal 1 2",
         "Wrong number of arguments in buffer limit configuration."),
        ("client-output-buffer-limit", "normal x 2 3",
         "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
        ("repl-diskless-load", "foo",
         "argument(s) must be one of the following: disabled, on-empty-db, swapdb"),
    ],
)
def test_config_set_validation(name: str, value: str, reason: str) -> None:
    cfg = Config()
    before = cfg.config_get(["*"])
    err = set_error(cfg, (name, value))
    assert err == failed(name, reason)
    assert cfg.config_get(["*"]) == before


def test_config_set_value_error_names_the_lowercased_key_looked_up() -> None:
    cfg = Config()
    assert set_error(cfg, ("SLAVE-PRIORITY", "x")) == failed(
        "slave-priority", "argument couldn't be parsed into an integer")
    assert set_error(cfg, ("Replica-Priority", "x")) == failed(
        "replica-priority", "argument couldn't be parsed into an integer")


@pytest.mark.parametrize("name", sorted(IMMUTABLE | PROTECTED))
def test_config_set_refuses_immutable_and_protected(name: str) -> None:
    cfg = Config()
    reason = "can't set immutable config" if name in IMMUTABLE else "can't set protected config"
    assert set_error(cfg, (name, "whatever")) == failed(name, reason)
    upper = name.upper()
    assert set_error(cfg, (upper, "whatever")) == failed(upper, reason)   # as typed


def test_config_set_unknown_and_duplicates() -> None:
    cfg = Config()
    assert set_error(cfg, ("foo", "bar")) == \
        "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
    assert set_error(cfg, ("port", "1"), ("port", "2")) == failed("port", "duplicate parameter")
    assert set_error(cfg, ("port", "1"), ("PORT", "2")) == failed("PORT", "duplicate parameter")
    assert set_error(cfg, ("timeout", "1"), ("nope", "1"), ("databases", "1")) == \
        "ERR Unknown option or number of arguments for CONFIG SET - 'nope'"
    assert set_error(cfg, ("databases", "1"), ("nope", "1")) == \
        failed("databases", "can't set immutable config")
    assert cfg.timeout == 0


def test_config_set_alias_and_directive_together_last_wins() -> None:
    cfg = Config()
    seen: list[tuple[str, object]] = []
    cfg.on_change(lambda name, value: seen.append((name, value)))
    cfg.set_many([("replica-read-only", "no"), ("slave-read-only", "yes")])
    assert cfg.replica_read_only is True and seen == []          # net effect: no change
    cfg.set_many([("min-replicas-to-write", "2"), ("min-slaves-to-write", "3")])
    assert cfg.min_replicas_to_write == 3
    assert seen == [("min-replicas-to-write", 3)]                # one apply, final value
    assert set_error(cfg, ("min-replicas-to-write", "4"), ("min-slaves-to-write", "x")) == \
        failed("min-slaves-to-write", "argument couldn't be parsed into an integer")
    assert cfg.min_replicas_to_write == 3


def test_config_set_values() -> None:
    cfg = Config()
    cfg.set("port", "6390")
    cfg.set("Slave-Read-Only", "NO")
    cfg.set("maxmemory", "10MB")
    cfg.set("loglevel", "DEBUG")
    cfg.set("requirepass", "")
    cfg.set("replica-announce-ip", "10.0.0.9")
    cfg.set("hz", "1000")
    cfg.set("maxmemory", "1GB")
    assert cfg.port == 6390
    assert cfg.replica_read_only is False
    assert cfg.loglevel == "debug"
    assert cfg.maxmemory == 1024**3
    assert cfg.hz == 500
    assert cfg.config_get(["slave-read-only", "maxmemory", "replica-announce-ip", "hz"]) == [
        ("slave-read-only", "no"), ("maxmemory", "1073741824"),
        ("replica-announce-ip", "10.0.0.9"), ("hz", "500")]


def test_config_set_multi_arg_directives() -> None:
    cfg = Config()
    old_save = cfg.save
    cfg.set("save", "100 10 50 5")
    assert cfg.save == [(100, 10), (50, 5)]
    assert old_save == [(3600, 1), (300, 100), (60, 10000)]   # replaced, not mutated
    cfg.set("save", "")
    assert cfg.save == [] and cfg.get_formatted("save") == ""
    cfg.set("client-output-buffer-limit", "replica 1mb 2mb 3")
    assert cfg.get_formatted("client-output-buffer-limit") == (
        "normal 0 0 0 slave 1048576 2097152 3 pubsub 33554432 8388608 60")
    cfg.set("client-output-buffer-limit", "")                   # zero classes: no change
    assert cfg.client_output_buffer_limit["replica"] == (1048576, 2097152, 3)
    cfg.set("bind", "127.0.0.1 -::1")
    assert cfg.bind == ["127.0.0.1", "-::1"]
    cfg.set("bind", "")
    assert cfg.bind == [] and cfg.get_formatted("bind") == ""


def test_config_set_many_is_atomic() -> None:
    cfg = Config()
    seen: list[tuple[str, object]] = []
    cfg.on_change(lambda name, value: seen.append((name, value)))
    err = set_error(cfg, ("timeout", "5"), ("maxmemory", "1mb"), ("port", "nope"))
    assert err == failed("port", "argument couldn't be parsed into an integer")
    assert (cfg.timeout, cfg.maxmemory, cfg.port) == (0, 0, 6379)
    assert seen == []
    cfg.set_many([("timeout", "5"), ("maxmemory", "1mb"), ("port", "6390")])
    assert (cfg.timeout, cfg.maxmemory, cfg.port) == (5, 1024**2, 6390)
    assert seen == [("timeout", 5), ("maxmemory", 1024**2), ("port", 6390)]


def test_force_bypasses_immutability_not_validation(tmp_path: Path) -> None:
    cfg = Config()
    cfg.set("replicaof", "127.0.0.1 6380", force=True)
    assert cfg.replicaof == ("127.0.0.1", 6380)
    assert cfg.config_get(["slaveof"]) == [("slaveof", "127.0.0.1 6380")]
    cfg.set("replicaof", "no one", force=True)
    assert cfg.replicaof is None
    assert set_error(cfg, ("replicaof", "h 99999"), force=True) == \
        failed("replicaof", "Invalid master port")
    assert set_error(cfg, ("dbfilename", "a/b"), force=True) == \
        failed("dbfilename", "dbfilename can't be a path, just a filename")
    cfg.set("dbfilename", "other.rdb", force=True)
    assert cfg.dbfilename == "other.rdb"


def test_config_set_dir(tmp_path: Path) -> None:
    cfg = Config()
    (tmp_path / "sub").mkdir()
    (tmp_path / "file").write_text("")
    cfg.set("dir", str(tmp_path), force=True)
    assert cfg.dir == str(tmp_path)
    cfg.set("dir", "sub", force=True)                            # relative to the current dir
    assert cfg.dir == str(tmp_path / "sub")
    assert set_error(cfg, ("dir", str(tmp_path / "missing")), force=True) == \
        failed("dir", "No such file or directory")
    assert set_error(cfg, ("dir", str(tmp_path / "file")), force=True) == \
        failed("dir", "Not a directory")
    assert cfg.dir == str(tmp_path / "sub")


def test_repl_backlog_size_floor_and_hz_clamp_on_set() -> None:
    cfg = Config()
    cfg.set("repl-backlog-size", "1")
    assert cfg.repl_backlog_size == 16384
    cfg.set("repl-backlog-size", "64mb")
    assert cfg.repl_backlog_size == 64 * 1024**2
    cfg.set("hz", "0")
    assert cfg.hz == 1


def test_on_change_only_for_real_changes() -> None:
    cfg = Config()
    seen: list[tuple[str, object]] = []
    cfg.on_change(lambda name, value: seen.append((name, value)))
    cfg.set("port", "6379")                 # unchanged
    cfg.set("hz", "500")
    cfg.set("hz", "1000")                   # clamps to the same 500
    cfg.set("slave-priority", "5")          # canonical name reported
    cfg.set("save", "10 1")
    assert seen == [("hz", 500), ("replica-priority", 5), ("save", [(10, 1)])]


def test_on_change_sees_all_new_values() -> None:
    cfg = Config()
    snapshots: list[tuple[int, int]] = []
    cfg.on_change(lambda name, value: snapshots.append((cfg.min_replicas_to_write,
                                                        cfg.min_replicas_max_lag)))
    cfg.set_many([("min-replicas-to-write", "2"), ("min-replicas-max-lag", "3")])
    assert snapshots == [(2, 3), (2, 3)]


def test_on_change_veto_rolls_back() -> None:
    cfg = Config()
    calls: list[tuple[str, object]] = []

    def apply(name: str, value: object) -> None:
        calls.append((name, value))
        if name == "port" and value == 1:
            raise ConfigError("Unable to listen on this port. Check server logs.")

    cfg.on_change(apply)
    err = set_error(cfg, ("timeout", "7"), ("port", "1"), ("maxmemory", "5"))
    assert err == failed("port", "Unable to listen on this port. Check server logs.")
    assert (cfg.timeout, cfg.port, cfg.maxmemory) == (0, 6379, 0)
    # timeout applied, port vetoed; then both are re-applied with their old values.
    assert calls == [("timeout", 7), ("port", 1), ("timeout", 0), ("port", 6379)]


def test_every_numeric_directive_enforces_its_bounds() -> None:
    checked = 0
    for d in DIRECTIVES:
        if d.kind not in ("int", "memory") or not d.mutable or d.protected or d.check:
            continue
        cfg = Config()
        for value in (d.lo, d.hi):
            cfg.set(d.name, str(value))
            expected = value
            if d.name == "hz":
                expected = max(1, min(500, value))
            if d.name == "repl-backlog-size":
                expected = max(value, 16384)
            assert cfg.get(d.name) == expected, d.name
        message = f"argument must be between {d.lo} and {d.hi} inclusive"
        if d.hi < LLONG_MAX:
            with pytest.raises(ConfigError) as info:
                cfg.set(d.name, str(d.hi + 1))
            assert info.value.reason == message, d.name
        if d.lo - 1 >= (0 if d.kind == "memory" else -(2**63)):
            with pytest.raises(ConfigError) as info:
                cfg.set(d.name, str(d.lo - 1))
            assert info.value.reason == message, d.name
        checked += 1
    assert checked >= 20


def test_every_bool_directive_accepts_yes_no_any_case() -> None:
    for d in DIRECTIVES:
        if d.kind != "bool" or not d.mutable:
            continue
        cfg = Config()
        default = cfg.get(d.name)
        if d.check is None and d.name != "key-memory-histograms":   # (start-time only: on)
            cfg.set(d.name, "YES" if not default else "No")
            assert cfg.get(d.name) is (not default)
        with pytest.raises(ConfigError, match="'yes' or 'no'"):
            cfg.set(d.name, "1")


def test_int_max_constants() -> None:
    assert INT_MAX == 2**31 - 1 and LLONG_MAX == 2**63 - 1


# ---------------------------------------------------------------------------------------------
# Interop with a real redis-server 7.0.15
# ---------------------------------------------------------------------------------------------

REDIS_SERVER = shutil.which("redis-server")
# Redis 8 names and pyrepl's own directives: a 7.0.15 server does not know them.
NOT_IN_REDIS_7 = set(REDIS8_DEFAULTS) | {"sync-log-file", "sync-log-max-size",
                                         "sync-log-max-files", "repl-full-sync-spill-threshold",
                                         "repl-sync-max-bandwidth",
                                         "repl-full-sync-max-concurrent",
                                         "repl-full-sync-resume-window",
                                         "repl-full-sync-resume-tail"}


def test_directives_beyond_redis_7_are_the_ones_its_server_lacks() -> None:
    # the table's origins (used by the interop tests) agree with this file's list, which the
    # tests below check against a real 7.0.15
    assert BEYOND_REDIS_7 == NOT_IN_REDIS_7
Test = TypeVar("Test", bound=Callable[..., None])


def against_redis(test: Test) -> Test:
    """A test against a real redis-server: slow, interop, skipped where none is installed."""
    test = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not installed")(test)
    return pytest.mark.slow(pytest.mark.interop(test))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_redis(argv: list[str]) -> Iterator[Any]:
    """A redis-server started with ``argv`` (which must choose a free loopback port)."""
    redis = pytest.importorskip("redis")
    port = int(argv[argv.index("--port") + 1])
    proc = subprocess.Popen([REDIS_SERVER, *argv], stdout=subprocess.DEVNULL,  # type: ignore
                            stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=5)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)   # polling a condition with a deadline, not a blind sleep
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def real_redis(tmp_path: Path) -> Iterator[tuple[Any, list[str]]]:
    args = ["--port", str(free_port()), "--bind", "127.0.0.1", "--save", "",
            "--dir", str(tmp_path.resolve())]
    with running_redis(args) as client:
        yield client, args


@against_redis
def test_config_get_matches_real_redis(real_redis: tuple[Any, list[str]]) -> None:
    client, args = real_redis
    ours = Config.from_args(args)
    compared = 0
    for name in ours.names():
        theirs = client.execute_command("CONFIG", "GET", name)
        if not theirs:
            assert name in NOT_IN_REDIS_7
            continue
        assert ours.config_get([name]) == list(theirs.items()), name
        compared += 1
    assert compared >= 50
    for pattern in ["*", "repl-*", "slave*", "*replica*", "max*", "?ort", "[pt]*"]:
        theirs_keys = {k for k in client.execute_command("CONFIG", "GET", pattern)
                       if lookup(k) is not None}
        ours_keys = {k for k, _ in ours.config_get([pattern])} - NOT_IN_REDIS_7
        assert ours_keys == theirs_keys, pattern


CONFIG_SET_CASES: list[list[str]] = [
    ["port", "abc"], ["port", "70000"], ["port", "-1"], ["port", "007"], ["databases", "3"],
    ["daemonize", "no"], ["foo", "bar"], ["protected-mode", "maybe"], ["loglevel", "loud"],
    ["loglevel", "VERBOSE"], ["maxmemory", "1x"], ["maxmemory", "-1"], ["maxmemory", "+5"],
    ["maxmemory", "10MB"], ["maxmemory", ""], ["maxmemory", "0"], ["maxmemory-policy", "foo"],
    ["maxmemory-policy", "ALLKEYS-LRU"], ["repl-backlog-size", "0"],
    ["repl-backlog-size", "100"], ["repl-backlog-size", "99999999999999999999"],
    ["repl-backlog-size", "2mb"], ["proto-max-bulk-len", "1000"], ["save", "1 2 3"],
    ["save", "a b"], ["save", "100  10"], ["save", "100 10 50 5"], ["save", ""],
    ["client-output-buffer-limit", "replica 1mb 2mb 3"],
    ["client-output-buffer-limit", "master 1 2 3"], ["client-output-buffer-limit", "normal 1 2"],
    ["client-output-buffer-limit", "normal x 2 3"], ["client-output-buffer-limit", ""],
    ["dir", "/tmp"], ["dbfilename", "x.rdb"], ["replicaof", "a 1"], ["slaveof", "a 1"],
    ["repl-diskless-load", "foo"], ["repl-diskless-load", "swapdb"], ["maxclients", "0"],
    ["hz", "1000"], ["hz", "-1"], ["slave-read-only", "no"], ["SLAVE-PRIORITY", "x"],
    ["replica-announce-ip", "10.1.1.1"], ["min-slaves-to-write", "1"],
    ["port", "1", "port", "2"], ["port", "1", "PORT", "2"],
    ["timeout", "5", "replica-read-only", "x"], ["min-replicas-to-write", "2",
                                                  "min-slaves-to-write", "3"],
    ["replica-read-only", "no", "slave-read-only", "yes"], ["timeout", "7", "nope", "1"],
    ["databases", "1", "nope", "1"], ["rdb-key-save-delay", "-5"], ["appendonly", "no"],
    ["requirepass", ""], ["masterauth", "pw"], ["tcp-keepalive", "60"],
    ["active-expire-effort", "11"], ["repl-timeout", "0"], ["replica-announce-port", "65536"],
]


@against_redis
def test_config_set_matches_real_redis(real_redis: tuple[Any, list[str]]) -> None:
    import redis

    client, args = real_redis
    ours = Config.from_args(args)
    for case in CONFIG_SET_CASES:
        pairs = list(zip(case[0::2], case[1::2], strict=True))
        try:
            client.execute_command("CONFIG", "SET", *case)
            theirs: str | None = None
        except redis.ResponseError as exc:
            theirs = str(exc)
        try:
            ours.set_many(pairs)
            mine: str | None = None
        except ConfigError as exc:
            mine = str(exc).removeprefix("ERR ")
        assert mine == theirs, case
        for name in case[0::2]:
            if lookup(name) is not None:
                assert ours.config_get([name]) == \
                    list(client.execute_command("CONFIG", "GET", name).items()), case


LOAD_ERROR_CASES = [
    "port abc", "foo bar", "port", "port 1 2", "save 1", "save 0 1",
    "client-output-buffer-limit x", "client-output-buffer-limit master 1 2 3",
    "protected-mode maybe", "loglevel loud", "maxmemory 1x", 'requirepass "abc',
    "save 'a'b", "replicaof h 99999", "dbfilename a/b", "repl-backlog-size 0",
    "include a b", "port 6379 # comment",
]


@against_redis
def test_load_errors_match_real_redis(tmp_path: Path) -> None:
    for index, line in enumerate(LOAD_ERROR_CASES):
        path = write(tmp_path / f"bad{index}.conf", f"# first line\n{line}\n")
        proc = subprocess.run([REDIS_SERVER, path], capture_output=True, text=True,  # type: ignore
                              timeout=20)
        assert proc.returncode != 0, line
        out = (proc.stderr + proc.stdout).strip().splitlines()
        assert "at line 2" in "\n".join(out), line
        with pytest.raises(ConfigError) as info:
            Config.load(path)
        assert str(info.value) == f"{path}:2: {out[-1]}", line


@against_redis
def test_shipped_master_conf_reads_like_redis(tmp_path: Path) -> None:
    # The shipped file minus what 7.0.15 lacks (and minus dir: Redis chdir()s at load, so the
    # directory is given on the command line instead).
    kept = []
    for raw in (REPO / "conf" / "master.conf").read_text().splitlines():
        argv = split_args(raw.strip())
        if argv and not raw.strip().startswith("#") and \
                argv[0].lower() in NOT_IN_REDIS_7 | {"dir"}:
            continue
        kept.append(raw)
    path = write(tmp_path / "master7.conf", "\n".join(kept) + "\n")
    args = [path, "--port", str(free_port()), "--dir", str(tmp_path.resolve())]
    ours = Config.from_args(args)
    with running_redis(args) as client:
        for name in ours.names():
            if name in NOT_IN_REDIS_7:
                continue
            assert ours.config_get([name]) == \
                list(client.execute_command("CONFIG", "GET", name).items()), name


def test_memory_tracking_only_at_start(tmp_path: Path) -> None:
    """Redis 8: key-memory-histograms can be turned off at runtime, never on."""
    cfg = Config()
    with pytest.raises(ConfigError, match="memory tracking cannot be enabled at runtime"):
        cfg.set("key-memory-histograms", "yes")
    cfg = load_text(tmp_path, "key-memory-histograms yes\n")
    cfg.set("key-memory-histograms", "no")
    with pytest.raises(ConfigError, match="memory tracking cannot be enabled at runtime"):
        cfg.set("key-memory-histograms", "yes")


def test_option_lines_follow_redis_server() -> None:
    """redis-server's arguments as the config lines it appends (introspection.tcl's command
    line cases): values quoted, a bare --name takes the next argument even with --, a whole
    line in one argument, --save alone is save \"\"."""
    from pyrepl.config import option_lines

    assert option_lines(["--port", "6379", "6380"]) == ['port "6379" "6380" ']
    assert option_lines(["--port", "--loglevel", "verbose"]) == ['port "--loglevel" "verbose" ']
    assert option_lines(["--logfile", "--my--log", "--loglevel", "--bla"]) == [
        'logfile "--my--log" ', 'loglevel "--bla" ']
    assert option_lines(["--maxmemory 700mb", "--loglevel verbose"]) == [
        "maxmemory 700mb ", "loglevel verbose "]
    assert option_lines(["--save", "--loglevel", "verbose"]) == ['save ""', 'loglevel "verbose" ']
    assert option_lines(["--loglevel", "verbose", "--save"]) == ['loglevel "verbose" ', 'save ""']
    assert option_lines(["loglevel", "verbose"]) == ['"loglevel" "verbose" ']
    cfg = Config.load(None, lines=option_lines(["--shutdown-on-sigint", "nosave", "force", "now",
                                                "--shutdown-on-sigterm", "nosave force"]))
    assert cfg.get_formatted("shutdown-on-sigint") == "nosave now force"
    assert cfg.get_formatted("shutdown-on-sigterm") == "nosave force"
    with pytest.raises(ConfigError) as e:
        Config.load(None, lines=option_lines(["--port", "6379", "6380"]))
    assert e.value.line == 'port "6379" "6380"' and e.value.reason == "wrong number of arguments"
