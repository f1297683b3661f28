"""Our own MCP client for a stdio backend on a handshake-era protocol version.

Handshake-era MCP over stdio is plain JSON-RPC, one message a line: `initialize`, then
`notifications/initialized`, then requests both ways. Speaking it ourselves keeps the
`mcp` SDK package (with the web stack its `__init__` pulls in) out of the aggregator;
only the protocol models of `mcp_types` are used, to validate what comes back.

Requests go out through the process's `Forwarder` (forward.py), the same request table
the raw lane uses, so one stdout reader routes every answer. What the `Forwarder` does
not take arrives in `receive`: the backend's notifications (list changes, resource
updates, log messages) and its own requests (ping, and sampling, elicitation and roots,
which a client of assern answers). Each request is answered in a task of its own, so
the stdout reader never waits for a client.

A result that does not validate fails that request alone, with an `RpcError` that says
what was wrong; a message that is not JSON-RPC is reported through `bad_message` and
skipped. Neither ends the connection.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, TypeVar

import mcp_types as types
import structlog
import trio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from assern.actors.backend.errors import HandshakeFailed, describe_invalid
from assern.actors.backend.forward import Forwarder, ForwardLost
from assern.actors.backend.rounds import refuse_foreign_state
from assern.actors.backend.transport import ProcessLink, stdio_process
from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.supervisor.io.reader import LineTooLong

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from assern.actors.backend.hooks import SessionHooks
    from assern.actors.backend.messages import ProgressSink, Rounds
    from assern.actors.config.spec import ServerSpec

log = structlog.get_logger()

M = TypeVar("M", bound=BaseModel)

#: Result keys that only the 2026-07-28 revision defines. The result models serve every
#: revision, so a handshake-era session drops them before validating: they are outside
#: its contract, and that revision's constraints must not fail an older backend's answer.
MODERN_RESULT_KEYS = frozenset({"resultType", "ttlMs", "cacheScope", "inputRequests", "requestState"})

#: What assern tells a backend it can do: the client's sampling, elicitation and roots,
#: which it asks for on the backend's behalf.
CLIENT_CAPABILITIES = types.ClientCapabilities(
    sampling=types.SamplingCapability(),
    elicitation=types.ElicitationCapability(
        form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()
    ),
    roots=types.RootsCapability(list_changed=True),
)

#: The backend's requests that a client of assern answers, and how their params look.
_ASKED: dict[str, type[BaseModel]] = {
    "sampling/createMessage": types.CreateMessageRequest,
    "elicitation/create": types.ElicitRequest,
    "roots/list": types.ListRootsRequest,
}

_LIST_CHANGED = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    }
)


class HandshakeClient:
    """Our side of an initialized handshake-era connection to one stdio backend (a `BackendSession`)."""

    def __init__(
        self,
        server: str,
        link: ProcessLink,
        hooks: SessionHooks,
        tasks: trio.Nursery,
        client_info: types.Implementation,
    ) -> None:
        self._server = server
        self._link = link
        self._hooks = hooks
        self._tasks = tasks
        self._client_info = client_info
        self._version: str | None = None
        self._capabilities = types.ServerCapabilities()
        self.server_info: types.Implementation | None = None
        #: the backend's requests being answered, by its id (it may cancel them)
        self._answering: dict[str | int, trio.CancelScope] = {}
        self._closed = False
        self._instructions: str | None = None

    @property
    def protocol_version(self) -> str | None:
        return self._version

    @property
    def server_capabilities(self) -> types.ServerCapabilities:
        return self._capabilities

    @property
    def instructions(self) -> str | None:
        return self._instructions

    def _forwarder(self) -> Forwarder:
        forwarder = self._link.forwarder
        if forwarder is None:
            raise ForwardLost("the backend is not running")
        return forwarder

    # ---------------------------------------------------------------- handshake

    async def initialize(self) -> types.InitializeResult:
        """Agree on a protocol version with the backend, then tell it we are ready.

        Raises HandshakeFailed when the answer is not a valid InitializeResult or names
        a version the handshake does not offer.
        """
        forwarder = self._forwarder()
        params = types.InitializeRequestParams(
            protocol_version=HANDSHAKE_PROTOCOL_VERSIONS[-1],
            capabilities=CLIENT_CAPABILITIES,
            client_info=self._client_info,
        )
        raw = await forwarder.request(
            "initialize", params.model_dump(by_alias=True, mode="json", exclude_none=True), cancellable=False
        )
        try:
            result = types.InitializeResult.model_validate(raw, by_name=False)
        except ValidationError as exc:
            raise HandshakeFailed(f"sent an invalid initialize result: {describe_invalid(exc)}") from None
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            offered = ", ".join(HANDSHAKE_PROTOCOL_VERSIONS)
            raise HandshakeFailed(
                f"chose protocol version '{result.protocol_version}', which the initialize handshake "
                f"does not offer (assern speaks {offered})"
            )
        self._version = result.protocol_version
        self._capabilities = result.capabilities
        self._instructions = result.instructions
        self.server_info = result.server_info
        await forwarder.notify("notifications/initialized")
        return result

    # ----------------------------------------------------------------- requests

    async def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        model: type[M],
        progress: ProgressSink | None = None,
    ) -> M:
        raw = await self._forwarder().request(method, params, progress)
        if not MODERN_RESULT_KEYS.isdisjoint(raw):
            raw = {key: value for key, value in raw.items() if key not in MODERN_RESULT_KEYS}
        try:
            return model.model_validate(raw, by_name=False)
        except ValidationError as exc:
            raise RpcError(
                types.INTERNAL_ERROR,
                f"server '{self._server}' sent an invalid {method} result: {describe_invalid(exc)}",
            ) from None

    async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
        return await self._request("tools/list", _page(cursor), types.ListToolsResult)

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult:
        return await self._request("resources/list", _page(cursor), types.ListResourcesResult)

    async def list_resource_templates(self, cursor: str | None = None) -> types.ListResourceTemplatesResult:
        return await self._request(
            "resources/templates/list", _page(cursor), types.ListResourceTemplatesResult
        )

    async def list_prompts(self, cursor: str | None = None) -> types.ListPromptsResult:
        return await self._request("prompts/list", _page(cursor), types.ListPromptsResult)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        meta: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
        rounds: Rounds | None = None,
    ) -> types.CallToolResult:
        refuse_foreign_state(rounds)
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        if meta:
            params["_meta"] = meta
        return await self._request("tools/call", params, types.CallToolResult, progress)

    async def read_resource(self, uri: str, *, rounds: Rounds | None = None) -> types.ReadResourceResult:
        refuse_foreign_state(rounds)
        return await self._request("resources/read", {"uri": uri}, types.ReadResourceResult)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None, *, rounds: Rounds | None = None
    ) -> types.GetPromptResult:
        refuse_foreign_state(rounds)
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self._request("prompts/get", params, types.GetPromptResult)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult:
        params: dict[str, Any] = {
            "ref": ref.model_dump(by_alias=True, mode="json", exclude_none=True),
            "argument": argument,
        }
        if context_arguments is not None:
            params["context"] = {"arguments": context_arguments}
        return await self._request("completion/complete", params, types.CompleteResult)

    async def subscribe_resource(self, uri: str) -> None:
        await self._request("resources/subscribe", {"uri": uri}, types.EmptyResult)

    async def unsubscribe_resource(self, uri: str) -> None:
        await self._request("resources/unsubscribe", {"uri": uri}, types.EmptyResult)

    async def set_logging_level(self, level: types.LoggingLevel) -> None:
        await self._request("logging/setLevel", {"level": level}, types.EmptyResult)

    async def send_ping(self) -> None:
        await self._request("ping", None, types.EmptyResult)

    async def listen(self, *, tools: bool, prompts: bool, resources: bool) -> None:
        """Nothing to do: a handshake-era backend sends its list changes as notifications."""

    # ----------------------------------------------------------------- incoming

    async def receive(self, message: Any) -> None:
        """What the stdout reader did not route to a pending request (never waits)."""
        if isinstance(message, Exception):
            unreadable = isinstance(message, framing.TooDeep | LineTooLong)
            self._hooks.bad_message(f"{'dropped a line' if unreadable else 'not JSON'}: {message}")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._hooks.bad_message(f"not a JSON-RPC 2.0 message: {_excerpt(message)}")
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" not in message:
                self._on_notification(method, message)
                return
            request_id = message["id"]
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                self._on_request(request_id, method, message.get("params"))
                return
        elif "id" in message and ("result" in message or "error" in message):
            return  # an answer nobody waits for any more (cancelled, timed out): dropped
        self._hooks.bad_message(f"not a JSON-RPC 2.0 message: {_excerpt(message)}")

    def closed(self) -> None:
        """The backend's pipes closed: its requests are not worth answering any more."""
        self._closed = True
        for scope in self._answering.values():
            scope.cancel()

    def _on_notification(self, method: str, message: dict[str, Any]) -> None:
        if method in _LIST_CHANGED:
            self._hooks.list_changed()
            return
        model: type[BaseModel]
        if method == "notifications/resources/updated":
            model = types.ResourceUpdatedNotification
        elif method == "notifications/message":
            model = types.LoggingMessageNotification
        elif method == "notifications/cancelled":
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            scope = self._answering.get(target) if isinstance(target, str | int) else None
            if scope is not None:
                scope.cancel()
            return
        else:
            return  # progress for a token no longer pending, and anything newer: not ours to act on
        try:
            notification = model.model_validate(
                {"method": method, "params": message.get("params")}, by_name=False
            )
        except ValidationError as exc:
            self._hooks.bad_message(f"invalid {method}: {describe_invalid(exc)}")
            return
        self._hooks.notify(notification)

    def _on_request(self, request_id: str | int, method: str, params: Any) -> None:
        if self._closed or request_id in self._answering:
            return
        scope = trio.CancelScope()
        self._answering[request_id] = scope
        self._tasks.start_soon(self._answer, request_id, method, params, scope)

    async def _answer(self, request_id: str | int, method: str, params: Any, scope: trio.CancelScope) -> None:
        """Answer one of the backend's requests (in a task of its own: it may wait for a client)."""
        try:
            with scope:
                try:
                    result = await self._result_for(method, params)
                except RpcError as exc:
                    await self._forwarder().respond(request_id, error=exc)
                except ForwardLost:
                    raise
                except Exception as exc:  # a broken answer must not end the connection
                    log.warning("backend_request_failed", method=method, error=str(exc))
                    error = RpcError(types.INTERNAL_ERROR, f"assern could not answer {method}: {exc}")
                    await self._forwarder().respond(request_id, error=error)
                else:
                    await self._forwarder().respond(request_id, result)
        except ForwardLost:
            pass  # the backend is gone: nobody to answer
        finally:
            self._answering.pop(request_id, None)

    async def _result_for(self, method: str, params: Any) -> dict[str, Any]:
        if method == "ping":
            return {}
        model = _ASKED.get(method)
        if model is None:
            raise RpcError(types.METHOD_NOT_FOUND, "Method not found", method)
        body: dict[str, Any] = {"method": method}
        if params is not None:
            body["params"] = params
        try:
            request = model.model_validate(body, by_name=False)
        except ValidationError as exc:
            raise RpcError(
                types.INVALID_PARAMS, f"invalid {method} params: {describe_invalid(exc)}"
            ) from None
        request_params = getattr(request, "params", None)
        dumped = (
            None
            if request_params is None
            else request_params.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        return await self._hooks.ask(method, dumped)


def _page(cursor: str | None) -> dict[str, Any] | None:
    return {"cursor": cursor} if cursor else None


def _excerpt(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


@contextlib.asynccontextmanager
async def open_client(
    spec: ServerSpec, link: ProcessLink, hooks: SessionHooks, client_info: types.Implementation
) -> AsyncIterator[HandshakeClient]:
    """Spawn the stdio backend, run the handshake, and yield the initialized client.

    The backend's requests are answered in tasks of a nursery that lives as long as
    the client; leaving stops the process first, then cancels what is still answering.
    """
    async with trio.open_nursery() as tasks:
        client = HandshakeClient(spec.name, link, hooks, tasks, client_info)
        try:
            async with stdio_process(spec, link, client, hooks.stderr, hooks.spawned):
                await client.initialize()
                yield client
        finally:
            tasks.cancel_scope.cancel()
