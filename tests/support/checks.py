"""What tests assert with: Redis's error texts and the ResponseError a redis-py call raises,
a WATCH that must abort, the pages of a SCAN-family iteration, and every move of a
replication state machine."""

from __future__ import annotations

from collections.abc import Callable

#: Error texts redis-py raises as ResponseError (the integration tests match them).
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INT = "value is not an integer or out of range"
NOT_FLOAT = "value is not a valid float"


def err(fn: Callable[..., object], *args: object, **kw: object) -> str:
    """The text of the ResponseError that ``fn(*args, **kw)`` must raise."""
    import pytest
    import redis

    with pytest.raises(redis.exceptions.ResponseError) as ei:
        fn(*args, **kw)
    return str(ei.value)


def assert_watch_aborts(r: object, key: str, write: Callable[[], object],
                        queue: Callable[[object], object]) -> None:
    """``write``, made after ``r`` (a redis-py client) WATCHes ``key`` and before its MULTI
    (which queues ``queue(pipeline)``), makes EXEC fail with a WatchError."""
    import pytest
    import redis

    with r.pipeline() as p:  # type: ignore[attr-defined]
        p.watch(key)
        write()
        p.multi()
        queue(p)
        with pytest.raises(redis.exceptions.WatchError):
            p.execute()


def scan_pages(scan: Callable[[int], tuple[int, object]], limit: int = 10_000) -> list:
    """The pages of a SCAN-family iteration, ``scan(cursor) -> (next cursor, page)`` from
    cursor 0 until it comes back to 0, which must happen within ``limit`` calls."""
    pages = []
    cursor = 0
    for _ in range(limit):
        cursor, page = scan(cursor)
        pages.append(page)
        if cursor == 0:
            return pages
    raise AssertionError(f"the cursor did not come back to 0 in {limit} calls")


def check_every_move(machine: object, go: Callable[[object], object], table: dict,
                     states: object, inputs: object, error: type[Exception]) -> None:
    """Every state x input of a replication state machine (``machine.state``, moved by
    ``go(input)``): the table's next state, or ``error`` naming the state and the input, with
    the state left unchanged."""
    import pytest

    for state in states:  # type: ignore[attr-defined]
        for inp in inputs:  # type: ignore[attr-defined]
            machine.state = state  # type: ignore[attr-defined]
            if (state, inp) in table:
                assert go(inp) is table[(state, inp)]
            else:
                with pytest.raises(error) as ei:
                    go(inp)
                assert (ei.value.state, ei.value.input) == (state, inp)  # type: ignore
                assert machine.state is state  # type: ignore[attr-defined]
