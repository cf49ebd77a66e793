"""The cluster bus's sockets: the listener on the bus port, the connections to other nodes,
and the cluster's cron — the I/O shell of pyrepl/cluster.

Theory of operation: every bus connection is a :class:`BusProtocol` holding one sans-io
:class:`~pyrepl.cluster.link.Link` of the core's cluster state. Inbound connections are
accepted on ``bind``:cluster-port (the client port + 10000 by default) and handed to the state
(``accept``); the outbound ones are the links the state asks for (``links_to_open``), opened
with a connect timeout of the node timeout. Bytes read go to ``state.receive``; after each
event the shell runs the state's ``before_sleep``, writes what every link has to send, closes
the links the state closed, and opens the new ones (:meth:`ClusterBus.pump`). The cron runs
10 times a second, as Redis's clusterCron.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrepl.core.cluster import redirect_blocked
from pyrepl.net.listen import Listeners

if TYPE_CHECKING:
    from pyrepl.cluster.link import Link
    from pyrepl.cluster.state import ClusterState
    from pyrepl.core.server import ServerCore
    from pyrepl.net.tls import Contexts


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class BusProtocol(asyncio.Protocol):
    def __init__(self, bus: ClusterBus, link: Link | None = None) -> None:
        self.bus = bus
        self.link = link
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop: not a subclass)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("", 0)
        local = transport.get_extra_info("sockname") or ("", 0)
        st = self.bus.state
        st.now = self.bus.clock()
        if self.link is None:        # accepted
            self.link = st.accept(str(peer[0]), str(local[0]))
            self.bus.log.verbose(f"Accepting cluster node connection from {peer[0]}:{peer[1]}")
        elif self.link.closed or self.link not in st.links:   # dropped while connecting
            transport.close()
            return
        else:
            st.link_connected(self.link, str(local[0]))
        self.bus.transports[self.link] = self
        self.bus.pump()

    def data_received(self, data: bytes) -> None:
        link = self.link
        if link is None:
            return
        st = self.bus.state
        st.now = self.bus.clock()
        st.receive(link, data)
        # one pump a loop pass, after every link's bytes of that pass (Redis's beforeSleep
        # runs once per event loop iteration): a pass that reads twenty links' PINGs saves
        # nodes.conf once, not twenty times
        self.bus._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        link = self.link
        if link is None:
            return
        self.bus.transports.pop(link, None)
        st = self.bus.state
        if link in st.links:
            st.now = self.bus.clock()
            st.link_closed(link)
            self.bus.pump()


class ClusterBus:
    """The bus of one node: ``start`` binds and serves, ``close`` drops everything."""

    def __init__(self, core: ServerCore, state: ClusterState, log: Any,
                 bind: list[str], port: int, backlog: int,
                 flush: Callable[[], None],
                 tls: Callable[[], Contexts | None] = lambda: None) -> None:
        self.core = core
        # tls-cluster: the server's TLS contexts (rebuilt on CONFIG SET tls-*), read at each
        # connect; the listener serves TLS while the directive is on (``tls_changed``)
        self.tls = tls
        self.flush = flush      # the clients the state wrote to (pub/sub), flushed
        self.state = state
        self.log = log
        self.bind = bind
        self.port = port
        self.listeners = Listeners(lambda: BusProtocol(self), lambda: backlog)
        self.transports: dict[Link, BusProtocol] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._cron: asyncio.Task[None] | None = None
        self._connecting: set[asyncio.Task[None]] = set()
        self._pump_due = False

    def clock(self) -> int:
        now = _now_ms()
        self.core.now_ms = max(self.core.now_ms, now)
        return now

    def listen(self) -> None:
        """Bind the bus port (clusterInit's listenToPort); OSError when it cannot be."""
        self._socks = self.listeners.bind(self.bind, self.port)
        if not self._socks:
            raise OSError(0, "no bind address for the cluster bus")

    def _wake(self) -> None:
        """The state has output or a before-sleep job outside a bus event: one pump at the
        loop's next pass (Redis's beforeSleep)."""
        if not self._pump_due and self.loop is not None:
            self._pump_due = True
            self.loop.call_soon(self._due_pump)

    def _due_pump(self) -> None:
        self._pump_due = False
        self.pump()

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.state.wake = self._wake
        ctx = self._contexts()
        if ctx is not None:
            self.listeners.tls_context = ctx.server
        await self.listeners.serve(self._socks, ctx is not None)
        self._cron = self.loop.create_task(self._run_cron())
        self.pump()

    async def _run_cron(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            st = self.state
            try:
                st.cron(self.clock())
                if self.core.blocking.clients:   # (Redis: in clientsCron, per client)
                    redirect_blocked(self.core)
            except Exception as e:  # noqa: BLE001 - the bus must outlive a bug in one pass
                self.log.warning(f"cluster cron failed: {e!r}")
            self.pump()

    def pump(self) -> None:
        """After an event: the state's before-sleep, then every link's bytes written, closed
        links closed, new links opened, and the clients the state wrote to flushed."""
        st = self.state
        try:
            st.before_sleep(self.clock())
        except SystemExit:
            raise
        for link in list(st.links):
            proto = self.transports.get(link)
            if proto is None or proto.transport is None:
                continue
            if link.closed:
                proto.transport.close()
                continue
            if proto.transport.is_closing():     # (its connection_lost is on its way)
                continue
            data = link.data_to_send()
            if data:
                proto.transport.write(data)
            # (what the socket did not take stays in the transport: the link's send buffer,
            # held to cluster-link-sendbuf-limit by the cron)
            link.unsent = proto.transport.get_write_buffer_size()
        for link, proto in list(self.transports.items()):
            if link not in st.links and proto.transport is not None:
                self.transports.pop(link, None)
                proto.transport.close()
        for link in st.links_to_open():
            self._open(link)
        if self.core.pending_flush:
            self.flush()

    def _contexts(self) -> Contexts | None:
        """The TLS contexts while tls-cluster is on (None: plain TCP)."""
        return self.tls() if self.core.config.tls_cluster else None

    def tls_changed(self) -> None:
        """tls-cluster turned on or off, or the TLS contexts rebuilt: connections accepted
        from now on are TLS or not, with the new context (those open keep theirs, as
        Redis's accept handler decides at each accept)."""
        if self.loop is None:
            return
        ctx = self._contexts()
        self.listeners.reserve(ctx.server if ctx is not None else None, self.loop)

    def _open(self, link: Link) -> None:
        loop = self.loop
        node = link.node
        if loop is None or node is None:
            return
        timeout = max(self.state.cfg.node_timeout, 1000) / 1000
        ctx = self._contexts()
        # (tls-cluster: the node's certificate checked against the CA, not its host name)
        tls_args: dict[str, Any] = {} if ctx is None else {"ssl": ctx.client,
                                                           "server_hostname": ""}

        async def connect() -> None:
            try:
                await asyncio.wait_for(loop.create_connection(
                    lambda: BusProtocol(self, link), node.ip, node.cport, **tls_args), timeout)
            except (TimeoutError, OSError) as e:
                if link in self.state.links:
                    self.state.now = self.clock()
                    if node.ping_sent == 0:
                        node.ping_sent = self.state.now
                    self.state.link_failed(link, str(e) or type(e).__name__)
                    self.pump()

        task = loop.create_task(connect())
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    def close(self) -> None:
        if self._cron is not None:
            self._cron.cancel()
        for task in list(self._connecting):
            task.cancel()
        self.listeners.close()
        for proto in list(self.transports.values()):
            if proto.transport is not None:
                proto.transport.abort()
        self.transports.clear()
