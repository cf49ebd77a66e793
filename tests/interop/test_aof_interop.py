"""The multi-part AOF against the real thing (Debian's redis-server / redis-check-aof 7.0.15).

* an appendonlydir one server writes (every type, streams with groups and pending entries,
  TTLs, several dbs, a function library; rdb preamble on and off; with and without a
  BGREWRITEAOF; timestamp annotations; stopped by SHUTDOWN or kill -9) loads into the other
  with the same dataset (DEBUG DIGEST, then key by key), and the other keeps appending to it
  so that the first reads it back;
* redis-check-aof calls the files valid;
* a Redis 6 single ``appendonly.aof`` (plain RESP, RDB preamble, an interrupted upgrade) is
  moved into the appendonlydir and named as base seq 1, as Redis 7 does;
* the manifests, the files and INFO's aof fields after start, BGREWRITEAOF, BGREWRITEAOF are
  Redis's, for several configurations;
* hand-written layouts Redis's own tests load (discontinuous sequences, empty files, extra
  manifest fields, timestamp annotations) load the same.

Every test compares with a live redis-server, and its all-Redis variant (``-k "not pyrepl"``)
runs the same checks with Redis in both places: that is what keeps the expectations honest.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest

from tests.support.aof import (
    AOF_DIR,
    AOF_NAME,
    MANIFEST,
    SERVERS,
    aof_files,
    aof_flags,
    aof_items,
    aof_path,
    assert_same_dataset,
    cmd,
    crash,
    fill_every_type,
    info,
    manifest_lines,
    manifest_text,
    need_redis,
    read_file,
    resp,
    rewrite,
    shutdown,
    snapshot,
    start_server,
    wait_files,
    write_file,
)
from tests.support.paths import redis_source_file

pytestmark = [pytest.mark.slow, pytest.mark.interop]

DIRECTIONS = [("pyrepl", "redis"), ("redis", "pyrepl"), ("redis", "redis")]
DIRECTION_IDS = ["pyrepl-writes-redis-reads", "redis-writes-pyrepl-reads",
                 "redis-writes-redis-reads"]

#: name -> (flags, BGREWRITEAOF between two fills, how the writer stops)
VARIANTS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "preamble-yes": (("--aof-use-rdb-preamble", "yes"), False, "shutdown"),
    "preamble-no": (("--aof-use-rdb-preamble", "no"), False, "shutdown"),
    "preamble-yes-rewrite": (("--aof-use-rdb-preamble", "yes"), True, "shutdown"),
    "preamble-no-rewrite": (("--aof-use-rdb-preamble", "no"), True, "shutdown"),
    "timestamps-rewrite": (("--aof-use-rdb-preamble", "no", "--aof-timestamp-enabled", "yes"),
                           True, "shutdown"),
    "kill9": (("--appendfsync", "always"), False, "kill"),
    "kill9-rewrite": (("--appendfsync", "always"), True, "kill"),
}


@pytest.fixture(autouse=True)
def _redis_installed() -> None:
    need_redis()


def _stop(srv, how: str) -> None:  # noqa: ANN001
    if how == "kill":
        crash(srv)
    else:
        assert shutdown(srv) == 0, srv.log()


def _written_by(writer: str, d: str, variant: str) -> dict:
    """``writer`` run on ``d`` as ``variant`` says (every type, a rewrite and more writes if
    asked), then stopped (shut down or killed); the dataset it had."""
    extra, do_rewrite, how = VARIANTS[variant]
    srv = start_server(writer, d, *aof_flags(*extra))
    try:
        fill_every_type(srv.port, "first")
        if do_rewrite:
            rewrite(srv.port, d)
            fill_every_type(srv.port, "second")
        want = snapshot(srv.port)
        _stop(srv, how)
    finally:
        srv.stop()
    return want


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("writer,reader", DIRECTIONS, ids=DIRECTION_IDS)
def test_appendonlydir_loads_into_the_other_server(writer: str, reader: str, variant: str,
                                                   tmp_path) -> None:
    extra, _, how = VARIANTS[variant]
    d = str(tmp_path)
    flags = aof_flags(*extra)
    want = _written_by(writer, d, variant)
    manifest = manifest_text(d)
    incr = manifest.splitlines()[-1].split()[1]
    if "--aof-timestamp-enabled" in extra:
        # "#TS:<unix time>\r\n" annotations: always at the head of a rewritten base; in the
        # incr file whenever the second changed since the last one
        base = manifest.splitlines()[0].split()[1]
        assert re.match(rb"#TS:\d+\r\n\*", read_file(aof_path(d, base)))
        for f in (base, incr):
            for kind, item in aof_items(read_file(aof_path(d, f))):
                assert kind == "cmd" or re.fullmatch(rb"#TS:\d+", item), item  # type: ignore
    srv = start_server(reader, d, *flags)
    try:
        assert_same_dataset(snapshot(srv.port), want, f"{reader} loading {writer}'s files")
        # the reader appends to the same layout...
        assert manifest_text(d) == manifest
        fill_every_type(srv.port, "third")
        want = snapshot(srv.port)
        _stop(srv, how)
    finally:
        srv.stop()
    assert manifest_text(d) == manifest
    # ... and the writer reads it all back
    srv = start_server(writer, d, *flags)
    try:
        assert_same_dataset(snapshot(srv.port), want, f"{writer} loading {reader}'s appends")
    finally:
        srv.stop()


@pytest.mark.parametrize("variant", ["preamble-yes-rewrite", "preamble-no-rewrite",
                                     "timestamps-rewrite", "kill9"])
@pytest.mark.parametrize("writer,reader", [("redis8", "pyrepl"), ("pyrepl", "redis8")])
def test_redis8_and_pyrepl_load_each_others_appendonlydir(writer: str, reader: str,
                                                          variant: str, tmp_path) -> None:
    """Redis 8.6's files (an RDB 12+ base) into pyrepl and pyrepl's into Redis 8, every type."""
    d = str(tmp_path)
    want = _written_by(writer, d, variant)
    srv = start_server(reader, d, *aof_flags(*VARIANTS[variant][0]))
    try:
        assert_same_dataset(snapshot(srv.port), want, f"{reader} loading {writer}'s files",
                            cross_version=True)
    finally:
        srv.stop()


@pytest.mark.parametrize("variant", ["preamble-yes-rewrite", "preamble-no-rewrite",
                                     "timestamps-rewrite", "kill9-rewrite"])
@pytest.mark.parametrize("kind", SERVERS)
def test_redis_check_aof_calls_the_files_valid(kind: str, variant: str, tmp_path) -> None:
    exe = shutil.which("redis-check-aof")
    if exe is None:
        pytest.skip("redis-check-aof is not installed (Debian's redis-tools brings it)")
    extra = VARIANTS[variant][0]
    d = str(tmp_path)
    _written_by(kind, d, variant)  # (each of these variants rewrites between its two fills)
    out = subprocess.run([exe, aof_path(d, MANIFEST)], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "is valid" in text, text
    assert "All AOF files and manifest are valid" in text, text
    preamble = "yes"
    if "--aof-use-rdb-preamble" in extra:
        preamble = extra[extra.index("--aof-use-rdb-preamble") + 1]
    want = "RDB" if preamble == "yes" else "RESP"
    assert f"Start to check BASE AOF ({want} format)" in text, text


# -- the upgrade of a Redis 6 appendonly.aof -------------------------------------------------

RESP_AOF = (resp("SELECT", 0) + resp("SET", "k1", "v1") + resp("SET", "k2", "v2")
            + resp("RPUSH", "list", "a", "b") + resp("SELECT", 3) + resp("SET", "k3", "v3"))


def _redis6_input(d: str, case: str) -> None:
    if case == "resp":
        write_file(os.path.join(d, AOF_NAME), RESP_AOF)
    elif case == "rdb-preamble":  # Redis's own test file: k1, k2 in the RDB, k3 in the tail
        data = read_file(redis_source_file("tests", "assets", "rdb-preamble.aof"))
        write_file(os.path.join(d, AOF_NAME), data)
    else:  # interrupted: the manifest was written, the file not moved yet
        write_file(os.path.join(d, AOF_NAME), RESP_AOF)
        write_file(aof_path(d, MANIFEST), manifest_lines(("", 1, "b")).encode())


def _upgrade(kind: str, d: str) -> dict:
    """Start ``kind`` on a Redis 6 layout, write, rewrite, write: what it left at each step."""
    out: dict = {}
    srv = start_server(kind, d, *aof_flags())
    try:
        out["root"] = sorted(f for f in os.listdir(d) if not f.endswith(".log"))
        out["files"] = aof_files(d)
        out["manifest"] = manifest_text(d)
        out["loaded"] = snapshot(srv.port)
        cmd(srv.port, "SET", "k4", "v4")
        out["manifest2"] = rewrite(srv.port, d)
        wait_files(d, ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", MANIFEST])
        cmd(srv.port, "SET", "k5", "v5")
        out["final"] = snapshot(srv.port)
        assert cmd(srv.port, "DEBUG", "LOADAOF") == b"OK"
        assert_same_dataset(snapshot(srv.port), out["final"], f"{kind} after DEBUG LOADAOF")
        assert shutdown(srv) == 0
    finally:
        srv.stop()
    srv = start_server(kind, d, *aof_flags())
    try:
        assert_same_dataset(snapshot(srv.port), out["final"], f"{kind} after a restart")
    finally:
        srv.stop()
    return out


@pytest.mark.parametrize("case", ["resp", "rdb-preamble", "interrupted"])
@pytest.mark.parametrize("kind", SERVERS)
def test_redis6_single_file_is_upgraded(kind: str, case: str, tmp_path) -> None:
    ours, ref = str(tmp_path / kind), str(tmp_path / "reference")
    for d in (ours, ref):
        os.makedirs(d)
        _redis6_input(d, case)
    got = _upgrade(kind, ours)
    want = _upgrade("redis", ref)
    # moved into the appendonlydir, named as the base, seq 1; a new incr file beside it
    assert got["root"] == [AOF_DIR]
    assert got["files"] == [AOF_NAME, "appendonly.aof.1.incr.aof", MANIFEST]
    assert got["manifest"] == "file appendonly.aof seq 1 type b\n" \
                              "file appendonly.aof.1.incr.aof seq 1 type i\n"
    assert got["manifest2"] == manifest_lines(("2.base.rdb", 2, "b"), ("2.incr.aof", 2, "i"))
    assert cmd_values(got["loaded"]) == cmd_values(want["loaded"])
    for step in ("root", "files", "manifest", "manifest2"):
        assert got[step] == want[step], step
    assert_same_dataset(got["loaded"], want["loaded"], "the upgraded dataset")
    assert_same_dataset(got["final"], want["final"], "the dataset after the rewrite")


def cmd_values(snap: dict) -> dict:
    """{(db, key): value} of a snapshot (for a readable first comparison)."""
    return {k: v[1] for k, v in snap["keys"].items()}


# -- manifests, files and INFO after the same operations ------------------------------------

MANIFEST_VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "preamble-no": ("--aof-use-rdb-preamble", "no"),
    "no-auto-gc": ("--aof-disable-auto-gc", "yes"),
    "appendfilename-with-space": ("--appendfilename", "my file.aof"),
    "appenddirname": ("--appenddirname", "aof-files"),
}

#: INFO persistence fields whose values must be Redis's after the sequence (sizes, times
#: and copy-on-write figures are the implementation's own).
INFO_VALUES = ("aof_enabled", "aof_rewrite_in_progress", "aof_rewrite_scheduled",
               "aof_rewrites", "aof_rewrites_consecutive_failures",
               "aof_last_bgrewrite_status", "aof_last_write_status", "aof_pending_rewrite")


def _names_in(manifest: str) -> set[str]:
    return {shlex.split(line)[1] for line in manifest.splitlines()}


def _sequence(kind: str, d: str, extra: tuple[str, ...]) -> list:
    dirname = extra[extra.index("--appenddirname") + 1] if "--appenddirname" in extra \
        else AOF_DIR
    name = extra[extra.index("--appendfilename") + 1] if "--appendfilename" in extra \
        else AOF_NAME
    steps = []
    srv = start_server(kind, d, *aof_flags(*extra))
    try:
        def settled() -> tuple[str, list[str]]:
            m = manifest_text(d, dirname, name)
            wait_files(d, _names_in(m) | {f"{name}.manifest"}, dirname)
            return m, aof_files(d, dirname)

        steps.append(("start",) + settled())
        cmd(srv.port, "SET", "a", "1")
        steps.append(("write",) + settled())
        for n in (1, 2):
            rewrite(srv.port, d, dirname, name)
            cmd(srv.port, "SET", f"after-rewrite-{n}", "x")
            steps.append((f"rewrite {n}",) + settled())
        i = info(srv.port)
        steps.append(("aof fields", sorted(k for k in i if k.startswith("aof_"))))
        steps.append(("aof values", {k: i.get(k) for k in INFO_VALUES}))
        assert shutdown(srv) == 0
    finally:
        srv.stop()
    srv = start_server(kind, d, *aof_flags(*extra))
    try:
        steps.append(("restart", manifest_text(d, dirname, name), aof_files(d, dirname)))
    finally:
        srv.stop()
    return steps


@pytest.mark.parametrize("variant", sorted(MANIFEST_VARIANTS))
@pytest.mark.parametrize("kind", SERVERS)
def test_manifest_and_files_match_redis(kind: str, variant: str, tmp_path) -> None:
    extra = MANIFEST_VARIANTS[variant]
    ours, ref = str(tmp_path / kind), str(tmp_path / "reference")
    os.makedirs(ours)
    os.makedirs(ref)
    got = _sequence(kind, ours, extra)
    want = _sequence("redis", ref, extra)
    for g, w in zip(got, want, strict=True):
        assert g == w, f"{variant}, after {w[0]}:\n  {kind}: {g[1:]!r}\n  redis: {w[1:]!r}"


# -- hand-written layouts Redis's tests load --------------------------------------------------

B1, I1, I3 = "appendonly.aof.1.base.aof", "appendonly.aof.1.incr.aof", "appendonly.aof.3.incr.aof"
LAYOUTS: dict[str, dict[str, bytes]] = {
    "discontinuous-seq": {
        B1: resp("SET", "k1", "v1"), I1: resp("SET", "k2", "v2"), I3: resp("SET", "k3", "v3"),
        MANIFEST: manifest_lines(("1.base.aof", 1, "b"), ("1.incr.aof", 1, "i"),
                                 ("3.incr.aof", 3, "i")).encode()},
    "manifest-with-unknown-fields": {
        B1: resp("SET", "k1", "v1"), I1: resp("SET", "k2", "v2"), I3: resp("SET", "k3", "v3"),
        MANIFEST: b"file appendonly.aof.1.base.aof seq 1 type b newkey newvalue\n"
                  + manifest_lines(("1.incr.aof", 1, "i"), ("3.incr.aof", 3, "i")).encode()},
    "some-files-empty": {
        B1: resp("SET", "k1", "v1"), I1: b"", I3: resp("SET", "k3", "v3"),
        MANIFEST: manifest_lines(("1.base.aof", 1, "b"), ("1.incr.aof", 1, "i"),
                                 ("3.incr.aof", 3, "i")).encode()},
    "timestamp-annotations": {
        I1: b"#TS:1628217470\r\n" + resp("SET", "k1", "v1") + b"#TS:1628217471\r\n"
            + resp("SET", "k2", "v2") + b"#TS:1628217472\r\n#TS:1628217473\r\n"
            + resp("SET", "k3", "v3") + b"#TS:1628217474\r\n",
        MANIFEST: manifest_lines(("1.incr.aof", 1, "i")).encode()},
    # (SPOP's members are random: it takes them all here, to compare deterministically)
    "spop-and-past-pexpireat": {
        I1: resp("SADD", "set", "foo") + resp("SADD", "set", "bar") + resp("SADD", "set", "gah")
            + resp("SPOP", "set", 3) + resp("SADD", "kept", "a", "b")
            + resp("SPOP", "kept", 0) + resp("RPUSH", "list", "foo")
            + resp("PEXPIREAT", "list", 1000) + resp("RPUSH", "list", "bar")
            + resp("SELECT", 9) + resp("SET", "k1", "v1"),
        MANIFEST: manifest_lines(("1.incr.aof", 1, "i")).encode()},
    "empty-appendonlydir": {},
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", SERVERS)
def test_loads_layouts_redis_loads(kind: str, layout: str, tmp_path) -> None:
    results = []
    for who, sub in ((kind, "subject"), ("redis", "reference")):
        d = str(tmp_path / sub)
        os.makedirs(os.path.join(d, AOF_DIR))
        for name, data in LAYOUTS[layout].items():
            write_file(aof_path(d, name), data)
        srv = start_server(who, d, *aof_flags())
        try:
            results.append((snapshot(srv.port), manifest_text(d), aof_files(d)))
        finally:
            srv.stop()
    (got, got_manifest, got_files), (want, want_manifest, want_files) = results
    assert_same_dataset(got, want, f"{layout} as loaded by {kind}")
    assert got_manifest == want_manifest
    assert got_files == want_files
    if MANIFEST in LAYOUTS[layout] and layout != "manifest-with-unknown-fields":
        assert got_manifest == LAYOUTS[layout][MANIFEST].decode()  # loading changes nothing
