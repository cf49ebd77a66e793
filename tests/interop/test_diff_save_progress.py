"""A BGSAVE's progress in INFO persistence, beside redis-server 7.0.15.

Both servers hold the same DEBUG POPULATE dataset and write it slowly (rdb-key-save-delay);
while the child runs, ``current_save_keys_total`` is the dataset's size, and
``current_save_keys_processed`` / ``current_fork_perc`` climb from 0 towards it; the child's
copy-on-write memory is sampled (``current_cow_size``, its age); after the save they fall back
to 0 and ``rdb_last_cow_size`` keeps the last figure.
"""

from __future__ import annotations

import time

import pytest

from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import RawClient, info
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

KEYS = 200_000


def persistence(c: RawClient) -> dict[str, str]:
    return info(c, "persistence")


@pytest.mark.parametrize("kind", ["redis", "pyrepl"])
def test_bgsave_progress_fields(kind: str) -> None:
    start = start_redis if kind == "redis" else start_pyrepl
    srv = start("--enable-debug-command", "yes") if kind == "redis" else start()
    c = RawClient(srv.port, timeout=60)
    try:
        assert c.call("DEBUG", "POPULATE", str(KEYS), "key", "10") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "25") == b"+OK\r\n"   # ~5 s
        before = persistence(c)
        assert before["current_save_keys_total"] == "0"
        assert before["current_save_keys_processed"] == "0"
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        seen: list[tuple[int, int, float]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            p = persistence(c)
            if p["rdb_bgsave_in_progress"] == "0":
                break
            seen.append((int(p["current_save_keys_processed"]),
                         int(p["current_save_keys_total"]), float(p["current_fork_perc"])))
            time.sleep(0.2)
        assert seen, "the save ended before INFO could see it"
        assert all(total == KEYS for _, total, _ in seen)
        processed = [n for n, _, _ in seen]
        assert processed == sorted(processed)                  # it only climbs
        assert any(0 < n < KEYS for n in processed)            # and is seen in between
        assert all(0.0 <= perc <= 100.0 for _, _, perc in seen)
        after = persistence(c)
        assert after["rdb_last_bgsave_status"] == "ok"
        assert after["current_save_keys_total"] == after["current_save_keys_processed"] == "0"
        assert after["current_fork_perc"] == "0.00"
        assert int(after["rdb_last_cow_size"]) >= 0
        assert c.call("CONFIG", "SET", "rdb-key-save-delay", "0") == b"+OK\r\n"
        wait_for(lambda: c.call("DBSIZE") == b":%d\r\n" % KEYS, timeout=5, what="dataset")
    finally:
        c.close()
        srv.stop()
