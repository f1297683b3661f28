"""The backends supervisor: one_for_one over one actor per configured backend.

It receives the desired set of backend specs from the config actor and applies only
the difference (start new, stop removed, restart changed), so unchanged backends keep
their process and their in-flight calls. It publishes the directory of backend handles
that client sessions use to reach a backend's mailbox.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import outcome
import structlog
import trio

from assern.actors.backend.actor import BackendActor
from assern.actors.backend.diff import diff_specs
from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.messages import BackendRequest, BackendUnavailable
from assern.actors.backend.status import BackendState, doctor_field, dormant_since
from assern.actors.config.spec import DesiredSet, ServerSpec
from assern.actors.router.actor import RouterMsg, poke
from assern.supervisor.mailbox import open_mailbox, reply_to
from assern.supervisor.spec import ChildSpec, Strategy, SupervisorSpec
from assern.supervisor.supervisor import ChildState, ChildStatus, Supervisor, open_supervisor
from assern.supervisor.trionics import main_error

if TYPE_CHECKING:
    import random

    import mcp_types as types

    from assern.actors.backend.saved_catalog import CatalogStore
    from assern.actors.router.catalog import BackendListing
    from assern.supervisor.cell import Cell
    from assern.supervisor.io.process import PidRegistry

log = structlog.get_logger()

BACKEND_MAILBOX = 64


@attrs.frozen(kw_only=True, eq=False)
class ServerCommand:
    """A hand-given command for one backend: restart, stop or start."""

    action: str
    server: str
    reply: trio.MemorySendChannel[outcome.Outcome[str]] = attrs.field(repr=False)


BackendsMsg = DesiredSet | ServerCommand

Directory = Mapping[str, BackendHandle]


class BackendsActor:
    def __init__(
        self,
        inbox: trio.MemoryReceiveChannel[BackendsMsg],
        *,
        router: trio.MemorySendChannel[RouterMsg],
        on_notification: Callable[[str, types.ServerNotification], None],
        directory: Cell[Directory],
        settled: trio.Event,
        rng: random.Random | None = None,
        pids: PidRegistry | None = None,
        catalogs: CatalogStore | None = None,
        log_fields: Callable[[str], Mapping[str, Any]] = lambda server: {},
    ) -> None:
        self.inbox = inbox
        #: more fields for the log lines of a backend's sleep and wake (the pool's views)
        self._log_fields = log_fields
        self._catalogs = catalogs
        self._router = router
        self._on_notification = on_notification
        self.directory = directory
        self.settled = settled
        self._rng = rng
        self._pids = pids
        self._sup: Supervisor | None = None
        #: the actors this supervisor owns, by server (the directory holds only their views)
        self._actors: dict[str, BackendActor] = {}
        self._nursery: trio.Nursery | None = None
        #: ("wake" | "idle", server): lifecycle requests from sessions and backend actors
        self._lifecycle_send, self._lifecycle_recv = open_mailbox[tuple[str, str]](64)

    def listings(self) -> list[BackendListing]:
        """Ready backends' listings in configuration order (read by the router)."""
        return [h.listing for h in self.directory.value.values() if h.listing]

    # ---------------------------------------------------------------- running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="backends"):
            async with open_supervisor(
                SupervisorSpec(strategy=Strategy.ONE_FOR_ONE, intensity=None),
                rng=self._rng,
                on_change=self._child_changed,
            ) as sup:
                try:
                    async with trio.open_nursery() as nursery:
                        self._sup, self._nursery = sup, nursery
                        nursery.start_soon(self._lifecycle, sup)
                        task_status.started()
                        async for msg in self.inbox:
                            match msg:
                                case DesiredSet():
                                    await self._apply(sup, msg.specs)
                                case ServerCommand():
                                    reply_to(msg.reply, await outcome.acapture(self._command, sup, msg))
                                    msg.reply.close()
                        nursery.cancel_scope.cancel()
                finally:
                    await self._stop_all(sup)

    async def _stop_all(self, sup: Supervisor) -> None:
        """Stop every backend at once (each with its own bounded stop ladder).

        Backends are independent of each other, so unlike core actors they need no
        reverse-order shutdown; stopping twenty one after another would outlast the
        grace period a client gives assern itself.
        """
        with trio.CancelScope(shield=True), trio.move_on_after(15):
            try:
                await sup.terminate_children(sup.child_ids())
            except trio.ClosedResourceError:
                pass  # the supervisor is already stopping them itself

    def _child_spec(self, actor: BackendActor) -> ChildSpec:
        return ChildSpec(
            id=actor.spec.name,
            start=actor.run,
            policy=actor.spec.policy,
            shutdown_timeout=6.0,
        )

    def _new_handle(self, spec: ServerSpec) -> BackendHandle:
        send, receive = open_mailbox[BackendRequest](BACKEND_MAILBOX)

        def lifecycle(what: str) -> Callable[[str], None]:
            def request(server: str) -> None:
                try:
                    self._lifecycle_send.send_nowait((what, server))
                except trio.WouldBlock:
                    pass  # a burst of the same request: one is enough

            return request

        actor = BackendActor(
            spec,
            receive,
            on_change=lambda server: poke(self._router, server),
            on_notification=self._on_notification,
            on_idle=lifecycle("idle"),
            on_spawn=self._pids.record if self._pids is not None else lambda _server, _pid: None,
            catalogs=self._catalogs,
        )
        wake = lifecycle("wake")
        self._actors[spec.name] = actor
        return BackendHandle(name=spec.name, mailbox=send, view=actor, wake=lambda: wake(spec.name))

    async def _apply(self, sup: Supervisor, desired: Mapping[str, ServerSpec]) -> None:
        current = dict(self.directory.value)
        diff = diff_specs({n: h.spec for n, h in current.items()}, desired)
        log.info(
            "backends_apply",
            start=list(diff.start),
            stop=list(diff.stop),
            restart=list(diff.restart),
            unchanged=len(diff.unchanged),
        )
        for name in diff.stop:
            await self._stop(sup, current.pop(name))
        for name in diff.restart:
            await self._stop(sup, current.pop(name))
        fresh = [self._new_handle(desired[name]) for name in (*diff.restart, *diff.start)]
        for handle in fresh:
            current[handle.name] = handle
        self.directory.set({name: current[name] for name in desired})
        if any(handle.listing is not None for handle in fresh):
            poke(self._router, "*")  # saved listings are listed while their backends start
        if self.settled.is_set() and self._nursery is not None:
            # Later sets start in the background: the next desired set (another view's
            # backends, in a daemon's pool) need not wait for these to start.
            for handle in fresh:
                self._nursery.start_soon(self._first_start, sup, handle)
            poke(self._router, "*")  # a reload's settings (exposure, profiles) reach the catalog
            return
        async with trio.open_nursery() as starting:
            for handle in fresh:
                starting.start_soon(self._first_start, sup, handle)
        self.settled.set()
        poke(self._router, "*")

    async def _first_start(self, sup: Supervisor, handle: BackendHandle) -> None:
        actor = self._actors.get(handle.name)
        if actor is None or handle.view is not actor:
            return  # removed or replaced by a later desired set before it started
        if handle.spec.start == "eager":
            await sup.start_child(self._child_spec(actor))
        else:
            await self._probe(handle)

    async def _stop(self, sup: Supervisor, handle: BackendHandle) -> None:
        if handle.name in sup.status():
            await sup.terminate_child(handle.name)
        handle.mailbox.close()
        self._actors[handle.name].mark(BackendState.STOPPED)
        self._drain(handle, "it was removed from the configuration")
        del self._actors[handle.name]

    async def _probe(self, handle: BackendHandle) -> None:
        """Learn a lazy backend's listing with one short start, then let it sleep (no
        start when its listing was saved by an earlier run)."""
        if handle.listing is not None:
            self._actors[handle.name].mark(BackendState.LAZY)
            return
        try:
            await self._actors[handle.name].probe()
        except Exception as exc:
            log.warning("backend_probe_failed", server=handle.name, error=str(main_error(exc)))
            self._actors[handle.name].mark(BackendState.LAZY, last_error=str(main_error(exc)))
        else:
            self._actors[handle.name].mark(BackendState.LAZY)
        if not self._inbox_empty(handle):
            handle.wake()  # calls that arrived while it was probed wait for a start

    async def _lifecycle(self, sup: Supervisor) -> None:
        async for what, name in self._lifecycle_recv:
            handle = self.directory.value.get(name)
            if handle is None:
                continue
            running = name in sup.status() and sup.status()[name].state is not ChildState.STOPPED
            if what == "wake" and not running and handle.state in (BackendState.LAZY, BackendState.DORMANT):
                status = handle.status
                asleep = dormant_since(status)
                log.info(
                    "backend_lazy_start",
                    server=name,
                    state=status.state.value,
                    dormant_s=round(time.time() - asleep, 1) if asleep is not None else None,
                    reason="a call",
                    **self._log_fields(name),
                )
                if name in sup.status():
                    await sup.terminate_child(name)
                await sup.start_child(self._child_spec(self._actors[handle.name]))
            elif what == "idle" and running:
                status = handle.status
                idle = status.idle_since
                log.info(
                    "backend_sleep",
                    server=name,
                    reason="idle_timeout",
                    idle_timeout_s=handle.spec.idle_timeout,
                    idle_s=round(time.time() - idle, 1) if idle is not None else None,
                    calls_total=status.calls_total,
                    **self._log_fields(name),
                )
                # First: its listing stays in the catalog.
                self._actors[handle.name].mark(BackendState.DORMANT)
                await sup.terminate_child(name)
                if not self._inbox_empty(handle):
                    handle.wake()  # calls arrived while it was stopping

    @staticmethod
    def _inbox_empty(handle: BackendHandle) -> bool:
        return handle.mailbox.statistics().current_buffer_used == 0

    async def _command(self, sup: Supervisor, msg: ServerCommand) -> str:
        handle = self.directory.value.get(msg.server)
        if handle is None:
            known = ", ".join(self.directory.value) or "none"
            raise KeyError(f"unknown server '{msg.server}' (configured: {known})")
        running = msg.server in sup.status()
        if msg.action == "restart":
            if running:
                await sup.restart_child(msg.server)
            else:
                await sup.start_child(self._child_spec(self._actors[handle.name]))
            return f"restarted {msg.server}"
        if msg.action == "stop":
            if running:
                await sup.terminate_child(msg.server)
            self._actors[handle.name].mark(BackendState.STOPPED)
            self._drain(handle, "it was stopped by hand")
            return f"stopped {msg.server}"
        if msg.action == "start":
            if not running:
                await sup.start_child(self._child_spec(self._actors[handle.name]))
            return f"started {msg.server}"
        raise ValueError(f"unknown action '{msg.action}' (restart, stop, start)")

    # ----------------------------------------------------------- supervision

    def _child_changed(self, status: ChildStatus) -> None:
        handle = self.directory.value.get(status.id)
        if handle is None:
            return
        actor = self._actors[handle.name]
        error = str(status.last_error) if status.last_error is not None else status.last_exit
        if status.state is ChildState.RESTARTING:
            actor.mark(
                BackendState.RESTARTING,
                restarts=status.restarts,
                next_restart_at=status.next_restart_at,
                last_exit=error,
                last_error=error,
            )
            log.warning(
                "backend_restart_scheduled",
                server=status.id,
                restarts=status.restarts + 1,  # the number this restart will be
                next_restart_at=status.next_restart_at,
                error=error,
                **doctor_field(actor.status),
            )
        elif status.state is ChildState.FAILED:
            actor.mark(BackendState.FAILED, restarts=status.restarts, last_exit=error, last_error=error)
            log.error(
                "backend_failed",
                server=status.id,
                restarts=status.restarts,
                error=error,
                **doctor_field(actor.status),
            )
            self._drain(handle, f"it failed after {status.restarts} restarts ({error})")
        elif status.state is ChildState.RUNNING:
            actor.mark(BackendState.READY, restarts=status.restarts, next_restart_at=None)
        elif status.state is ChildState.STARTING:
            actor.mark(BackendState.STARTING, restarts=status.restarts)
        elif actor.status.state is BackendState.READY:
            # STOPPED: it ended by itself and is not restarted (a transient or temporary backend).
            actor.mark(BackendState.STOPPED, last_exit=error)
            self._drain(handle, f"it ended and is not restarted ({error})")

    def _drain(self, handle: BackendHandle, reason: str) -> None:
        """Answer every queued request of a backend that will not serve them."""
        while True:
            try:
                msg = self._actors[handle.name].inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            with msg.reply:
                reply_to(msg.reply, outcome.Error(BackendUnavailable(handle.name, reason)))
