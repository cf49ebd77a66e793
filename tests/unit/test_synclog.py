"""Sync event log: schema checks and size-based rotation of the NDJSON file."""

from __future__ import annotations

import json
import os

import pytest

from pyrepl.events import EVENTS, FIELDS, SyncEventLog
from pyrepl.net.synclog import RotatingNdjsonWriter


def test_emit_types_fields_and_rejects_unknown() -> None:
    log = SyncEventLog(node="127.0.0.1:6380", run_id="r" * 40)
    ev = log.emit(1_700_000_000_123, "psync_decision", "master", result="full",
                  reason="offset-before-backlog", gap="42", duration_ms=3)
    assert ev["ts"] == 1_700_000_000.123 and ev["gap"] == 42 and ev["duration_ms"] == 3.0
    assert ev["node"] == "127.0.0.1:6380" and ev["role"] == "master"
    with pytest.raises(ValueError):
        log.emit(0, "no-such-event", "master")
    with pytest.raises(ValueError):
        log.emit(0, "link_up", "replica", no_such_field=1)
    assert {n for n, _, _ in FIELDS} >= {"ts", "event", "node", "reason", "sync_id"}
    assert "psync_decision" in EVENTS


def test_rotation_keeps_at_most_max_files(tmp_path) -> None:
    path = str(tmp_path / "sync.ndjson")
    w = RotatingNdjsonWriter(path, max_size=1000, max_files=3)
    log = SyncEventLog(node="n", run_id="x")
    log.sink = w.write
    for i in range(200):
        log.emit(i, "link_up", "replica", mode="disk", offset=i)
    w.close()
    files = sorted(os.listdir(tmp_path))
    assert files == ["sync.ndjson", "sync.ndjson.1", "sync.ndjson.2", "sync.ndjson.3"]
    for f in files:
        size = os.path.getsize(tmp_path / f)
        assert 0 < size <= 1000
    # the newest events are in the live file, in order, and every line is valid JSON
    lines = [json.loads(x) for x in open(path)]
    assert lines[-1]["offset"] == 199
    offsets = [json.loads(x)["offset"] for f in reversed(files) for x in open(tmp_path / f)]
    assert offsets == sorted(offsets) and offsets[-1] == 199
    assert w.rotations > 3


def test_no_rotation_when_max_size_is_zero(tmp_path) -> None:
    path = str(tmp_path / "s.ndjson")
    w = RotatingNdjsonWriter(path, max_size=0, max_files=2)
    for i in range(100):
        w.write({"ts": i, "event": "link_up"})
    w.close()
    assert os.listdir(tmp_path) == ["s.ndjson"]
    assert len(open(path).readlines()) == 100
