"""The meta-tools of search exposure, served for a connection (actors/search/meta_tools.py
holds their definitions and answers).

`search_tools` ranks the catalog's index as it is now: it never waits for a backend that
is starting, and says which ones are not searched yet. `describe_tools` gives full
definitions from the same snapshot. `call_tool` is a direct call under another name: the
connection's raw lane unwraps it before anything is parsed (raw_lane.py), and this
module's `call` does the same for the paths that parse (the 2026-07-28 era, and calls the
lane leaves to the session).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from assern.actors.backend.status import BackendState
from assern.actors.listener.context import RequestContext
from assern.actors.router.catalog import Catalog, search_sources, suggest_tools
from assern.actors.search import meta_tools, session
from assern.actors.search.index import SearchIndex
from assern.actors.search.learned import CANDIDATES, Learned, reranked
from assern.actors.search.meta_tools import BadArguments
from assern.actors.search.semantic import Semantic, blended_find

if TYPE_CHECKING:
    from assern.actors.backend.handle import BackendHandle

#: the states of a backend whose tools are not (or no longer) in the catalog yet
_NOT_READY = (BackendState.STARTING, BackendState.RESTARTING)

CallTool = Callable[
    [RequestContext, types.CallToolRequestParams],
    Awaitable[types.CallToolResult | types.InputRequiredResult],
]


def not_ready(directory: Mapping[str, BackendHandle], catalog: Catalog) -> list[str]:
    """The configured servers whose tools a search cannot see yet, and why."""
    waiting = []
    for name, handle in directory.items():
        state = handle.state
        if state in _NOT_READY and name not in catalog.servers:
            waiting.append(f"{name} ({state.value})")
    return waiting


def search(
    catalog: Catalog,
    arguments: Mapping[str, Any] | None,
    waiting: list[str],
    index: SearchIndex | None = None,
    semantic: Semantic | None = None,
    learned: Learned | None = None,
    recent: str | None = None,
) -> types.CallToolResult:
    """`search_tools` over `index`, or over the catalog's own (search exposure); by
    meaning too when `semantic` is given (actors/search/semantic.py); the tools of
    `recent`, the server the connection called last, lifted (actors/search/session.py);
    re-ranked by the use counts when `learned` has any (actors/search/learned.py)."""
    index = index or catalog.search or SearchIndex()
    try:
        request = meta_tools.search_request(arguments, sorted(catalog.servers))
    except BadArguments as exc:
        return meta_tools.error_result(str(exc))
    lifting = recent is not None and request.server is None and recent in catalog.servers
    limit = max(request.limit, CANDIDATES) if learned or lifting else request.limit
    if semantic is not None:
        found = blended_find(index, semantic, request.query, limit=limit, server=request.server)
    else:
        found = index.find(request.query, limit=limit, server=request.server)
    if learned or lifting:
        exact = index.exact(request.query, request.server)
        if lifting:
            assert recent is not None
            found = session.lifted(found, recent, limit if learned else request.limit, exact)
        if learned:
            found = reranked(found, learned, request.limit, exact)
    descriptions = {hit.doc.name: _description(catalog, hit.doc.name) for hit in found.hits}
    return meta_tools.search_result(
        request, found, descriptions, servers=sorted(catalog.servers), not_ready=waiting
    )


def search_anyway(
    catalog: Catalog,
    directory: Mapping[str, BackendHandle],
    arguments: Mapping[str, Any] | None,
    semantic: Semantic | None = None,
    learned: Learned | None = None,
    after: str | None = None,
) -> types.CallToolResult:
    """A search in any exposure (`assernctl search`): the catalog's index when it has
    one, else one built for this search from the backends' listings; with `after`, as a
    connection that called that server last searches (`--after`)."""
    if after is not None and after not in catalog.servers:
        known = ", ".join(sorted(catalog.servers)) or "none"
        return meta_tools.error_result(f"unknown server {after!r} to search after (servers: {known})")
    index = catalog.search
    if index is None:
        listings = [
            h.listing for h in directory.values() if h.listing is not None and h.name in catalog.servers
        ]
        index = SearchIndex().updated(search_sources(listings, catalog))
    return search(catalog, arguments, not_ready(directory, catalog), index, semantic, learned, after)


def answered(result: types.CallToolResult) -> frozenset[tuple[str, str]]:
    """The tools (server, its own name) a search's answer holds."""
    tools = (result.structured_content or {}).get("tools") or []
    return frozenset((tool["server"], tool["tool"]) for tool in tools)


def search_document(result: types.CallToolResult) -> dict[str, Any]:
    """A search's answer as a control reply (and `assernctl search --json`)."""
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return {**(result.structured_content or {}), "text": text, "is_error": result.is_error}


def describe(catalog: Catalog, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    try:
        names = meta_tools.describe_request(arguments)
    except BadArguments as exc:
        return meta_tools.error_result(str(exc))
    found: list[types.Tool] = []
    unknown: dict[str, tuple[str, ...]] = {}
    for name in names:
        route = catalog.tools.get(name)
        if route is not None:
            found.append(route.tool)
        else:
            unknown[name] = suggest_tools(catalog, name).close
    return meta_tools.describe_result(found, unknown)


async def call(
    ctx: RequestContext, params: types.CallToolRequestParams, direct: CallTool
) -> types.CallToolResult | types.InputRequiredResult:
    """`call_tool`: the named tool called as if directly, its answer unchanged (an
    `input_required` one included: the client's retry of `call_tool` carries its rounds)."""
    try:
        request = meta_tools.call_request(params.arguments)
    except BadArguments as exc:
        return meta_tools.error_result(str(exc))
    inner = params.model_copy(update={"name": request.name, "arguments": request.arguments})
    return await direct(ctx, inner)


def _description(catalog: Catalog, name: str) -> str | None:
    route = catalog.tools.get(name)
    return route.definition.description if route is not None else None
