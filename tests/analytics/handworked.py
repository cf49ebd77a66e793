"""A hand-worked sync log of one master M and one replica R (``ev`` writes one event at
``T`` + t seconds): ``scenario`` holds one sync of each kind, whose answers the oracle's
tests work out by hand."""

from __future__ import annotations

from pyrepl.events import to_json_line

M, R = "10.0.0.1:6379", "10.0.0.2:6380"
T = 1_700_000_000.0


def ev(t: float, event: str, node: str, **f) -> str:
    role = "master" if node == M else "replica"
    peer = R if node == M else M
    return to_json_line({"ts": round(T + t, 3), "event": event, "node": node, "run_id": "r",
                         "role": role, "peer": peer, **f})


def psync_without_history(t: float, replica_sync: str, master_sync: str,
                          backlog: int) -> list[str]:
    """``PSYNC ? -1`` sent at ``t``, the master's full-sync decision (no history) 1 ms later,
    its reply read 1 ms after that."""
    return [
        ev(t, "psync_sent", R, sync_id=replica_sync, req_replid="?", req_offset=-1),
        ev(t + 0.001, "psync_decision", M, sync_id=master_sync, result="full",
           reason="no-history", req_replid="?", req_offset=-1, backlog_size=backlog,
           backlog_histlen=backlog),
        ev(t + 0.002, "psync_reply", R, sync_id=replica_sync, result="full"),
    ]


def scenario() -> list[str]:
    """One partial sync, one offset-before-backlog full sync (rdb channel) that completes, a
    link down recovered by a partial sync, a classic full sync dropped by the output-buffer
    limit and its retry, and lag samples."""
    rid = "a" * 40
    b = 1 << 20
    return [
        # 1. partial at t=0
        ev(0.000, "psync_sent", R, sync_id="r1", req_replid=rid, req_offset=101),
        ev(0.001, "psync_decision", M, sync_id="m1", result="continue", reason="continue",
           req_replid=rid, req_offset=101, backlog_size=b, backlog_histlen=b),
        ev(0.001, "partial_sent", M, sync_id="m1", bytes=b // 4),
        ev(0.001, "replica_online", M, sync_id="m1", duration_ms=0.0),
        ev(0.002, "psync_reply", R, sync_id="r1", result="continue"),
        ev(0.002, "link_up", R, sync_id="r1", result="continue"),
        ev(0.010, "caught_up", R, sync_id="r1"),
        ev(5.000, "replica_lag", M, sync_id="m1", offset=1000, lag_bytes=100, lag_ms=10.0),
        ev(6.000, "replica_lag", M, sync_id="m1", offset=5000, lag_bytes=300, lag_ms=30.0),
        # 2. link down at t=10, reconnect with a partial at t=12
        ev(10.000, "link_down", R, sync_id="r1", reason="connection-lost"),
        ev(10.020, "replica_lost", M, sync_id="m1", reason="closed"),
        ev(11.000, "sync_failed", R, sync_id="r2", reason="connect-error"),
        ev(12.000, "psync_sent", R, sync_id="r3", req_replid=rid, req_offset=9000),
        ev(12.003, "psync_decision", M, sync_id="m2", result="continue", reason="continue",
           req_replid=rid, req_offset=9000, backlog_size=b, backlog_histlen=b),
        ev(12.003, "partial_sent", M, sync_id="m2", bytes=b // 2),
        ev(12.004, "psync_reply", R, sync_id="r3", result="continue"),
        ev(12.004, "link_up", R, sync_id="r3", result="continue"),
        ev(12.500, "caught_up", R, sync_id="r3"),
        # 3. link down at t=20, offset-before-backlog full sync over the rdb channel
        ev(20.000, "link_down", R, sync_id="r3", reason="timeout"),
        ev(21.000, "psync_sent", R, sync_id="r4", req_replid=rid, req_offset=50),
        ev(21.001, "psync_decision", M, sync_id="m3", result="rdbchannel",
           reason="offset-before-backlog", gap=3 * b, req_replid=rid, req_offset=50,
           backlog_size=b, backlog_histlen=b),
        ev(21.002, "psync_reply", R, sync_id="r4", result="rdbchannel", mode="rdb-channel"),
        ev(21.100, "fullsync_fork", M, sync_id="m3", mode="rdb-channel"),
        ev(21.200, "rdb_first_byte", R, sync_id="r4", mode="rdb-channel"),
        ev(22.200, "rdb_received", R, sync_id="r4", mode="rdb-channel", bytes=5_000_000),
        ev(22.200, "fullsync_rdb_sent", M, sync_id="m3", mode="rdb-channel", bytes=5_000_000),
        ev(22.500, "load_done", R, sync_id="r4", mode="rdb-channel"),
        ev(22.500, "replica_online", M, sync_id="m3", mode="rdb-channel", buffer_peak=1000),
        ev(22.501, "link_up", R, sync_id="r4", result="full", mode="rdb-channel"),
        ev(22.800, "buffer_drained", R, sync_id="r4", buffer_peak=900_000,
           buffer_limit=1_000_000),
        ev(22.801, "caught_up", R, sync_id="r4"),
        # 4. link down at t=30; a classic full sync dropped by the output-buffer limit, a retry
        ev(30.000, "link_down", R, sync_id="r4", reason="connection-lost"),
        ev(30.001, "replica_lost", M, sync_id="m3", reason="output-buffer-limit"),
        *psync_without_history(31.000, "r5", "m4", b),
        ev(31.010, "fullsync_fork", M, sync_id="m4", mode="disk"),
        ev(33.000, "rdb_first_byte", R, sync_id="r5", mode="disk"),
        ev(34.000, "replica_lost", M, sync_id="m4", reason="output-buffer-limit",
           buffer_peak=9_000_000, buffer_limit=8_000_000),
        ev(34.001, "sync_failed", R, sync_id="r5", reason="connection-lost"),
        *psync_without_history(35.000, "r6", "m5", b),
        ev(35.100, "fullsync_fork", M, sync_id="m5", mode="disk"),
        ev(36.000, "rdb_first_byte", R, sync_id="r6", mode="disk"),
        ev(37.000, "rdb_received", R, sync_id="r6", mode="disk", bytes=2_000_000),
        ev(37.500, "load_done", R, sync_id="r6", mode="disk"),
        ev(37.000, "replica_online", M, sync_id="m5", mode="disk", buffer_peak=7_000_000),
        ev(37.501, "link_up", R, sync_id="r6", result="full", mode="disk"),
        ev(38.501, "caught_up", R, sync_id="r6"),
        "not json at all\n",
        '{"ts": 1, "event": "link_down"}\n',
        '{"ts": 1, "event": "nope", "node": "x"}\n',
        "\n",
    ]
