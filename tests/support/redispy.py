"""redis-py views of a running server (e2e, interop and analytics tests): a client, INFO
replication, DEBUG DIGEST, whether replicas are in sync, and killing the replicas' links."""

from __future__ import annotations


def r(port: int, db: int = 0, timeout: float = 20):  # -> redis.Redis
    """A redis-py client of the server on ``port`` (imported late: unit tests do not need it)."""
    import redis
    return redis.Redis(port=port, db=db, socket_timeout=timeout)


def repl(port: int) -> dict:
    """``INFO replication`` of the server on ``port``."""
    with r(port) as c:
        return c.info("replication")


def digest(port: int) -> str:
    """``DEBUG DIGEST`` of the server on ``port``, as text."""
    with r(port) as c:
        return c.execute_command("DEBUG", "DIGEST").decode()


def in_sync(master: int, *replicas: int) -> bool:
    """Every replica's link is up and at the master's ``master_repl_offset``."""
    off = repl(master)["master_repl_offset"]
    for p in replicas:
        i = repl(p)
        if i.get("master_link_status") != "up" or i.get("slave_repl_offset") != off:
            return False
    return True


def kill_replica_links(master: int) -> int:
    """CLIENT KILL TYPE replica on ``master``: how many links it closed."""
    with r(master) as c:
        return int(c.execute_command("CLIENT", "KILL", "TYPE", "replica"))
