"""Copied by bench/bench_memacct.py beside the built _memacct into a temporary tree put on
PYTHONPATH: with MEMACCT_HOOK=1 it imports _memacct (which wraps the allocators at import,
before pyrepl is imported, let alone serving); with MEMACCT_PORT=N it also answers one JSON line
per connection on 127.0.0.1:N from a daemon thread (the counted bytes, the allocator's own
figure, RSS, the pool walk's sum and its cost, CPython's own arena statistics), which is how the benchmark reads a running server without a pyrepl command."""

import os

if os.environ.get("MEMACCT_HOOK") == "1":
    import _memacct  # noqa: F401   (the hooks are in place from here on)

    _port = os.environ.get("MEMACCT_PORT")
    if _port:
        import json
        import socket
        import threading

        def _rss() -> int:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
            return 0

        def _serve(sock: socket.socket) -> None:
            while True:
                conn, _ = sock.accept()
                with conn:
                    heap, heap_ns = _memacct.heap()
                    base, gil, raw = _memacct.counted()
                    walk, walk_ns, walk_arenas = _memacct.walk()
                    dbg_arenas, dbg_bytes, dbg_ns = _memacct.debugstats()
                    conn.sendall(json.dumps({
                        "design": _memacct.design(), "walk": walk, "walk_ns": walk_ns,
                        "walk_arenas": walk_arenas, "dbg_arenas": dbg_arenas,
                        "dbg_bytes": dbg_bytes, "dbg_ns": dbg_ns,
                        "preinstall": _memacct.preinstall(),
                        "installed": _memacct.installed(), "used": _memacct.used(),
                        "baseline": base, "mem_obj": gil, "raw": raw, "heap": heap,
                        "heap_ns": heap_ns, "rss": _rss()}).encode() + b"\n")

        _sock = socket.socket()
        _sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _sock.bind(("127.0.0.1", int(_port)))
        _sock.listen(4)
        threading.Thread(target=_serve, args=(_sock,), name="memacct", daemon=True).start()
