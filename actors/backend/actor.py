"""One backend: owns its process (or HTTP session) and its MCP client, serves its mailbox.

Each call to `run` is one incarnation, started and restarted by the backends supervisor.
The `BackendActor` object itself outlives incarnations: it keeps the mailbox's receive
end, the status snapshot and the stderr tail, so addresses and history survive restarts.

The SDK's `Client` is entered and exited by the incarnation's own task (SDK context
managers must not cross tasks). Calls run in the incarnation's nursery, many at once;
a progress notification from the backend resets that call's timeout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import mcp_types as types
import outcome
import structlog
import trio
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from assern.actors.backend.forward import ForwardLost
from assern.actors.backend.messages import (
    BackendRequest,
    BackendUnavailable,
    CallTool,
    Complete,
    ForwardCall,
    GetPrompt,
    Origin,
    ReadResource,
    SetLevel,
    Subscribe,
)
from assern.actors.backend.status import BackendState, BackendStatus
from assern.actors.backend.transport import ProcessLink, stdio_transport
from assern.actors.config.spec import ServerSpec
from assern.actors.router.catalog import BackendListing
from assern.supervisor.mailbox import reply_to
from assern.supervisor.trionics import main_error, raise_unwrapped

log = structlog.get_logger()

CLIENT_INFO = types.Implementation(name="assern", version="0.1.0")

#: (server, notification) for notifications clients should see: logs, resource updates
NotificationSink = Callable[[str, types.ServerNotification], None]


class BackendExited(Exception):
    def __init__(self, server: str, description: str) -> None:
        super().__init__(f"server '{server}' {description}")
        self.description = description


class BackendStartTimeout(Exception):
    pass


class BackendTimeout(Exception):
    pass


def describe_exit(code: int | None, stderr_tail: list[str]) -> str:
    if code is None:
        text = "lost its connection"
    elif code < 0:
        text = f"was killed by signal {-code}"
    else:
        text = f"exited with code {code}"
    if stderr_tail:
        text += "; last stderr: " + " | ".join(stderr_tail[-3:])
    return text


@attrs.define(eq=False)
class _Calls:
    """In-flight calls of one incarnation, for routing server-to-client requests."""

    origins: dict[int, Origin] = attrs.field(factory=dict)
    next_id: int = 0

    def add(self, origin: Origin | None) -> int:
        self.next_id += 1
        if origin is not None:
            self.origins[self.next_id] = origin
        return self.next_id

    def latest(self) -> Origin | None:
        return self.origins[max(self.origins)] if self.origins else None


class BackendActor:
    """The long-lived identity of one configured backend."""

    def __init__(
        self,
        spec: ServerSpec,
        inbox: trio.MemoryReceiveChannel[BackendRequest],
        *,
        on_change: Callable[[str], None],
        on_notification: NotificationSink,
    ) -> None:
        self.spec = spec
        self.inbox = inbox
        self._on_change = on_change
        self._on_notification = on_notification
        self.status = BackendStatus(
            server=spec.name,
            transport=spec.transport,
            state=BackendState.LAZY if spec.start == "lazy" else BackendState.STARTING,
        )
        self.listing: BackendListing | None = None
        #: whether tools/call may take the raw lane (a stdio backend on a handshake version)
        self.fast_path = False
        self._link = ProcessLink()
        self._calls = _Calls()
        self._exit_reason: str | None = None

    # ------------------------------------------------------------------ status

    def _set(self, **changes: Any) -> None:
        self.status = attrs.evolve(self.status, **changes)

    def mark(self, state: BackendState, **changes: Any) -> None:
        """Record a state the supervisor decided (restarting, failed, stopped)."""
        self._set(state=state, **changes)
        if state is not BackendState.READY:
            self.listing = None
        self._on_change(self.spec.name)

    # ------------------------------------------------------------ incarnation

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams] | str:
        if self.spec.transport == "stdio":
            return stdio_transport(self.spec, self._link, self._stderr_line)
        if self.spec.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.spec.url or "", headers=dict(self.spec.headers))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(
            self.spec.url or "", http_client=httpx2.AsyncClient(headers=dict(self.spec.headers))
        )

    def _stderr_line(self, line: str) -> None:
        log.info("backend_stderr", line=line)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """One incarnation: connect, list, report ready, serve until the backend goes away.

        Raises BackendExited when the process exits or the connection is lost, and
        BackendStartTimeout when it is not ready within `startup_timeout`. Cancellation
        stops the process gracefully (bounded).
        """
        self._link = ProcessLink()
        self._calls = _Calls()
        self._exit_reason = None
        spec = self.spec
        with structlog.contextvars.bound_contextvars(actor="backend", server=spec.name):
            self._set(state=BackendState.STARTING, pid=None, ready_since=None, in_flight=0)
            log.info("backend_starting", transport=spec.transport)
            started = trio.current_time()
            try:
                with trio.CancelScope(deadline=started + spec.startup_timeout) as startup:
                    async with Client(
                        self._transport(),  # type: ignore[arg-type]
                        mode="legacy" if spec.protocol == "legacy" else spec.protocol,  # type: ignore[arg-type]
                        cache=None,
                        client_info=CLIENT_INFO,
                        message_handler=self._on_message,
                        logging_callback=self._on_log,
                        sampling_callback=self._on_sampling,
                        elicitation_callback=self._on_elicitation,
                        list_roots_callback=self._on_roots,
                    ) as client:
                        await self._refresh_listing(client)
                        startup.deadline = math.inf
                        self.fast_path = (
                            self._link.forwarder is not None
                            and client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
                        )
                        self._set(
                            state=BackendState.READY,
                            pid=self._link.process.pid if self._link.process else None,
                            ready_since=time.time(),
                        )
                        log.info(
                            "backend_ready",
                            pid=self.status.pid,
                            tools=self.status.tools,
                            duration_ms=round((trio.current_time() - started) * 1000, 1),
                        )
                        self._on_change(spec.name)
                        task_status.started()
                        await self._serve(client)
                if startup.cancelled_caught:
                    raise BackendStartTimeout(
                        f"server '{spec.name}' was not ready within {spec.startup_timeout:g} s"
                    )
            except (BackendExited, BackendStartTimeout):
                raise
            except Exception as exc:
                cause = main_error(exc)
                if isinstance(cause, BackendExited | BackendStartTimeout):
                    raise_unwrapped(cause)
                if self._link.process is not None:  # a lost pipe: let the exit code arrive
                    with trio.move_on_after(1.0):
                        await self._link.exited.wait()
                raise self._exit_error(cause) from cause
            finally:
                self.listing = None
                self.fast_path = False
                self._set(
                    pid=None,
                    ready_since=None,
                    in_flight=0,
                    stderr_tail=tuple(self._link.stderr_tail),
                )

    def _exit_error(self, exc: BaseException) -> BackendExited:
        if self._link.exited.is_set() or self._link.exit_code is not None:
            return BackendExited(
                self.spec.name, describe_exit(self._link.exit_code, list(self._link.stderr_tail))
            )
        return BackendExited(self.spec.name, f"failed: {type(exc).__name__}: {exc}")

    async def _serve(self, client: Client) -> None:
        refresh = trio.Event()
        self._refresh_requested = refresh
        async with trio.open_nursery() as calls:
            calls.start_soon(self._refresher, client)
            calls.start_soon(self._serve_mailbox, client, calls)
            await self._link.exited.wait()
            self._exit_reason = describe_exit(self._link.exit_code, list(self._link.stderr_tail))
            calls.cancel_scope.cancel()
        log.warning("backend_exited", exit=self._link.exit_code)
        raise BackendExited(self.spec.name, self._exit_reason)

    async def _serve_mailbox(self, client: Client, calls: trio.Nursery) -> None:
        async for msg in self.inbox:
            calls.start_soon(self._handle, client, msg)

    # ------------------------------------------------------------------ listing

    async def _refresh_listing(self, client: Client) -> None:
        caps = client.server_capabilities
        tools: list[types.Tool] = []
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        prompts: list[types.Prompt] = []
        if caps.tools is not None:
            tools = await _all_pages(client.session.list_tools, "tools")
        if caps.resources is not None:
            resources = await _all_pages(client.session.list_resources, "resources")
            templates = await _all_pages(client.session.list_resource_templates, "resource_templates")
        if caps.prompts is not None:
            prompts = await _all_pages(client.session.list_prompts, "prompts")
        self.listing = BackendListing(
            server=self.spec.name,
            tools=tuple(tools),
            resources=tuple(resources),
            templates=tuple(templates),
            prompts=tuple(prompts),
            allowed=self.spec.allowed,
            capabilities=caps,
        )
        self._set(tools=len(tools), resources=len(resources), prompts=len(prompts))

    async def _refresher(self, client: Client) -> None:
        while True:
            await self._refresh_requested.wait()
            self._refresh_requested = trio.Event()
            try:
                await self._refresh_listing(client)
            except MCPError as exc:
                log.warning("backend_relist_failed", error=str(exc))
                continue
            log.info("backend_catalog_changed", tools=self.status.tools)
            self._on_change(self.spec.name)

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, Exception):
            log.warning("backend_bad_message", error=str(message))
            return
        if isinstance(
            message,
            types.ToolListChangedNotification
            | types.PromptListChangedNotification
            | types.ResourceListChangedNotification,
        ):
            self._refresh_requested.set()
        elif isinstance(message, types.ResourceUpdatedNotification):
            self._on_notification(self.spec.name, message)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self._on_notification(self.spec.name, types.LoggingMessageNotification(params=params))

    # ------------------------------------------- server-to-client, back to origin

    async def _ask_origin(self, method: str, params: Any) -> dict[str, Any] | types.ErrorData:
        origin = self._calls.latest()
        if origin is None or origin.ask is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"no client call of server '{self.spec.name}' to route {method} to",
            )
        payload = None if params is None else params.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            return await origin.ask(method, payload)
        except MCPError as exc:
            return exc.error

    async def _on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        answer = await self._ask_origin("sampling/createMessage", params)
        if isinstance(answer, types.ErrorData):
            return answer
        return types.CreateMessageResult.model_validate(answer)

    async def _on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer = await self._ask_origin("elicitation/create", params)
        if isinstance(answer, types.ErrorData):
            return answer
        return types.ElicitResult.model_validate(answer)

    async def _on_roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        answer = await self._ask_origin("roots/list", None)
        if isinstance(answer, types.ErrorData):
            return answer
        return types.ListRootsResult.model_validate(answer)

    # -------------------------------------------------------------------- calls

    async def _handle(self, client: Client, msg: BackendRequest) -> None:
        call_id = self._calls.add(msg.origin if isinstance(msg, CallTool | ForwardCall) else None)
        self._set(in_flight=self.status.in_flight + 1, calls_total=self.status.calls_total + 1)
        started = trio.current_time()
        answer: outcome.Outcome[Any] | None = None
        with msg.reply:
            try:
                answer = await self._answer(client, msg)
            except trio.Cancelled:
                # The incarnation is going away: tell the caller why, not just "gone".
                if self._exit_reason is not None:
                    reply_to(msg.reply, outcome.Error(BackendUnavailable(self.spec.name, self._exit_reason)))
                raise
            finally:
                self._calls.origins.pop(call_id, None)
                self._set(in_flight=max(0, self.status.in_flight - 1))
            if answer is not None:
                reply_to(msg.reply, answer)
            if isinstance(msg, CallTool | ForwardCall):
                log.info(
                    "tool_call_finished",
                    tool=msg.name,
                    ok=isinstance(answer, outcome.Value),
                    cancelled=answer is None,
                    duration_ms=round((trio.current_time() - started) * 1000, 2),
                )

    async def _answer(self, client: Client, msg: BackendRequest) -> outcome.Outcome[Any] | None:
        """Run one request; None when its caller cancelled it (nobody is waiting)."""
        try:
            with msg.scope, trio.move_on_after(self.spec.timeout) as deadline:
                return outcome.Value(await self._dispatch(client, msg, deadline))
            if msg.scope.cancelled_caught:
                return None
            return outcome.Error(
                BackendTimeout(f"server '{self.spec.name}' did not answer within {self.spec.timeout:g} s")
            )
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                return outcome.Error(await self._unavailable())
            return outcome.Error(exc)
        except ForwardLost:
            return outcome.Error(await self._unavailable())
        except Exception as exc:  # a broken backend answer must not kill the actor
            return outcome.Error(exc)

    async def _unavailable(self) -> BackendUnavailable:
        with trio.move_on_after(1.0):
            await self._link.exited.wait()
        return BackendUnavailable(
            self.spec.name, describe_exit(self._link.exit_code, list(self._link.stderr_tail))
        )

    async def _dispatch(self, client: Client, msg: BackendRequest, deadline: trio.CancelScope) -> Any:
        session = client.session
        match msg:
            case CallTool():
                sink = msg.progress

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    deadline.deadline = trio.current_time() + self.spec.timeout
                    if sink is not None:
                        await sink(progress, total, message)

                return await session.call_tool(
                    msg.name,
                    msg.arguments,
                    progress_callback=on_progress,
                    meta=msg.meta,  # type: ignore[arg-type]
                    allow_input_required=True,
                    allow_claimed=True,
                )
            case ForwardCall():
                forwarder = self._link.forwarder
                if forwarder is None:
                    raise ForwardLost("the backend is not running")
                sink = msg.progress

                async def forward_progress(progress: float, total: float | None, message: str | None) -> None:
                    deadline.deadline = trio.current_time() + self.spec.timeout
                    if sink is not None:
                        await sink(progress, total, message)

                params: dict[str, Any] = {"name": msg.name}
                if msg.arguments is not None:
                    params["arguments"] = msg.arguments
                return await forwarder.request(
                    "tools/call", params, forward_progress if sink is not None else None
                )
            case ReadResource():
                return await session.read_resource(msg.uri)
            case GetPrompt():
                return await session.get_prompt(msg.name, msg.arguments)
            case Complete():
                return await session.complete(msg.ref, msg.argument, msg.context_arguments)
            case Subscribe():
                if msg.subscribe:
                    await session.subscribe_resource(msg.uri)
                else:
                    await session.unsubscribe_resource(msg.uri)
                return None
            case SetLevel():
                await session.set_logging_level(msg.level)
                return None


async def _all_pages(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await fetch(params=params)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items
