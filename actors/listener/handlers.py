"""The MCP request handlers of a client connection: lists from the catalog snapshot,
calls, reads and prompts straight to the owning backend's mailbox.

A connection (session.py) owns one `Handlers`, handed the shared `Routing` and how to
make this client the origin of a backend call. Each handler takes the request's context
(context.py: its id, the client as a `Peer`) and its params as their mcp_types model,
returns the result model, and fails with an `RpcError`: the same handlers serve both
protocol eras (protocol.py, modern.py), through `methods()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
import structlog
import trio
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from assern.actors.backend import messages as msgs
from assern.actors.backend.handle import request
from assern.actors.backend.messages import BackendUnavailable, Origin, ProgressSink
from assern.actors.backend.rounds import refuse_foreign_state
from assern.actors.gate.confirm import confirm
from assern.actors.gate.gate import screen_arguments, screen_result
from assern.actors.gate.middleware import Call, error_result
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.client_rounds import client_rounds, passed_back
from assern.actors.listener.context import Peer, RequestContext, end_to_end_meta, to_rpc_error
from assern.actors.listener.protocol import Method
from assern.actors.router.catalog import Catalog, ToolRoute, suggest_tools, unknown_tool_message
from assern.actors.router.lookup import (
    ResourceTarget,
    UnknownResource,
    exposed_uri,
    resolve_resource,
    unknown_prompt_message,
)
from assern.actors.search.names import DESCRIBE_TOOLS, META_TOOLS, SEARCH_TOOLS

if TYPE_CHECKING:
    from collections.abc import Callable

    from assern.actors.listener.routing import Routing
    from assern.supervisor.mailbox import Reply

log = structlog.get_logger()


def _as_dict(meta: Any) -> dict[str, Any] | None:
    if not meta:
        return None
    return meta.model_dump(by_alias=True, exclude_none=True) if hasattr(meta, "model_dump") else dict(meta)


class Handlers:
    """The request handlers of one connection, and the resources its client subscribed to.

    Args:
        routing: Lookups over the connection's view of the catalog and the backends.
        origin: This client as the origin of a backend call (for server-to-client requests).
    """

    def __init__(self, routing: Routing, origin: Callable[[Peer], Origin]) -> None:
        self.shared = routing.shared
        self._routing = routing
        self._origin = origin
        #: the (exposed) resource URIs this client subscribed to
        #: what the client subscribed to, as it named it -> (server, the server's own URI)
        self.subscriptions: dict[str, tuple[str, str]] = {}

    def methods(self) -> dict[str, Method]:
        """The request methods this aggregate serves (besides `initialize` and `ping`)."""
        return {
            "tools/list": Method(types.PaginatedRequestParams, self._list_tools),
            "tools/call": Method(types.CallToolRequestParams, self._call_tool),
            "resources/list": Method(types.PaginatedRequestParams, self._list_resources),
            "resources/templates/list": Method(types.PaginatedRequestParams, self._list_templates),
            "resources/read": Method(types.ReadResourceRequestParams, self._read_resource),
            "resources/subscribe": Method(types.SubscribeRequestParams, self._subscribe),
            "resources/unsubscribe": Method(types.UnsubscribeRequestParams, self._unsubscribe),
            "prompts/list": Method(types.PaginatedRequestParams, self._list_prompts),
            "prompts/get": Method(types.GetPromptRequestParams, self._get_prompt),
            "completion/complete": Method(types.CompleteRequestParams, self._complete),
            "logging/setLevel": Method(types.SetLevelRequestParams, self._set_level),
        }

    # ------------------------------------------------------------------ tools

    async def _list_tools(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        catalog = self._routing.catalog
        if not catalog.lists_meta_tools_only:
            catalog = await self._routing.settled_catalog()
        self._routing.given["tools"] = catalog
        return types.ListToolsResult(tools=catalog.tool_list)

    async def _call_tool(
        self, ctx: RequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        catalog = self._routing.catalog
        if catalog.exposure == "search" and params.name in META_TOOLS:
            return await self._meta_tool(ctx, params, catalog)
        name = params.name
        if name not in catalog.tools and name not in catalog.groups:
            catalog = await self._routing.catalog_having(lambda c: name in c.tools or name in c.groups)
        group = catalog.groups.get(params.name)
        if group is not None:
            chosen = group.resolve(params.arguments)
            if isinstance(chosen, str):
                return error_result(chosen)
            action, arguments = chosen
            params = params.model_copy(update={"name": action.name, "arguments": arguments})
        route = catalog.tools.get(params.name)
        if route is None:
            if params.name in catalog.hidden:
                server = catalog.hidden[params.name]
                raise RpcError(
                    types.INVALID_PARAMS,
                    f"Tool '{params.name}' is not allowed: server '{server}' "
                    "exposes only the tools in its `allowed` list.",
                    {"tool": params.name, "server": server},
                )
            if params.name in catalog.refused:
                refused = catalog.refused[params.name]
                log.info(
                    "call_refused",
                    server=refused.server,
                    tool=params.name,
                    rule=refused.rule,
                    client=self._routing.client,
                )
                raise RpcError(
                    types.INVALID_PARAMS,
                    f"Tool '{params.name}' (server '{refused.server}') is refused: {refused.reason}.",
                    {"tool": params.name, "server": refused.server, "rule": refused.rule},
                )
            if params.name in catalog.outside:
                server = catalog.outside[params.name]
                raise RpcError(
                    types.INVALID_PARAMS,
                    f"Tool '{params.name}' (server '{server}') is not in this client's profile "
                    f"'{catalog.profile}': its servers and tools settings leave it out.",
                    {"tool": params.name, "server": server, "profile": catalog.profile},
                )
            down = self._routing.down_owner(params.name)
            if down is not None:
                raise to_rpc_error(down)
            suggestions = suggest_tools(catalog, params.name)
            raise RpcError(
                types.INVALID_PARAMS,
                unknown_tool_message(params.name, suggestions),
                {
                    "tool": params.name,
                    "suggestions": list(suggestions.close),
                    "servers": [server for server, _ in suggestions.same_base],
                },
            )
        gate = route.gate
        rounds = client_rounds(params) if ctx.input_rounds else None
        if rounds is not None and gate is not None and (gate.confirm or gate.chain is not None):
            # A confirmed call's rounds are assern's (a requestState must not stand for a
            # confirmation never given), and so are a middleware's (it sees final results).
            refuse_foreign_state(rounds)
            rounds = None
        if gate is not None:
            client = self._routing.client
            stopped = screen_arguments(
                gate, route.name, route.definition, route.server, route.original, params.arguments, client
            )
            if stopped is None and gate.confirm:
                ask = self._origin(ctx.peer).ask
                assert ask is not None  # a connection's origin always asks its client
                stopped = await confirm(
                    ask,
                    exposed=params.name,
                    server=route.server,
                    tool=route.original,
                    arguments=params.arguments,
                    client=client,
                    elicits=self._elicits(params),
                )
            if stopped is not None:
                return stopped
        if gate is not None and gate.chain is not None:
            call = Call(
                server=route.server,
                tool=route.original,
                exposed=params.name,
                arguments=params.arguments or {},
                client=self._routing.client,
                definition=route.tool,
            )

            async def forward(passed: Call) -> types.CallToolResult:
                answer = await self._forward(ctx, route, params, dict(passed.arguments), None)
                assert isinstance(answer, types.CallToolResult)
                return answer

            return await gate.chain.run(call, forward)
        return await self._forward(ctx, route, params, params.arguments, rounds)

    async def _forward(
        self,
        ctx: RequestContext,
        route: ToolRoute,
        params: types.CallToolRequestParams,
        arguments: dict[str, Any] | None,
        rounds: msgs.Rounds | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Send the call to its backend (with `arguments`, and the client's own input
        `rounds` when they pass through) and check its answer."""
        token = (params.meta or {}).get("progress_token")
        progress: ProgressSink | None = None
        if token is not None:
            peer = ctx.peer

            async def to_client(progress: float, total: float | None, message: str | None) -> None:
                await peer.progress(token, progress, total, message)

            progress = to_client

        handle = self._routing.handle(route.server)
        origin = self._origin(ctx.peer)
        started = trio.current_time()
        try:
            result: types.CallToolResult | types.InputRequiredResult = await request(
                handle,
                lambda reply: msgs.CallTool(
                    name=route.original,
                    arguments=arguments,
                    meta=end_to_end_meta(_as_dict(params.meta)),
                    request_id=ctx.request_id,
                    progress=progress,
                    origin=origin,
                    rounds=rounds,
                    reply=reply,
                ),
            )
            result = passed_back(result, rounds, route.server)
        except (BackendUnavailable, Exception) as exc:
            self._routing.record_call(handle.name, started, route.original, "error")
            raise to_rpc_error(exc) from None
        if isinstance(result, types.InputRequiredResult):
            self._routing.record_call(handle.name, started, route.original, "input_required")
            return result
        self._routing.record_call(
            handle.name, started, route.original, "tool_error" if result.is_error else "ok"
        )
        gate = route.gate
        if gate is not None and gate.outputs is not None:
            answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            replaced = screen_result(gate, route.server, route.original, answer)
            if replaced is not None:
                return replaced
        return result

    def _elicits(self, params: types.CallToolRequestParams) -> bool | None:
        """Whether the calling client can be asked (elicitation): from the request's own
        `_meta` on a 2026-07-28 connection, else from what it declared at initialize."""
        declared = (_as_dict(params.meta) or {}).get(CLIENT_CAPABILITIES_META_KEY)
        if isinstance(declared, dict):
            return "elicitation" in declared
        return self._routing.elicits

    async def _meta_tool(
        self, ctx: RequestContext, params: types.CallToolRequestParams, catalog: Catalog
    ) -> types.CallToolResult | types.InputRequiredResult:
        """search_tools, describe_tools and call_tool of search exposure (exposure.py)."""
        from assern.actors.listener import exposure  # the index: loaded by the first search

        if params.name == SEARCH_TOOLS:
            waiting = exposure.not_ready(self.shared.directory(), catalog)
            self.shared.searched.set()
            learning = self.shared.learning()
            result = exposure.search(
                catalog,
                params.arguments,
                waiting,
                semantic=self.shared.semantic.value,
                learned=self.shared.learned.value if learning else None,
                recent=self._routing.last_server,
            )
            # The calls of the answer's tools are counted from now on (routing.py).
            self._routing.answered = exposure.answered(result) if learning else None
            return result
        if params.name == DESCRIBE_TOOLS:
            return exposure.describe(catalog, params.arguments)
        return await exposure.call(ctx, params, self._call_tool)

    # -------------------------------------------------------------- resources

    async def _list_resources(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        catalog = await self._routing.catalog_to_list("resources")
        return types.ListResourcesResult(resources=[r.resource for r in catalog.resources.values()])

    async def _list_templates(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        catalog = await self._routing.catalog_to_list("resources")
        return types.ListResourceTemplatesResult(resource_templates=[t.template for t in catalog.templates])

    async def _resource_owner(self, uri: str) -> ResourceTarget:
        catalog = await self._routing.settled_catalog()
        try:
            return resolve_resource(catalog, uri, self.shared.directory())
        except UnknownResource as exc:
            raise RpcError(types.INVALID_PARAMS, str(exc), {"uri": uri}) from None

    async def _read_resource(
        self, ctx: RequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        target = await self._resource_owner(str(params.uri))
        rounds = client_rounds(params) if ctx.input_rounds else None
        try:
            result: types.ReadResourceResult | types.InputRequiredResult = await request(
                self._routing.handle(target.server),
                lambda reply: msgs.ReadResource(uri=target.original, rounds=rounds, reply=reply),
            )
            result = passed_back(result, rounds, target.server)
        except Exception as exc:
            raise to_rpc_error(exc) from None
        if isinstance(result, types.InputRequiredResult):
            return result
        catalog = self._routing.catalog
        contents = [
            c.model_copy(
                update={"uri": exposed_uri(catalog, target.server, str(c.uri), natural=target.natural)}
            )
            for c in result.contents
        ]
        return result.model_copy(update={"contents": contents})

    async def _subscribe(
        self, ctx: RequestContext, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await self.set_subscription(str(params.uri), True)
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: RequestContext, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self.set_subscription(str(params.uri), False)
        return types.EmptyResult()

    async def set_subscription(self, uri: str, on: bool) -> None:
        """Follow (or stop following) the resource `uri`, as the client named it.

        Raises:
            RpcError: no backend owns it, or its backend refused.
        """
        target = await self._resource_owner(uri)

        def subscribe(reply: Reply[None]) -> msgs.BackendRequest:
            return msgs.Subscribe(uri=target.original, subscribe=on, reply=reply)

        try:
            await request(self._routing.handle(target.server), subscribe)
        except Exception as exc:
            raise to_rpc_error(exc) from None
        if on:
            self.subscriptions[uri] = (target.server, target.original)
        else:
            self.subscriptions.pop(uri, None)

    def subscribed_as(self, server: str, original: str) -> list[str]:
        """The URIs this client subscribed under to `server`'s resource `original`."""
        return [uri for uri, owner in self.subscriptions.items() if owner == (server, original)]

    # ---------------------------------------------------------------- prompts

    async def _list_prompts(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        catalog = await self._routing.catalog_to_list("prompts")
        return types.ListPromptsResult(prompts=[p.prompt for p in catalog.prompts.values()])

    async def _get_prompt(
        self, ctx: RequestContext, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name = params.name
        catalog = await self._routing.catalog_having(lambda c: name in c.prompts)
        route = catalog.prompts.get(name)
        if route is None:
            raise RpcError(
                types.INVALID_PARAMS, unknown_prompt_message(catalog, params.name), {"prompt": params.name}
            )
        rounds = client_rounds(params) if ctx.input_rounds else None
        try:
            result: types.GetPromptResult | types.InputRequiredResult = await request(
                self._routing.handle(route.server),
                lambda reply: msgs.GetPrompt(
                    name=route.original, arguments=params.arguments, rounds=rounds, reply=reply
                ),
            )
            return passed_back(result, rounds, route.server)
        except Exception as exc:
            raise to_rpc_error(exc) from None

    async def _complete(
        self, ctx: RequestContext, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        backend_ref: types.PromptReference | types.ResourceTemplateReference
        if isinstance(ref, types.PromptReference):
            catalog = await self._routing.settled_catalog()
            route = catalog.prompts.get(ref.name)
            if route is None:
                raise RpcError(
                    types.INVALID_PARAMS, unknown_prompt_message(catalog, ref.name), {"prompt": ref.name}
                )
            server, backend_ref = route.server, ref.model_copy(update={"name": route.original})
        else:
            target = await self._resource_owner(ref.uri)
            server, backend_ref = target.server, ref.model_copy(update={"uri": target.original})
        context = params.context.arguments if params.context is not None else None
        try:
            return await request(
                self._routing.handle(server),
                lambda reply: msgs.Complete(
                    ref=backend_ref,
                    argument={"name": params.argument.name, "value": params.argument.value},
                    context_arguments=context,
                    reply=reply,
                ),
            )
        except Exception as exc:
            raise to_rpc_error(exc) from None

    # ---------------------------------------------------------------- logging

    async def _set_level(self, ctx: RequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        def set_level(reply: Reply[None]) -> msgs.BackendRequest:
            return msgs.SetLevel(level=params.level, reply=reply)

        for handle in self.shared.directory().values():
            caps = handle.listing.capabilities if handle.listing else None
            if caps is None or caps.logging is None:
                continue
            try:
                await request(handle, set_level)
            except Exception as exc:
                log.warning("set_level_failed", server=handle.name, error=str(exc))
        return types.EmptyResult()
