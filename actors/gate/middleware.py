"""What a middleware is: the values it sees, the signature it has, and how `use` names one.

A middleware is an async function `middleware(call, next) -> CallToolResult` made by a
factory `factory(options) -> middleware` (the `[[middleware]]` table's `options`). It may
read or change the call's arguments (`await next(call.with_arguments(...))`), answer the
call itself (return a result without calling `next`), or post-process the result `next`
returns. A chain runs outermost first, in the configured order, around the forwarding
of one `tools/call`; it is compiled once per catalog snapshot (chain.py). How `use`
names a factory, and how one is loaded, is actors/config/middleware.py's.

A factory is called when the configuration is loaded (to check its options) and once
more when the chain is built: it must only check its options and build the function,
keeping any I/O (files, connections) for the first call.

A middleware declared `asyncio = true` is an asyncio coroutine function: it runs on the
process's one asyncio loop (asyncio_host.py) and its `next` is awaitable there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import mcp_types as types


@attrs.frozen(kw_only=True)
class Call:
    """One tools/call as a middleware sees it.

    Attributes:
        server: The backend server that owns the tool.
        tool: The tool's own name at its backend.
        exposed: The name the client called it by.
        arguments: The call's arguments (what is forwarded, once every middleware passed).
        client: The calling client's name (its `clientInfo.name`), if it gave one.
        definition: The tool's definition as the client sees it (schemas, annotations).
    """

    server: str
    tool: str
    exposed: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    client: str | None = None
    definition: types.Tool | None = None

    def with_arguments(self, arguments: Mapping[str, Any]) -> Call:
        """This call with other arguments (what the next middleware and the backend get)."""
        return attrs.evolve(self, arguments=arguments)


def error_result(text: str) -> types.CallToolResult:
    """A tool result with `isError: true`: what assern (or a middleware) answers instead of
    the backend."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


#: The rest of the chain, then the backend: what a middleware awaits to forward a call.
Next = Callable[[Call], Awaitable[types.CallToolResult]]
#: A middleware: around one call.
Middleware = Callable[[Call, Next], Awaitable[types.CallToolResult]]
#: What `use` names: builds a middleware from its options (raising when they are wrong).
Factory = Callable[[Mapping[str, Any]], Middleware]
