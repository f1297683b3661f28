"""The root of the tree: config -> router -> backends -> listener, rest_for_one.

`Tree` creates every mailbox and snapshot cell once, so addresses survive restarts of
the actors that own them, and wires the actors together. The root supervisor restarts a
crashed core actor and everything started after it; a core actor that keeps crashing
takes the tree down (escalation), a backend never does.

`assern serve` builds its tree with the front door that already holds stdio
(app/front_door.py); the listener takes it over when it starts.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import TYPE_CHECKING

import attrs
import structlog
import trio

from assern.actors.backend.backends import BackendsActor, BackendsMsg, Directory
from assern.actors.backend.pool import BackendPool, ViewBackends
from assern.actors.backend.saved_catalog import CatalogStore, catalog_folder
from assern.actors.config.actor import ConfigActor, ConfigMsg, Reload
from assern.actors.config.listen import Bind
from assern.actors.gate.asyncio_host import AsyncioHost
from assern.actors.identity import __version__
from assern.actors.listener.actor import BackendNote, ListenerActor, SocketService
from assern.actors.listener.control import ControlPlane, status_document
from assern.actors.listener.page.actor import OpenPage, PageActor, PageAddress
from assern.actors.listener.report import InstanceInfo
from assern.actors.listener.roots_check import config_folder
from assern.actors.listener.session import SessionContext
from assern.actors.listener.stdio import release_stdio
from assern.actors.router.actor import RouterActor, RouterMsg
from assern.actors.router.capabilities import CapabilityCache
from assern.actors.router.capability_file import cache_file
from assern.actors.router.catalog import Catalog
from assern.actors.router.views import CatalogViews
from assern.actors.search.learned import NOTHING, Learned, use_file
from assern.actors.search.learned_actor import LearnedActor
from assern.actors.search.semantic import search_expected
from assern.actors.search.semantic_actor import SemanticActor
from assern.app.detach import FAILED, STAYING, STOPPED, LauncherLink
from assern.app.election import Primary
from assern.app.instance import InstanceLock, fingerprint
from assern.app.logtail import tail_events
from assern.supervisor.cell import Cell
from assern.supervisor.io.logs import LOG_FILE
from assern.supervisor.io.process import PidRegistry, sweep_orphans
from assern.supervisor.mailbox import call, open_mailbox
from assern.supervisor.spec import (
    ChildKind,
    ChildSpec,
    ChildStart,
    Restart,
    RestartPolicy,
    Strategy,
    SupervisorSpec,
)
from assern.supervisor.supervisor import open_supervisor

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    import mcp_types as types

    from assern.actors.config.listen import ListenSpec
    from assern.actors.config.spec import ResolvedConfig
    from assern.actors.listener.http.server import HttpListen
    from assern.actors.listener.page.asgi import LogTail
    from assern.actors.search.semantic import Semantic
    from assern.app.front_door import FrontDoor

log = structlog.get_logger()

_CORE_POLICY = RestartPolicy(
    restart=Restart.PERMANENT, max_restarts=3, restart_window=30.0, backoff_initial=0.1, backoff_max=1.0
)


#: The asyncio loop's actor: restarted (its calls in flight answered with an error) a few
#: times, then left stopped, which answers asyncio middlewares' calls with an error.
_ASYNCIO_POLICY = RestartPolicy(
    restart=Restart.TRANSIENT, max_restarts=3, restart_window=60.0, backoff_initial=0.5, backoff_max=5.0
)
_SEMANTIC_POLICY = RestartPolicy(
    restart=Restart.TRANSIENT, max_restarts=2, restart_window=60.0, backoff_initial=1.0, backoff_max=5.0
)


@attrs.frozen(kw_only=True, eq=False)
class Hosting:
    """How a primary is reached besides its stdio, and whom it answers to.

    Attributes:
        primary: The sockets this process won at the election.
        daemon: Stay up with no client at all (`assern daemon`).
        launcher: The link to the launcher of a detached primary (`assern serve`).
    """

    primary: Primary
    daemon: bool = False
    launcher: LauncherLink | None = None


@attrs.frozen(kw_only=True, eq=False)
class HttpSocket:
    """The HTTP front's socket, bound before the tree starts, and the address asked for."""

    sock: socket.socket
    bind: Bind

    def address(self) -> str:
        """HOST:PORT as bound (the port chosen when 0 was asked for)."""
        return str(attrs.evolve(self.bind, port=self.sock.getsockname()[1]))


