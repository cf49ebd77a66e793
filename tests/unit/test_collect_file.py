"""``pyrepl collect``'s output file: a round's lines written at once, rotated by size like the
daemon's sync log (never past the limit, whole lines only), and write errors reported."""

from __future__ import annotations

import json
import os

from pyrepl.net.collect import CollectFile, split_addr


def ev(i: int, pad: int = 0) -> dict:
    return {"ts": float(i), "event": "info_sample", "node": "n:1", "role": "master",
            "server": "x" * pad, "source": "collector"}


def test_rounds_rotate_by_size_on_whole_lines(tmp_path) -> None:
    path = str(tmp_path / "d" / "collect.ndjson")
    f = CollectFile(path, max_size=1000, max_files=2)
    n = 0
    for r in range(20):
        n += f.write_round([ev(r * 10 + k, pad=k * 20) for k in range(5)])
    f.write_round([])
    f.close()
    assert n == 100
    names = sorted(os.listdir(tmp_path / "d"))
    assert names == ["collect.ndjson", "collect.ndjson.1", "collect.ndjson.2"]
    seen = []
    for name in ("collect.ndjson.2", "collect.ndjson.1", "collect.ndjson"):
        with open(tmp_path / "d" / name, encoding="utf-8") as fh:
            text = fh.read()
        assert text.endswith("\n") and len(text.encode()) <= 1000
        seen += [json.loads(x)["ts"] for x in text.splitlines()]
    # the newest lines, in order, none lost within the files kept
    assert seen == sorted(seen) and seen[-1] == 194.0
    assert seen == [float(t) for t in range(int(seen[0]), 195) if t % 10 < 5][-len(seen):]


def test_a_line_larger_than_the_limit_gets_a_file_of_its_own(tmp_path) -> None:
    path = str(tmp_path / "collect.ndjson")
    f = CollectFile(path, max_size=200, max_files=5)
    f.write_round([ev(1), ev(2, pad=500), ev(3)])
    f.close()
    with open(path + ".1", encoding="utf-8") as fh:
        assert [json.loads(x)["ts"] for x in fh] == [2.0]
    with open(path, encoding="utf-8") as fh:
        assert [json.loads(x)["ts"] for x in fh] == [3.0]


def test_appends_to_an_existing_file(tmp_path) -> None:
    path = str(tmp_path / "collect.ndjson")
    for i in range(2):
        f = CollectFile(path, max_size=0, max_files=1)
        f.write_round([ev(i)])
        f.close()
    with open(path, encoding="utf-8") as fh:
        assert [json.loads(x)["ts"] for x in fh] == [0.0, 1.0]


def test_addresses() -> None:
    assert split_addr("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert split_addr("[::1]:7000") == ("::1", 7000)
    assert split_addr("redis.example:1") == ("redis.example", 1)
    for bad in ("6379", ":6379", "h:", "h:0", "h:70000", "h:x"):
        try:
            split_addr(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
