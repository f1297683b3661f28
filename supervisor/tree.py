"""The root of the tree: config -> router -> backends -> listener, rest_for_one.

`Tree` creates every mailbox and snapshot cell once, so addresses survive restarts of
the actors that own them, and wires the actors together. The root supervisor restarts a
crashed core actor and everything started after it; a core actor that keeps crashing
takes the tree down (escalation), a backend never does.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import mcp_types as types
import structlog
import trio

from assern.actors.backend.backends import BackendsActor, BackendsMsg, Directory
from assern.actors.config.actor import ConfigActor, ConfigMsg, Reload
from assern.actors.config.spec import ResolvedConfig
from assern.actors.listener.actor import BackendNote, ListenerActor
from assern.actors.listener.session import SessionContext
from assern.actors.router.actor import RouterActor, RouterMsg
from assern.actors.router.catalog import Catalog
from assern.supervisor.cell import Cell
from assern.supervisor.mailbox import open_mailbox
from assern.supervisor.spec import ChildKind, ChildSpec, Restart, RestartPolicy, Strategy, SupervisorSpec
from assern.supervisor.supervisor import open_supervisor

log = structlog.get_logger()

_CORE_POLICY = RestartPolicy(
    restart=Restart.PERMANENT, max_restarts=3, restart_window=30.0, backoff_initial=0.1, backoff_max=1.0
)


class Tree:
    """Everything one running assern holds: cells, mailboxes and the four core actors."""

    def __init__(
        self,
        config: ResolvedConfig,
        load: Callable[[], ResolvedConfig],
        *,
        stdio: bool = True,
        handle_signals: bool = True,
    ) -> None:
        self.handle_signals = handle_signals
        self.config = Cell(config)
        self.catalog: Cell[Catalog] = Cell(Catalog())
        self.directory: Cell[Directory] = Cell({})
        self.settled = trio.Event()
        self.stopped = trio.Event()
        self._cancel = trio.CancelScope()

        self.config_send, config_recv = open_mailbox[ConfigMsg](4)
        self.backends_send, backends_recv = open_mailbox[BackendsMsg](1)
        self.router_send, router_recv = open_mailbox[RouterMsg](64)
        self.notes_send, notes_recv = open_mailbox[BackendNote](64)

        self.backends = BackendsActor(
            backends_recv,
            router=self.router_send,
            on_notification=self._note,
            directory=self.directory,
            settled=self.settled,
        )
        self.config_actor = ConfigActor(
            config_recv, load=load, current=self.config, backends=self.backends_send
        )
        self.router = RouterActor(
            router_recv,
            self.catalog,
            listings=self.backends.listings,
            settings=lambda: self.config.value.settings,
        )
        self.shared = SessionContext(
            catalog=self.catalog,
            directory=lambda: self.directory.value,
            settled=self.settled,
            list_wait=min(10.0, max((s.startup_timeout for s in config.servers.values()), default=1.0)),
        )
        self.listener = ListenerActor(self.shared, notes_recv, stdio=stdio, on_stdio_closed=self.shutdown)

    def _note(self, server: str, note: types.ServerNotification) -> None:
        try:
            self.notes_send.send_nowait(BackendNote(server=server, note=note))
        except trio.WouldBlock:
            log.warning("backend_notification_dropped", server=server, method=note.method)

    def shutdown(self) -> None:
        """Stop the whole tree (graceful: every backend gets its stop ladder)."""
        self._cancel.cancel()

    def reload(self, reason: str = "requested") -> None:
        try:
            self.config_send.send_nowait(Reload(reason=reason))
        except trio.WouldBlock:
            pass  # a reload is already queued

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
        def core(name: str, start: Callable[..., object], kind: ChildKind = ChildKind.WORKER) -> ChildSpec:
            return ChildSpec(
                id=name, start=start, policy=_CORE_POLICY, escalate=True, kind=kind, shutdown_timeout=None
            )

        return [
            core("config", self.config_actor.run),
            core("router", self.router.run),
            core("backends", self.backends.run, ChildKind.SUPERVISOR),
            core("listener", self.listener.run),
        ]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until `shutdown()` (stdio closed, a signal) or an escalated failure."""
        with structlog.contextvars.bound_contextvars(actor="root"):
            log.info("assern_starting", servers=list(self.config.value.servers))
            try:
                with self._cancel:
                    async with trio.open_nursery() as nursery:
                        if self.handle_signals:
                            nursery.start_soon(self._signals)
                        async with open_supervisor(
                            SupervisorSpec(strategy=Strategy.REST_FOR_ONE, intensity=5, period=30.0),
                            self._children(),
                        ):
                            task_status.started()
                            await trio.sleep_forever()
            finally:
                self.stopped.set()
                log.info("assern_stopped")
