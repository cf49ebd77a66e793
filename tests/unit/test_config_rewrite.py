"""CONFIG REWRITE's pure part: old file text + Config -> new file text, as Redis 7.0 writes it."""

from __future__ import annotations

import errno
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


def test_rewrite_file_splits_lines_on_newline_only(tmp_path: Any) -> None:
    """Like sdssplitlen on "\\n": a CR inside a line is no line break (CRLF ends are trimmed)."""
    path = tmp_path / "redis.conf"
    path.write_bytes(b"# one\rcomment\r\nport 7002\r\n# caf\xc3\xa9 \xff\n")
    cfg = Config.load(str(path))
    rewrite_file(cfg)
    lines = path.read_bytes().split(b"\n")
    assert lines[:3] == [b"# one\rcomment", b"port 7002", b"# caf\xc3\xa9 \xff"]


def test_rewrite_file_of_a_missing_file_writes_it_and_failures_raise(tmp_path: Any) -> None:
    path = tmp_path / "redis.conf"
    path.write_text("hz 12\n")
    cfg = Config.load(str(path))
    path.unlink()                        # rewriteConfigReadOldFile: ENOENT is an empty file
    rewrite_file(cfg)
    text = path.read_text()
    assert text.startswith(SIGNATURE + "\n") and "hz 12" in text.splitlines()
    with pytest.raises(OSError) as exc:  # the directory is gone: the temporary file fails
        rewrite_file(cfg, str(tmp_path / "gone" / "redis.conf"))
    assert exc.value.errno == errno.ENOENT
    path.unlink()
    path.mkdir()                         # a directory in place of the file: EISDIR on read
    with pytest.raises(OSError) as exc:
        rewrite_file(cfg)
    assert exc.value.errno == errno.EISDIR
    assert sorted(os.listdir(tmp_path)) == ["redis.conf"]


def test_a_file_that_does_not_end_with_a_newline_and_the_signature_reused() -> None:
    cfg = Config()
    cfg.set_many([("hz", "40"), ("timeout", "9")])
    old = f"hz 10\n{SIGNATURE}\ntimeout 1"
    # save, dir and latency-tracking-info-percentiles are always written (force), in table order
    assert rewrite_text(old, cfg) == (
        f"hz 40\n{SIGNATURE}\ntimeout 9\nsave 3600 1\nsave 300 100\nsave 60 10000\n"
        f"dir {repr_arg(cfg.dir)}\nlatency-tracking-info-percentiles 50 99 99.9\n")
    assert rewrite_text("", cfg) == rewrite_text(None, cfg)


def test_maxmemory_clients_percent_and_bytes() -> None:
    cfg = Config()
    for value, line in [("10%", "maxmemory-clients 10%"), ("3mb", "maxmemory-clients 3mb"),
                        ("100%", "maxmemory-clients 100%")]:
        cfg.set("maxmemory-clients", value)
        assert line in rewrite_text("", cfg).splitlines()
    cfg.set("maxmemory-clients", "0")
    assert not any(ln.startswith("maxmemory-clients") for ln in rewrite_text("", cfg).split("\n"))
    assert "maxmemory-clients 0" in rewrite_text("maxmemory-clients 5%\n", cfg).splitlines()


def test_unknown_special_kinds_fall_back_to_config_get_text_as_arguments() -> None:
    """A directive kind the rewriter has no rule for is written as its CONFIG GET text, given
    as arguments that read back: an empty value as "", one argument with spaces quoted."""
    from pyrepl import config_rewrite as rw
    from pyrepl.config import Directive

    def parse(d: Any, args: list[str], current: Any, loading: bool) -> str:
        return " ".join(args)

    single = Directive("x-single", "special", "", parse=parse, fmt=str)
    multi = Directive("x-multi", "special", "", parse=parse, fmt=str, multi_arg=True)
    cases = [(single, "", 'x-single ""'), (single, "a b", 'x-single "a b"'),
             (single, "plain", "x-single plain"), (multi, "a b", "x-multi a b"),
             (multi, "", 'x-multi ""')]
    for d, value, line in cases:
        state = rw._State(None)
        rw._generic(state, d, value, "default")
        assert state.lines == [SIGNATURE, line]
        args = split_args(line)[1:]
        assert d.parse_args(args, None, True) == value


