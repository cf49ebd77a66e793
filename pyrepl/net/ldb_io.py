"""The Lua debugger's direct I/O on a client's socket (Redis's connBlock + connRead/connWrite
in ldbRepl), outside the event loop: the script runs inside a request, so the debugger waits
for its commands right there, the loop serving no one meanwhile (SYNC mode), or in a forked
child that never returns to the loop (YES mode). The socket stays non-blocking (the transport
shares it); waits are select() calls."""

from __future__ import annotations

import os
import select
import time

#: connSendTimeout(ldb.conn, 5000)
SEND_TIMEOUT_S = 5.0


class SocketChannel:
    """:class:`pyrepl.scripting.ldb.LdbChannelPort` on a connected socket's descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self) -> bytes:
        while True:
            try:
                return os.read(self.fd, 1024)
            except BlockingIOError:
                select.select([self.fd], [], [])
            except InterruptedError:
                continue
            except OSError:
                return b""

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + SEND_TIMEOUT_S
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                select.select([], [self.fd], [], left)
                continue
            except InterruptedError:
                continue
            except OSError:
                return       # (the next read sees the connection gone)
            view = view[n:]

    def close(self) -> None:
        """Nothing to give back: the descriptor is the transport's."""
