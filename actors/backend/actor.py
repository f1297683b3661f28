"""One backend: owns its process (or HTTP connection) and its MCP session, serves its mailbox.

Each call to `run` is one incarnation, started and restarted by the backends supervisor.
The `BackendActor` object itself outlives incarnations: it keeps the mailbox's receive
end, the status snapshot and the stderr tail, so addresses and history survive restarts.

An incarnation talks to its backend through a `BackendSession` (session.py): our own
handshake-era client for a stdio backend on protocol "legacy", the SDK's `Client` for
the others. The session is entered and exited by the incarnation's own task (the SDK's
context managers must not cross tasks). Calls run in the incarnation's nursery, many
at once; a progress notification from the backend resets that call's timeout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import structlog
import trio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from assern.actors.backend.calls import CallDesk
from assern.actors.backend.errors import (
    BackendExited,
    BackendHung,
    BackendStartTimeout,
    HandshakeFailed,
    describe_exit,
)
from assern.actors.backend.forward import ForwardLost
from assern.actors.backend.hooks import SessionHooks
from assern.actors.backend.messages import take
from assern.actors.backend.session import BackendSession, open_session
from assern.actors.backend.splice import CallReply, SplicedCall, watch_deadlines
from assern.actors.backend.status import BackendState, BackendStatus, doctor_field
from assern.actors.backend.transport import ProcessLink
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.router.catalog import BackendListing
from assern.supervisor.trionics import main_error, raise_unwrapped

if TYPE_CHECKING:
    from assern.actors.backend.messages import BackendRequest, Origin
    from assern.actors.backend.saved_catalog import CatalogStore
    from assern.actors.config.spec import ServerSpec

log = structlog.get_logger()

#: An idle backend is pinged this often; no answer within PING_TIMEOUT means it hangs.
PING_INTERVAL = 30.0
PING_TIMEOUT = 10.0

#: (server, notification) for notifications clients should see: logs, resource updates
NotificationSink = Callable[[str, types.ServerNotification], None]


def _counted(status: BackendStatus, listing: BackendListing) -> BackendStatus:
    """`status` with the counts of what `listing` offers."""
    return attrs.evolve(
        status, tools=len(listing.tools), resources=len(listing.resources), prompts=len(listing.prompts)
    )


class BackendActor:
    """The long-lived identity of one configured backend."""

    def __init__(
        self,
        spec: ServerSpec,
        inbox: trio.MemoryReceiveChannel[BackendRequest],
        *,
        on_change: Callable[[str], None],
        on_notification: NotificationSink,
        on_idle: Callable[[str], None] = lambda _server: None,
        on_spawn: Callable[[str, int | None], None] = lambda _server, _pid: None,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self.spec = spec
        self.inbox = inbox
        self._on_change = on_change
        self._on_notification = on_notification
        self._on_idle = on_idle
        self._on_spawn = on_spawn
        self._catalogs = catalogs
        #: what it offers: saved from an earlier run until it lists (saved_catalog.py)
        self.listing: BackendListing | None = catalogs.load(spec) if catalogs is not None else None
        # A lazy backend whose listing no earlier run saved is started once first, to learn
        # it (`probe`): until then it is starting, so that a first list waits for it.
        lazy = spec.start == "lazy" and self.listing is not None
        self._status = BackendStatus(
            server=spec.name,
            transport=spec.transport,
            state=BackendState.LAZY if lazy else BackendState.STARTING,
        )
        if self.listing is not None:
            self._status = _counted(self._status, self.listing)
        self._link = ProcessLink()
        self._ended = trio.Event()
        self._end: Exception | None = None
        self._refresh_requested = trio.Event()
        #: optional listings the backend refused, already logged once
        self._refused_listings: set[str] = set()
        #: the request half: mailbox requests, spliced calls and their books
        self.calls = CallDesk(
            spec,
            finish=self._finish,
            ended=lambda: self._end is not None,
            last_exit=lambda: self._status.last_exit,
        )

    # ------------------------------------------------------------------ status

    @property
    def status(self) -> BackendStatus:
        """The current snapshot (a new frozen value; the actor keeps replacing its own)."""
        in_flight = self.calls.in_flight
        return attrs.evolve(
            self._status,
            in_flight=in_flight,
            calls_total=self.calls.calls_total,
            idle_since=None if in_flight else self.calls.idle_since,
        )

    @property
    def state(self) -> BackendState:
        """The current state alone (cheaper than `status`, which builds a snapshot)."""
        return self._status.state

    # ------------------------------------------------------- the splice lane

    @property
    def fast_path(self) -> bool:
        """Whether calls may take the raw lane now (splice.py's `SpliceLane`): spliced, or
        posted to a streamable-HTTP backend (through the mailbox, `ForwardCall`)."""
        return self.calls.fast_path or self._link.poster is not None

    def splice(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        reply: CallReply,
        *,
        origin: Origin | None,
        request_id: str | int | None,
        progress: bool,
        meta: dict[str, Any] | None = None,
    ) -> SplicedCall | None:
        """See `SpliceLane.splice`: runs in the calling connection's reader task."""
        return self.calls.splice(
            name, arguments, reply, origin=origin, request_id=request_id, progress=progress, meta=meta
        )

    def _set(self, **changes: Any) -> None:
        old = self._status.state
        if changes.get("state", old) is not old:
            changes["state_since"] = time.time()
        self._status = attrs.evolve(self._status, **changes)
        if self._status.state is not old:
            log.info(
                "backend_state",
                server=self.spec.name,
                state=self._status.state.value,
                previous=old.value,
                restarts=self._status.restarts,
            )

    def mark(self, state: BackendState, **changes: Any) -> None:
        """Record a state the supervisor decided (restarting, failed, stopped, lazy).

        The last listing stays in the catalog while the backend restarts or sleeps (calls
        to its tools wait for it); it goes only when the backend failed or was stopped.
        """
        self._set(state=state, **changes)
        if state in (BackendState.FAILED, BackendState.STOPPED):
            self.listing = None
        self._on_change(self.spec.name)

    # ------------------------------------------------------------ incarnation

    def _hooks(self) -> SessionHooks:
        return SessionHooks(
            list_changed=self._request_refresh,
            notify=lambda notification: self._on_notification(self.spec.name, notification),
            bad_message=lambda error: log.warning("backend_bad_message", error=error),
            ask=self.calls.ask_origin,
            stderr=self._stderr_line,
            spawned=lambda pid: self._on_spawn(self.spec.name, pid),
            lost=lambda why: self._finish(BackendExited(self.spec.name, why)),
        )

    def _request_refresh(self) -> None:
        """A list changed: fetch the listing again (once, however many changes arrive meanwhile)."""
        self._refresh_requested.set()

    def _stderr_line(self, line: str) -> None:
        log.info("backend_stderr", line=line)
        self._set(stderr_tail=tuple(self._link.stderr_tail))

    async def probe(self) -> None:
        """Start the backend once to learn its listing, then stop it (for `start = "lazy"`)."""
        await self.run(probe=True)

    async def run(
        self, *, probe: bool = False, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One incarnation: connect, list, report ready, serve until the backend goes away.

        Raises BackendExited when the process exits or the connection is lost,
        BackendHung when it stops answering, and BackendStartTimeout when it is not
        ready within `startup_timeout`. Cancellation stops the process gracefully
        (bounded). With `probe`, it returns as soon as the listing is known.
        """
        self._link = ProcessLink()
        self.calls.begin(self._link)
        self._ended = trio.Event()
        self._end = None
        self._refresh_requested = trio.Event()
        spec = self.spec
        with structlog.contextvars.bound_contextvars(actor="backend", server=spec.name):
            self._set(state=BackendState.STARTING, pid=None, ready_since=None)
            log.info("backend_starting", transport=spec.transport)
            started = trio.current_time()
            try:
                with trio.CancelScope(deadline=started + spec.startup_timeout) as startup:
                    async with open_session(spec, self._link, self._hooks()) as session:
                        await self._refresh_listing(session)
                        startup.deadline = math.inf
                        if probe:
                            log.info("backend_probed", tools=self.status.tools)
                            self._on_change(spec.name)
                            return
                        self.calls.fast_path = (
                            self._link.forwarder is not None
                            and session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                        )
                        self._set(
                            state=BackendState.READY,
                            pid=self._link.process.pid if self._link.process else None,
                            ready_since=time.time(),
                        )
                        self.calls.idle_since = self._status.ready_since
                        log.info(
                            "backend_ready",
                            pid=self.status.pid,
                            tools=self.status.tools,
                            duration_ms=round((trio.current_time() - started) * 1000, 1),
                            **doctor_field(self.status),
                        )
                        self._on_change(spec.name)
                        task_status.started()
                        await self._serve(session)
                if startup.cancelled_caught:
                    raise BackendStartTimeout(
                        f"server '{spec.name}' was not ready within {spec.startup_timeout:g} s"
                    )
            except (BackendExited, BackendStartTimeout, BackendHung):
                raise
            except Exception as exc:
                cause = main_error(exc)
                if isinstance(cause, BackendExited | BackendStartTimeout | BackendHung):
                    raise_unwrapped(cause)
                lost = not isinstance(cause, HandshakeFailed | RpcError)
                if lost and self._link.process is not None:  # a lost pipe: let the exit code arrive
                    with trio.move_on_after(1.0):
                        await self._link.exited.wait()
                raise self._exit_error(cause) from cause
            finally:
                self.calls.fast_path = False
                if self.calls.in_flight:  # cut by the end: nothing runs any more
                    self.calls.idle_since = time.time()
                self.calls.in_flight = 0
                self._on_spawn(spec.name, None)
                self._set(
                    pid=None,
                    ready_since=None,
                    stderr_tail=tuple(self._link.stderr_tail),
                )

    def _exit_error(self, exc: BaseException) -> BackendExited:
        # The backend answered, and what it said cannot start a connection: that is why,
        # not the exit status of the process we then stopped.
        if isinstance(exc, HandshakeFailed):
            return BackendExited(self.spec.name, str(exc))
        if isinstance(exc, RpcError):
            return BackendExited(self.spec.name, f"could not start: {exc}")
        if self._link.exited.is_set() or self._link.exit_code is not None:
            return BackendExited(
                self.spec.name, describe_exit(self._link.exit_code, list(self._link.stderr_tail))
            )
        return BackendExited(self.spec.name, f"failed: {type(exc).__name__}: {exc}")

    def _finish(self, error: Exception) -> None:
        """End this incarnation with `error` (the first reason wins)."""
        if self._end is None:
            self._end = error
            self._ended.set()

    async def _serve(self, session: BackendSession) -> None:
        self.calls.last_activity = trio.current_time()
        async with trio.open_nursery() as calls:
            if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                # before the mailbox: a subscription taken from it must find the stream
                # being opened, and wait for its acknowledgement (sdk_client.py `_follow`)
                await calls.start(self._listen, session)
            calls.start_soon(self._refresher, session)
            calls.start_soon(self._serve_mailbox, session, calls)
            calls.start_soon(self._watch_exit)
            calls.start_soon(self._ping, session)
            calls.start_soon(watch_deadlines, self.calls.spliced, self.spec.timeout, self.calls.expire)
            if self.spec.idle_timeout is not None:
                calls.start_soon(self._watch_idle, self.spec.idle_timeout)
            await self._ended.wait()
            end = self._end
            assert end is not None
            self.calls.exit_reason = str(getattr(end, "description", end))
            calls.cancel_scope.cancel()
        if isinstance(end, BackendHung):
            log.warning("backend_hung", reason=end.description)
        else:
            log.warning("backend_exited", exit=self._link.exit_code, reason=self.calls.exit_reason)
        raise end

    async def _listen(
        self, session: BackendSession, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Follow a 2026-07-28 backend's changes: they arrive on a `subscriptions/listen`
        stream. Started once the stream is being opened (or known not to be)."""
        caps = session.server_capabilities
        pinned = self._pinned()  # capabilities unknown: ask for all, the server honours a subset
        wanted = {
            "tools_list_changed": pinned or bool(caps.tools and caps.tools.list_changed),
            "prompts_list_changed": pinned or bool(caps.prompts and caps.prompts.list_changed),
            "resources_list_changed": pinned or bool(caps.resources and caps.resources.list_changed),
        }
        follows_resources = pinned or bool(caps.resources and caps.resources.subscribe)
        if not any(wanted.values()) and not follows_resources:
            task_status.started()
            return
        task_status.started()  # `listen` marks its stream as opening before it first waits
        try:
            await session.listen(
                tools=wanted["tools_list_changed"],
                prompts=wanted["prompts_list_changed"],
                resources=wanted["resources_list_changed"],
            )
        except (RpcError, ForwardLost, RuntimeError) as exc:  # refused, or the stream was lost
            log.warning("backend_listen_ended", error=str(exc))

    async def _watch_exit(self) -> None:
        await self._link.exited.wait()
        self._finish(
            BackendExited(self.spec.name, describe_exit(self._link.exit_code, list(self._link.stderr_tail)))
        )

    async def _ping(self, session: BackendSession) -> None:
        """Ping a quiet backend now and then; silence means it hangs and is restarted."""
        while True:
            await trio.sleep(PING_INTERVAL)
            if trio.current_time() - self.calls.last_activity < PING_INTERVAL or self.calls.in_flight:
                continue
            with trio.move_on_after(PING_TIMEOUT) as waited:
                try:
                    await session.send_ping()
                except RpcError:
                    pass  # an error is an answer too: the backend is alive
            if waited.cancelled_caught:
                self._finish(BackendHung(self.spec.name, f"did not answer a ping within {PING_TIMEOUT:g} s"))
                return

    async def _watch_idle(self, idle_timeout: float) -> None:
        """Ask to be put to sleep after `idle_timeout` s without calls (lazy backends)."""
        while True:
            await trio.sleep_until(self.calls.last_activity + idle_timeout)
            quiet_s = trio.current_time() - self.calls.last_activity
            if quiet_s >= idle_timeout and self.calls.in_flight == 0:
                log.info(
                    "backend_idle",
                    idle_s=round(quiet_s, 1),
                    idle_timeout_s=idle_timeout,
                    idle_since=self.calls.idle_since,
                    calls_total=self.calls.calls_total,
                )
                self._on_idle(self.spec.name)
                return

    async def _serve_mailbox(self, session: BackendSession, calls: trio.Nursery) -> None:
        async for msg in self.inbox:
            calls.start_soon(self.calls.handle, session, take(msg))

    # ------------------------------------------------------------------ listing

    def _pinned(self) -> bool:
        """A protocol version pin: no handshake, so the backend's capabilities are unknown."""
        return self.spec.protocol not in ("legacy", "auto")

    async def _refresh_listing(self, session: BackendSession) -> None:
        caps = session.server_capabilities
        unknown = self._pinned()  # ask for everything; what it does not serve stays empty
        tools: list[types.Tool] = []
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        prompts: list[types.Prompt] = []
        # tools/list is what a backend is for: when it advertises tools and cannot list them,
        # it cannot start. The other listings are optional: a backend that advertises them
        # loosely (the SDK's low-level Server answers resources/templates/list with -32601
        # when no handler is registered) has an empty one.
        if caps.tools is not None or unknown:
            tools = await _all_pages(session.list_tools, "tools", refused=self._refused if unknown else None)
        if caps.resources is not None or unknown:
            resources = await _all_pages(session.list_resources, "resources", refused=self._refused)
            templates = await _all_pages(
                session.list_resource_templates, "resource_templates", refused=self._refused
            )
        if caps.prompts is not None or unknown:
            prompts = await _all_pages(session.list_prompts, "prompts", refused=self._refused)
        self.listing = BackendListing(
            server=self.spec.name,
            tools=tuple(tools),
            resources=tuple(resources),
            templates=tuple(templates),
            prompts=tuple(prompts),
            allowed=self.spec.allowed,
            rules=self.spec.rules,
            capabilities=caps,
            instructions=session.instructions,
        )
        self._status = _counted(self._status, self.listing)
        if self._catalogs is not None:
            await trio.to_thread.run_sync(self._catalogs.save, self.spec, self.listing)

    def _refused(self, listing: str, error: RpcError) -> None:
        """An optional listing the backend refused: it has none; say so once per listing."""
        if listing in self._refused_listings:
            return
        self._refused_listings.add(listing)
        unsupported = error.code == types.METHOD_NOT_FOUND or "not supported" in error.message.lower()
        report = log.debug if unsupported else log.warning
        report("backend_listing_empty", listing=listing, code=error.code, error=error.message)

    async def _refresher(self, session: BackendSession) -> None:
        while True:
            await self._refresh_requested.wait()
            self._refresh_requested = trio.Event()
            try:
                await self._refresh_listing(session)
            except (RpcError, ForwardLost) as exc:
                log.warning("backend_relist_failed", error=str(exc))
                continue
            log.info("backend_catalog_changed", tools=self.status.tools, **doctor_field(self.status))
            self._on_change(self.spec.name)


async def _all_pages(
    fetch: Callable[[str | None], Awaitable[Any]],
    field: str,
    *,
    refused: Callable[[str, RpcError], None] | None = None,
) -> list[Any]:
    """Every page of one list.

    With `refused`, the list is optional: a backend that answers it with an error has
    none (`refused` hears why); without it, the error is raised.
    """
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):
        try:
            page = await fetch(cursor)
        except RpcError as exc:
            if refused is not None:
                refused(field, exc)
                return items
            raise
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items
