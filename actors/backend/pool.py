"""Backends shared by every configuration a daemon serves: one process per backend key.

The workstation daemon serves each connection the view of its own project's
configuration (its own config actor, router and catalog: app/daemon/). Those views do
not each start their backends: they draw them from one `BackendPool`, keyed by what
reaches a backend's process (`saved_catalog.backend_key`: command, args, the env values
the configuration gives it, working folder, transport, URL and headers). Three projects
that all configure the same `github` server share one process; a project whose `github`
differs in a token gets its own.

- The pool runs one ordinary `BackendsActor` (the one_for_one supervisor of backend
  actors, with its restarts, dormancy and saved lists) over the union of every view's
  backends, named in the pool by the first configuration's name (with a short hash of
  the key when that name is taken by another key). Its spec is that first
  configuration's: a shared backend's timeouts and restart policy are those of the view
  that started it, until no view uses it any more.
- A view's backends actor (`ViewBackends`, the `backends` child of a view's tree) sends
  the pool its desired set and gets back a directory of `ViewedBackend`s under its own
  names. A backend no view uses any more is stopped.
- The pool fans its backends' events out: a listing change pokes the router of every
  view that uses the backend (under that view's name), a notification (log message,
  resource update) goes to every such view's connections, which filter it as usual.
- A hand-given restart, stop or start (`assernctl restart SERVER`) acts on the shared
  process: every view that uses it sees it.

Calls never pass through the pool: a connection holds the shared actor's handle (through
its view) and splices or posts to it directly, and the backend's requests back to a
client (sampling, elicitation, roots) go to the connection whose call caused them, as
they do within one configuration.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs
import mcp_types as types
import outcome
import structlog
import trio

from assern.actors.backend.backends import BackendsActor, BackendsMsg, Directory, ServerCommand
from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.saved_catalog import backend_key
from assern.actors.backend.status import BackendState
from assern.actors.backend.viewed import ViewedBackend
from assern.actors.config.spec import DesiredSet, ServerSpec
from assern.actors.router.actor import RouterMsg, poke
from assern.supervisor.cell import Cell
from assern.supervisor.mailbox import open_mailbox, reply_to

if TYPE_CHECKING:
    from assern.actors.backend.saved_catalog import CatalogStore
    from assern.actors.router.catalog import BackendListing
    from assern.supervisor.io.process import PidRegistry

log = structlog.get_logger()

#: Hex digits of a backend key shown in a pool name, status and the log.
SHORT_KEY = 8


def short_key(key: str) -> str:
    return key[:SHORT_KEY]


def pool_name(name: str, key: str, taken: Mapping[str, str]) -> str:
    """The pool's name for a backend first configured as `name` with key `key`: the name
    itself unless another key has it (`taken`: pool name -> key), else name~hash."""
    if taken.get(name, key) == key:
        return name
    return f"{name}~{short_key(key)}"


@attrs.define(eq=False)
class ViewLink:
    """What the pool knows of one view: where its events go and which backends it uses."""

    id: int
    label: str
    router: trio.MemorySendChannel[RouterMsg]
    on_notification: Callable[[str, types.ServerNotification], None]
    #: the view's server name -> the pool's name of that backend
    names: dict[str, str] = attrs.field(factory=dict)
    #: set (and replaced) whenever one of its backends changed state or listing
    changed: trio.Event = attrs.field(factory=trio.Event)

    def wake(self) -> None:
        changed, self.changed = self.changed, trio.Event()
        changed.set()


@attrs.frozen(kw_only=True)
class SharedBackend:
    """One backend of the pool, for status: its key, pool name and the views using it."""

    key: str
    name: str
    handle: BackendHandle
    #: view label -> the name that view gives it
    users: Mapping[str, str]


class BackendPool:
    """One `BackendsActor` over the union of every view's backends (see the module)."""

    def __init__(
        self,
        *,
        pids: PidRegistry | None = None,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self._send, receive = open_mailbox[BackendsMsg](16)
        self._events_send, self._events = open_mailbox[RouterMsg](256)
        self.directory: Cell[Directory] = Cell({})
        # Settled from the start: every desired set starts its backends in the background,
        # so one view's slow starts never hold another view's desired set.
        settled = trio.Event()
        settled.set()
        self.actor = BackendsActor(
            receive,
            router=self._events_send,
            on_notification=self._note,
            directory=self.directory,
            settled=settled,
            pids=pids,
            catalogs=catalogs,
            log_fields=lambda server: {"views": self.users(server)},
        )
        self._ids = itertools.count(1)
        self._views: dict[int, ViewLink] = {}
        #: pool name -> key, and the spec the pool runs under that name
        self._keys: dict[str, str] = {}
        self._specs: dict[str, ServerSpec] = {}
        self._lock = trio.Lock()
        self._closing = False

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the pool's backends supervisor and the fan-out of its events."""
        with structlog.contextvars.bound_contextvars(actor="pool"):
            async with trio.open_nursery() as nursery:
                await nursery.start(self.actor.run)
                nursery.start_soon(self._fan_out)
                task_status.started()

    async def _fan_out(self) -> None:
        async for msg in self._events:
            for view in list(self._views.values()):
                if msg.server == "*":
                    poke(view.router, "*")
                    view.wake()
                    continue
                named = [own for own, pooled in view.names.items() if pooled == msg.server]
                for own in named:
                    poke(view.router, own)
                if named:
                    view.wake()

    def _note(self, server: str, note: types.ServerNotification) -> None:
        for view in list(self._views.values()):
            for own, pooled in view.names.items():
                if pooled == server:
                    view.on_notification(own, note)

    # ------------------------------------------------------------------- views

    def join(
        self,
        label: str,
        router: trio.MemorySendChannel[RouterMsg],
        on_notification: Callable[[str, types.ServerNotification], None],
    ) -> ViewLink:
        view = ViewLink(id=next(self._ids), label=label, router=router, on_notification=on_notification)
        self._views[view.id] = view
        return view

    def close(self) -> None:
        """The daemon stops: views that leave now stop nothing (every backend stops with
        the pool's supervisor)."""
        self._closing = True

    async def leave(self, view: ViewLink) -> None:
        """The view is gone: the backends only it used are stopped."""
        self._views.pop(view.id, None)
        if self._closing:
            return
        async with self._lock:
            await self._apply_union(f"view {view.label} stopped")

    async def apply(self, view: ViewLink, specs: Mapping[str, ServerSpec]) -> dict[str, BackendHandle]:
        """Make `specs` the view's backends; its directory, under its own names."""
        async with self._lock:
            names: dict[str, str] = {}
            for name, spec in specs.items():
                key = backend_key(spec)
                pooled = next((n for n, k in self._keys.items() if k == key), None)
                if pooled is None:
                    pooled = pool_name(name, key, self._keys)
                    self._keys[pooled] = key
                    self._specs[pooled] = attrs.evolve(spec, name=pooled)
                    log.info("backend_pooled", server=pooled, key=short_key(key), view=view.label, name=name)
                elif pooled not in view.names.values():
                    log.info("backend_shared", server=pooled, key=short_key(key), view=view.label, name=name)
                names[name] = pooled
            view.names = names
            await self._apply_union(f"view {view.label} no longer configures it")
            pool = self.directory.value
            return {
                name: _viewed(pool[pooled], spec, name)
                for name, spec in specs.items()
                if (pooled := names[name]) in pool
            }

    async def _apply_union(self, why: str) -> None:
        """Send the backends supervisor every backend some view uses; wait for its directory.

        `why`: what changed, for the log line of each backend no view uses any more.
        """
        used = {pooled for view in self._views.values() for pooled in view.names.values()}
        for pooled in [n for n in self._specs if n not in used]:
            handle = self.directory.value.get(pooled)
            status = handle.status if handle is not None else None
            idle = status.idle_since if status is not None else None
            log.info(
                "backend_unused",
                server=pooled,
                key=short_key(self._keys[pooled]),
                reason=why,
                views=[],
                state=status.state.value if status is not None else None,
                idle_s=round(time.time() - idle, 1) if idle is not None else None,
            )
            del self._specs[pooled], self._keys[pooled]
        desired = dict(self._specs)
        seen = self.directory.version
        await self._send.send(DesiredSet(specs=desired))
        while True:  # the supervisor publishes its directory once per desired set
            seen, current = await self.directory.changed(seen)
            if set(current) == set(desired):
                return

    async def command(self, view: ViewLink, msg: ServerCommand) -> None:
        """A hand-given command for one of the view's backends, done on the shared one."""
        pooled = view.names.get(msg.server)
        if pooled is None:
            known = ", ".join(view.names) or "none"
            unknown = KeyError(f"unknown server '{msg.server}' (configured: {known})")
            reply_to(msg.reply, outcome.Error(unknown))
            msg.reply.close()
            return
        await self._send.send(attrs.evolve(msg, server=pooled))

    # ------------------------------------------------------------------ status

    def users(self, pooled: str) -> list[str]:
        """The labels of the views that use the pool's backend `pooled`."""
        return [view.label for view in self._views.values() if pooled in view.names.values()]

    def shared(self) -> list[SharedBackend]:
        """Every backend of the pool with the views that use it (for status)."""
        found = []
        for pooled, handle in self.directory.value.items():
            users = {
                view.label: own
                for view in self._views.values()
                for own, used in view.names.items()
                if used == pooled
            }
            key = self._keys.get(pooled, "")
            found.append(SharedBackend(key=key, name=pooled, handle=handle, users=users))
        return found


def _viewed(shared: BackendHandle, spec: ServerSpec, name: str) -> BackendHandle:
    return BackendHandle(
        name=name, mailbox=shared.mailbox, view=ViewedBackend(shared.view, spec), wake=shared.wake
    )


class ViewBackends:
    """A view's `backends` child: its desired set applied through the pool.

    It stands where a `BackendsActor` stands in a tree of its own (app/tree.py): the same
    mailbox (`DesiredSet`, `ServerCommand`), the same directory cell and settled event,
    the same `listings()` for the router.
    """

    def __init__(
        self,
        pool: BackendPool,
        inbox: trio.MemoryReceiveChannel[BackendsMsg],
        *,
        label: str,
        router: trio.MemorySendChannel[RouterMsg],
        on_notification: Callable[[str, types.ServerNotification], None],
        directory: Cell[Directory],
        settled: trio.Event,
    ) -> None:
        self.pool = pool
        self.inbox = inbox
        self.label = label
        self._router = router
        self._on_notification = on_notification
        self.directory = directory
        self.settled = settled

    def listings(self) -> list[BackendListing]:
        """Listed backends' listings in configuration order (read by the router)."""
        return [h.listing for h in self.directory.value.values() if h.listing]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        link = self.pool.join(self.label, self._router, self._on_notification)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._settle, link)
                task_status.started()
                async for msg in self.inbox:
                    match msg:
                        case DesiredSet():
                            self.directory.set(await self.pool.apply(link, msg.specs))
                            poke(self._router, "*")
                            link.wake()
                        case ServerCommand():
                            await self.pool.command(link, msg)
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(15):
                await self.pool.leave(link)

    async def _settle(self, link: ViewLink) -> None:
        """Set `settled` once every backend of the view had its first start (as a
        `BackendsActor` does after its first desired set)."""
        while True:
            changed = link.changed
            handles = self.directory.value.values()
            if self.directory.version > 0 and not any(h.state is BackendState.STARTING for h in handles):
                self.settled.set()
                return
            await changed.wait()