def log_reader(path: Path | None) -> LogTail:
    """The status page's log tail: the last lines of the log at `path` (none without one),
    read in a worker thread."""

    async def read(level: str | None, count: int) -> Sequence[Mapping[str, Any]]:
        if path is None:
            return []
        return await trio.to_thread.run_sync(tail_events, path, level, count)

    return read


class Tree:
    """Everything one running assern holds: cells, mailboxes and the four core actors.

    With `hosting`, the tree is a primary: the listener also serves the MCP and control
    sockets, and the tree stops when its last client is gone (a daemon: when told to).
    With `door` (and `stdio`), the stdio client is taken over from that front door;
    without one, the listener claims stdio itself.
    """

    def __init__(
        self,
        config: ResolvedConfig,
        load: Callable[[], ResolvedConfig],
        *,
        stdio: bool = True,
        handle_signals: bool = True,
        run_dir: Path | None = None,
        hosting: Hosting | None = None,
        door: FrontDoor | None = None,
        stdio_profile: str | None = None,
        http: HttpSocket | None = None,
        pool: BackendPool | None = None,
        label: str = "",
        state_home: Path | None = None,
    ) -> None:
        """`run_dir` is this instance's folder under `$ASSERN_HOME` (its pid registry; the
        home beside it keeps its saved state); a daemon's view has none of its own (its
        backends are the pool's) and gives the home for its saved state as `state_home`:
        remembered capabilities, what search learned, the semantic cache."""
        self.handle_signals = handle_signals
        home = run_dir.parent if run_dir is not None else state_home
        self.hosting = hosting
        self.started_at = time.time()
        # The process groups this instance starts, for the sweep after a kill -9 of it.
        self.pids = PidRegistry(run_dir / "pids") if run_dir is not None else None
        self.config = Cell(config)
        self.catalog: Cell[Catalog] = Cell(Catalog())
        self.views = CatalogViews(self.catalog)
        self.semantic: Cell[Semantic | None] = Cell(None)
        self.learned: Cell[Learned] = Cell(NOTHING)
        self.directory: Cell[Directory] = Cell({})
        self.settled = trio.Event()
        self.stopped = trio.Event()
        self._cancel = trio.CancelScope()
        #: an HTTP front is draining before the tree stops (see `shutdown`)
        self._draining = False

        self.config_send, config_recv = open_mailbox[ConfigMsg](4)
        self.backends_send, backends_recv = open_mailbox[BackendsMsg](1)
        self.router_send, router_recv = open_mailbox[RouterMsg](64)
        self.notes_send, notes_recv = open_mailbox[BackendNote](64)

        self.backends: BackendsActor | ViewBackends
        if pool is not None:  # a view of the workstation daemon: its backends are shared
            self.backends = ViewBackends(
                pool,
                backends_recv,
                label=label,
                router=self.router_send,
                on_notification=self._note,
                directory=self.directory,
                settled=self.settled,
            )
        else:
            self.backends = BackendsActor(
                backends_recv,
                router=self.router_send,
                on_notification=self._note,
                directory=self.directory,
                settled=self.settled,
                pids=self.pids,
                catalogs=CatalogStore(catalog_folder(run_dir.parent)) if run_dir is not None else None,
            )
        self.config_actor = ConfigActor(
            config_recv, load=load, current=self.config, backends=self.backends_send
        )
        # What each backend offered when it last ran: known at a client's initialize
        # before the backends are ready again (see actors/router/capabilities.py).
        self.capabilities = CapabilityCache(cache_file(home)) if home is not None else None
        # Opens the process's asyncio loop once a middleware declared `asyncio = true` is used.
        self.asyncio_host = AsyncioHost()
        self.router = RouterActor(
            router_recv,
            self.catalog,
            listings=self.backends.listings,
            settings=lambda: self.config.value.settings,
            specs=lambda: self.config.value.servers,
            capability_cache=self.capabilities,
            views=self.views,
            asyncio_host=self.asyncio_host,
        )
        self.shared = SessionContext(
            catalog=self.catalog,
            directory=lambda: self.directory.value,
            settled=self.settled,
            initialize_wait=config.settings.initialize_wait,
            remembered=self._remembered_capabilities,
            list_wait=min(10.0, max((s.startup_timeout for s in config.servers.values()), default=1.0)),
            views=self.views,
            profiles=lambda: self.config.value.settings.profiles,
            semantic=self.semantic,
            learning=lambda: self.config.value.settings.search.learn == "on",
            learned=self.learned,
            folder=lambda: config_folder(self.config.value),
        )
        self.learned_actor = LearnedActor(
            self.learned,
            self.shared.use,
            enabled=self.shared.learning,
            path=use_file(home) if home is not None else None,
        )
        self.semantic_actor = SemanticActor(
            self.catalog,
            self.semantic,
            enabled=lambda: self.config.value.settings.search.semantic != "off",
            cache_folder=cache_file(home).parent if home is not None else None,
            config=self.config,
            expected=lambda: search_expected(self.config.value.settings),
            searched=self.shared.searched,
        )
        self.page_send, self._page_recv = open_mailbox[OpenPage](4)
        #: the status page of a primary, served from the first `assernctl web` on
        self.page: PageActor | None = None
        self.log_path = home / "logs" / LOG_FILE if home is not None else None
        launcher = hosting.launcher if hosting is not None else None
        self.listener = ListenerActor(
            self.shared,
            notes_recv,
            stdio=stdio,
            on_stdio_closed=self._stdio_closed,
            on_idle=self.shutdown,
            on_staying=self._staying,
            stdio_gone=launcher.gone if launcher is not None else None,
            sockets=self._socket_service(hosting) if hosting is not None else None,
            door=door,
            stdio_profile=stdio_profile,
            http=self._http_listen(http) if http is not None else None,
        )

    def _http_listen(self, http: HttpSocket) -> HttpListen:
        from assern.actors.listener.http.server import HttpListen

        bind = http.bind
        made: list[tuple[ListenSpec, ListenSpec]] = []  # the last [listen] and its spec

        def spec() -> ListenSpec:
            """The current `[listen]` with the address actually served (read per request:
            made again only when a reload changed it)."""
            listen = self.config.value.listen
            if not made or made[0][0] is not listen:
                made[:] = [(listen, attrs.evolve(listen, http=bind))]
            return made[0][1]

        return HttpListen(sock=http.sock, bind=bind, spec=spec)

    def _socket_service(self, hosting: Hosting) -> SocketService:
        primary = hosting.primary
        info = InstanceInfo(
            pid=os.getpid(),
            slot=primary.slot.name,
            mcp_socket=str(primary.slot.mcp),
            control_socket=str(primary.slot.control),
            started_at=self.started_at,
            daemon=hosting.daemon,
            version=__version__,
        )
        plane = self.control_plane(info)
        logs = log_reader(self.log_path)
        self.page = PageActor(self._page_recv, status=lambda: status_document(plane), logs=logs)
        return SocketService(
            mcp=primary.mcp,
            control=primary.control,
            plane=plane,
            lock=lambda: InstanceLock(primary.lock).hold(),
            linger=hosting.daemon,
        )

    def control_plane(self, info: InstanceInfo) -> ControlPlane:
        """What the control socket may see and steer of this tree."""
        return ControlPlane(
            info=info,
            shared=self.shared,
            config=self.config,
            fingerprint=fingerprint,
            clients=lambda: self.listener.client_views(),
            reload_error=lambda: self.config_actor.reload_error,
            backends=self.backends_send,
            reload=self.reload_and_wait,
            shutdown=self.shutdown,
            # a primary serves its page; a workstation daemon's view has the daemon's
            page=self._open_page if self.hosting is not None else None,
        )

    async def _open_page(self) -> PageAddress:
        return await call(self.page_send, lambda reply: OpenPage(reply=reply))

    def _stdio_closed(self) -> None:
        if self.hosting is not None and self.hosting.launcher is not None:
            release_stdio()  # a detached primary must not hold its gone client's pipes

    def _staying(self) -> None:
        if self.hosting is not None and self.hosting.launcher is not None:
            self.hosting.launcher.release(STAYING)

    def capabilities_known(self) -> bool:
        """Whether every configured backend's capabilities are known (live, or remembered
        from an earlier run): an `initialize` answered now says all it will."""
        live = self.catalog.value.capabilities
        remembered = self._remembered_capabilities()
        return all(name in live or name in remembered for name in self.config.value.servers)

    def _remembered_capabilities(self) -> dict[str, types.ServerCapabilities]:
        if self.capabilities is None:
            return {}
        found = {}
        for name, spec in self.config.value.servers.items():
            caps = self.capabilities.get(spec)
            if caps is not None:
                found[name] = caps
        return found

    def _note(self, server: str, note: types.ServerNotification) -> None:
        try:
            self.notes_send.send_nowait(BackendNote(server=server, note=note))
        except trio.WouldBlock:
            log.warning("backend_notification_dropped", server=server, method=note.method)

    def shutdown(self) -> None:
        """Stop the whole tree (graceful: every backend gets its stop ladder).

        A primary first withdraws its sockets, so no new client reaches a stopping tree.
        An HTTP front first drains: it takes no new connection, its open requests get
        `[listen] graceful_timeout` seconds (the backends still serve them), then the
        tree stops.
        """
        if self.hosting is not None:
            self.hosting.primary.withdraw()
        if self.listener.http is None or self.listener.http_stopped.is_set() or self._draining:
            self._cancel.cancel()
            return
        self._draining = True
        log.info("http_draining", graceful_timeout=self.config.value.listen.graceful_timeout)
        self.listener.stop_http()
        # Whatever happens to the drain, the tree stops a little after its deadline.
        self._cancel.deadline = min(
            self._cancel.deadline, trio.current_time() + self.config.value.listen.graceful_timeout + 2.0
        )

    def reload(self, reason: str = "requested") -> None:
        try:
            self.config_send.send_nowait(Reload(reason=reason))
        except trio.WouldBlock:
            pass  # a reload is already queued

    async def reload_and_wait(self, limit: float = 30.0) -> str | None:
        """Reload now and wait for the outcome.

        Returns:
            None once the new configuration is in force, else why it is not (the
            running configuration stays).
        """
        version = self.config.version
        await self.config_send.send(Reload(reason="assernctl reload"))
        with trio.move_on_after(limit):
            while True:
                if self.config.version != version:
                    return None
                # The config actor took the message and is back at its mailbox: done.
                stats = self.config_send.statistics()
                error = self.config_actor.reload_error
                if error is not None and stats.current_buffer_used == 0 and stats.tasks_waiting_receive:
                    return error
                await trio.sleep(0.02)
        return f"the reload did not finish within {limit:g} s"

    async def _stop_after_drain(self) -> None:
        """Stop the tree once a draining HTTP front has stopped."""
        await self.listener.http_stopped.wait()
        if self._draining:
            log.info("http_drained")
            self._cancel.cancel()

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("signal_reload")
                    self.reload("SIGHUP")
                else:
                    log.info("signal_shutdown", signal=signal.Signals(signum).name)
                    self.shutdown()

    def _children(self) -> list[ChildSpec]:
        def core(name: str, start: ChildStart, kind: ChildKind = ChildKind.WORKER) -> ChildSpec:
            return ChildSpec(
                id=name, start=start, policy=_CORE_POLICY, escalate=True, kind=kind, shutdown_timeout=None
            )

        return [
            core("config", self.config_actor.run),
            core("router", self.router.run),
            core("backends", self.backends.run, ChildKind.SUPERVISOR),
            core("listener", self.listener.run),
            # Last: its restart restarts nothing else; exhausted, it leaves search to words.
            ChildSpec(id="semantic", start=self.semantic_actor.run, policy=_SEMANTIC_POLICY),
            # Last too: it only merges use counts into their file (restarts nothing else).
            ChildSpec(id="learned", start=self.learned_actor.run, policy=_SEMANTIC_POLICY),
            # Last too: its restart (the asyncio loop reopened) restarts nothing else.
            ChildSpec(id="asyncio", start=self.asyncio_host.run, policy=_ASYNCIO_POLICY),
            # A primary's status page (it waits for the first `assernctl web`), restarts alone.
            *([ChildSpec(id="page", start=self.page.run, policy=_SEMANTIC_POLICY)] if self.page else []),
        ]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until `shutdown()` (stdio closed, a signal) or an escalated failure."""
        with structlog.contextvars.bound_contextvars(actor="root"):
            log.info("assern_starting", servers=list(self.config.value.servers), pid=os.getpid())
            if self.pids is not None:
                swept = sweep_orphans(self.pids.path.parent)
                if swept:
                    log.warning("orphans_swept", pids=swept)
                # Whatever kills this process, its backends' groups die with it.
                log.info("watchdog_started", pid=self.pids.guard())
            clean = False
            try:
                with self._cancel:
                    async with trio.open_nursery() as nursery:
                        if self.handle_signals:
                            nursery.start_soon(self._signals)
                        nursery.start_soon(self._stop_after_drain)
                        async with open_supervisor(
                            SupervisorSpec(strategy=Strategy.REST_FOR_ONE, intensity=5, period=30.0),
                            self._children(),
                        ):
                            task_status.started()
                            await trio.sleep_forever()
                clean = True
            finally:
                if self.page is not None:
                    self.page.close()
                if self.pids is not None:
                    self.pids.close()
                if self.hosting is not None:
                    self.hosting.primary.withdraw()
                    if self.hosting.launcher is not None:
                        self.hosting.launcher.release(STOPPED if clean else FAILED)
                self.stopped.set()
                log.info("assern_stopped")