def test_every_directive_set_away_from_its_default_reads_back(tmp_path: Any) -> None:
    """Each directive of the table, loaded from a file with a non-default value, rewritten into
    an empty file, loads back to the same CONFIG GET (every rewriter, every kind)."""
    samples = {"memory": "3mb", "string": "a \"b\" \\ c"}
    for d in DIRECTIVES:
        if d.name in ("dir", "daemonize", "cluster-enabled", "tls-port", "activedefrag",
                      "key-memory-histograms", "locale-collate"):
            continue
        if d.kind == "bool":
            value = "no" if d.default == "yes" else "yes"
        elif d.kind == "int":
            value = str(d.lo if str(d.lo) != d.default else d.hi)
        elif d.kind == "enum":
            value = next(c for c in d.choices if c != d.default)
        elif d.kind == "special":
            value = {"save": "100 1", "bind": "127.0.0.1", "replicaof": "10.0.0.1 7000",
                     "client-output-buffer-limit": "pubsub 1mb 1kb 5",
                     "unixsocketperm": "700", "shutdown-on-sigint": "nosave now",
                     "shutdown-on-sigterm": "save force", "maxmemory-clients": "7%",
                     "oom-score-adj-values": "1 2 3", "notify-keyspace-events": "KEA",
                     "latency-tracking-info-percentiles": "",
                     "cluster-slot-stats-enabled": "cpu net"}.get(d.name)
            if value is None:
                pytest.fail(f"no sample value for special directive {d.name}")
        else:
            value = samples[d.kind]
        if d.name in ("appendfilename", "appenddirname", "dbfilename"):
            value = "name with space"
        if d.name in ("cluster-announce-hostname", "proc-title-template",
                      "cluster-announce-human-nodename"):
            value = {"cluster-announce-hostname": "host-1",
                     "proc-title-template": "{title} {port}",
                     "cluster-announce-human-nodename": "node1"}[d.name]
        path = tmp_path / f"{d.name}.conf"
        path.write_text(f"{d.name} {repr_arg(value) if not d.multi_arg else value or chr(34) * 2}"
                        "\n")
        cfg = Config.load(str(path))
        assert cfg.get_formatted(d.name) != Config().get_formatted(d.name), d.name
        out = tmp_path / f"{d.name}.out.conf"
        out.write_text(rewrite_text("", cfg))
        back = Config.load(str(out))
        assert back.get_formatted(d.name) == cfg.get_formatted(d.name), (d.name, out.read_text())


def test_force_all_writes_every_directive_and_reads_back_the_same(tmp_path: Any) -> None:
    """DEBUG CONFIG-REWRITE-FORCE-ALL (rewriteConfig's force_write): every directive, defaults
    too, and the file read back gives the same CONFIG GET * (introspection.tcl's "CONFIG
    REWRITE sanity")."""
    path = tmp_path / "r.conf"
    path.write_text("port 7000\n")
    cfg = Config.load(str(path))
    cfg.set("maxmemory", "10mb")
    rewrite_file(cfg, force_all=True)
    text = path.read_text()
    assert "\nhz 10\n" in text and "\nmaxmemory 10mb\n" in text
    again = Config.load(str(path))
    assert again.config_get(["*"]) == cfg.config_get(["*"])


def test_a_cluster_replica_writes_no_replicaof() -> None:
    """rewriteConfigReplicaOfOption: in cluster mode the file gets no replicaof (and loses an
    old one): a node started with one refuses to start ('replicaof directive not allowed in
    cluster mode'). Redis's cluster harness rewrites each node's config, then restarts
    replicas from it (cluster/14-consistency-check, 17-diskless-load-swapdb)."""
    cfg = Config.load(None, [("cluster-enabled", ["yes"])])
    cfg.set("replicaof", "127.0.0.1 7000", force=True)        # (what the cluster sets)
    text = rewrite_text("port 7001\nreplicaof 127.0.0.1 6999\n", cfg)
    assert "replicaof" not in text
    assert Config.load(None, [("cluster-enabled", ["yes"])]).replicaof is None
    plain = Config.load(None, [])
    plain.set("replicaof", "127.0.0.1 7000", force=True)
    assert "replicaof 127.0.0.1 7000" in rewrite_text("port 7001\n", plain)
