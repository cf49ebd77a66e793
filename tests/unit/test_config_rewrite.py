"""CONFIG REWRITE's pure part: old file text + Config -> new file text, as Redis 7.0 writes it."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.config import DIRECTIVES, Config, repr_arg, split_args
from pyrepl.config_rewrite import SIGNATURE, format_memory, rewrite_file, rewrite_text

OLD = """# a comment that stays
port 7000

# save points
save 900 1
save 300 10
slave-read-only no
hz 20
hz 30
include /nonexistent/extra.conf
no-such-directive 1
maxmemory 0
"""


def load(tmp_path: Any, text: str) -> Config:
    path = tmp_path / "r.conf"
    path.write_text(text)
    return Config.load(str(path))


def test_comments_order_and_in_place_replacement(tmp_path: Any) -> None:
    cfg = load(tmp_path, OLD.replace("include /nonexistent/extra.conf\n", "")
               .replace("no-such-directive 1\n", ""))
    cfg.set("maxmemory", "64mb")
    out = rewrite_text(OLD, cfg)
    lines = out.splitlines()
    assert lines[0] == "# a comment that stays"
    assert lines[1] == "port 7000"
    # save: the current points, in place of the old lines
    assert lines[3:6] == ["# save points", "save 900 1", "save 300 10"]
    # the alias is written under its canonical name, in place
    assert lines[6] == "replica-read-only no"
    # a duplicate directive keeps its first line (the value is the last one read) ...
    assert lines[7] == "hz 30"
    # and its second line is blanked; include stays, an unknown line becomes a comment,
    # maxmemory is rewritten in place
    assert lines[8:12] == ["", "include /nonexistent/extra.conf", "# ??? no-such-directive 1",
                           "maxmemory 64mb"]
    # what Redis always writes but the file lacked goes after the signature, once
    tail = lines[lines.index(SIGNATURE) + 1:]
    assert lines.count(SIGNATURE) == 1
    assert f"dir {repr_arg(cfg.dir)}" in tail
    assert "latency-tracking-info-percentiles 50 99 99.9" in tail
    # defaults are not appended
    assert not any(line.startswith(("timeout", "tcp-keepalive", "databases")) for line in tail)
    # runs of blank lines collapse into one
    assert "\n\n\n" not in out
    # rewriting again changes nothing but, as Redis (its split keeps the empty piece after
    # the last newline), one blank line at the end
    assert rewrite_text(out, cfg) == out + "\n"
    assert rewrite_text(out + "\n", cfg) == out + "\n"


def test_null_strings_and_default_bind_and_master_replicaof_are_removed(tmp_path: Any) -> None:
    text = 'pidfile ""\nunixsocket ""\nbind * -::*\nreplicaof 10.0.0.1 6379\nlogfile ""\n'
    cfg = load(tmp_path, text)
    cfg.set("replicaof", "no one", force=True)
    out = rewrite_text(text, cfg).splitlines()
    assert "logfile \"\"" in out                         # an empty string Redis keeps
    assert not any(line.startswith(("pidfile", "unixsocket", "bind", "replicaof"))
                   for line in out)


def test_save_empty_and_client_output_buffer_limit_lines(tmp_path: Any) -> None:
    cfg = Config()
    cfg.set_many([("save", ""), ("client-output-buffer-limit", "replica 512mb 128mb 120")])
    out = rewrite_text("", cfg).splitlines()
    assert 'save ""' in out
    assert "client-output-buffer-limit replica 512mb 128mb 120" in out
    assert not any(line.startswith("client-output-buffer-limit normal") for line in out)


def test_memory_units_as_redis() -> None:
    assert format_memory(0) == "0"
    assert format_memory(1024) == "1kb"
    assert format_memory(1536) == "1536"
    assert format_memory(64 * 1024**2) == "64mb"
    assert format_memory(3 * 1024**3) == "3gb"


def test_rewrite_file_is_atomic_and_keeps_a_readable_mode(tmp_path: Any) -> None:
    path = tmp_path / "redis.conf"
    path.write_text("port 7001\n")
    cfg = Config.load(str(path))
    cfg.set("hz", "33")
    rewrite_file(cfg)
    assert "hz 33" in path.read_text().splitlines()
    assert os.stat(path).st_mode & 0o777 == 0o644 & ~_umask()
    assert sorted(os.listdir(tmp_path)) == ["redis.conf"]     # no temporary file left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_strings_round_trip_through_repr_and_split_args() -> None:
    for value in ["", "plain", "with space", 'quo"te', "back\\slash", "tab\there",
                  "nl\nx", "\x01\x7f", "caf\udcc3\udca9"]:
        assert split_args(f"x {repr_arg(value)}") == ["x", value]


# Directives a CONFIG SET can change freely in a unit test (no files, ports or identities).
_SETTABLE = {
    "hz": st.integers(1, 500).map(str),
    "timeout": st.integers(0, 1000).map(str),
    "maxmemory": st.sampled_from(["0", "1mb", "100mb", "1gb", "12345"]),
    "maxmemory-policy": st.sampled_from(["noeviction", "allkeys-lru", "volatile-ttl"]),
    "save": st.sampled_from(["", "900 1", "900 1 300 10", "3600 1 300 100 60 10000"]),
    "appendfsync": st.sampled_from(["always", "everysec", "no"]),
    "replica-read-only": st.sampled_from(["yes", "no"]),
    "notify-keyspace-events": st.sampled_from(["", "KEA", "Ex", "Kg$"]),
    "client-output-buffer-limit": st.sampled_from(["normal 0 0 0", "pubsub 64mb 16mb 120",
                                                   "replica 1gb 256mb 30"]),
    "maxmemory-clients": st.sampled_from(["0", "10%", "64mb"]),
    "oom-score-adj-values": st.sampled_from(["0 200 800", "-100 0 100"]),
    "shutdown-on-sigterm": st.sampled_from(["default", "nosave now", "save force"]),
    "latency-tracking-info-percentiles": st.sampled_from(["", "50", "90 99.99"]),
    "replica-announce-ip": st.sampled_from(["", "10.0.0.9", "host name"]),
    "proc-title-template": st.sampled_from(["{title} {port}", "{title} {listen-addr} {port}"]),
    "ignore-warnings": st.sampled_from(["", "ARM64-COW-BUG"]),
}


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(_SETTABLE)), st.just(None), max_size=8).flatmap(
    lambda keys: st.fixed_dictionaries({k: _SETTABLE[k] for k in keys})))
def test_rewritten_file_loads_back_to_the_same_configuration(changes: dict[str, str]) -> None:
    cfg = Config()
    for name, value in changes.items():
        cfg.set(name, value)
    text = rewrite_text(OLD.replace("include /nonexistent/extra.conf\n", ""), cfg)
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
    try:
        back = Config.load(f.name)
    finally:
        os.unlink(f.name)
    for d in DIRECTIVES:
        assert back.get_formatted(d.name) == cfg.get_formatted(d.name), (d.name, text)


@pytest.mark.parametrize("name", [d.name for d in DIRECTIVES if d.kind == "memory"])
def test_memory_directives_are_written_with_units(name: str) -> None:
    cfg = Config()
    d = next(x for x in DIRECTIVES if x.name == name)
    if not d.mutable or d.protected:
        pytest.skip("not settable")
    value = max(d.lo, 2 * 1024**2)
    cfg.set(name, str(value))
    assert f"{name} 2mb" in rewrite_text("", cfg).splitlines()
