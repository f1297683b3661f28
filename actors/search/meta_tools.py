"""The meta-tools of search exposure: their definitions, their arguments, their answers.

In `exposure = "search"` a client lists only these three tools (and the pinned ones):
`search_tools` finds tools by what they do, `describe_tools` gives the full
definitions of the ones it picked, `call_tool` calls one by name. Everything here is
pure: the listener's handlers (actors/listener/exposure.py) look things up and call.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from assern.actors.search.index import Found

from assern.actors.search.names import CALL_TOOL as CALL_TOOL
from assern.actors.search.names import DESCRIBE_TOOLS as DESCRIBE_TOOLS
from assern.actors.search.names import META_TOOLS as META_TOOLS
from assern.actors.search.names import SEARCH_TOOLS as SEARCH_TOOLS

DEFAULT_LIMIT = 8
MAX_LIMIT = 50
#: names describe_tools takes at once
MAX_DESCRIBE = 50
#: how many of the closest tools a "no good match" answer names
CLOSEST = 3

_READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

SEARCH_DEFINITION = types.Tool(
    name=SEARCH_TOOLS,
    title="Search tools",
    description=(
        "Find the tools for a task among every connected server's tools (they are not all "
        "listed, to save context). Describe the task in a few words or a sentence; you get "
        "the best matches, ranked. Then call describe_tools with the names you want to use, "
        "and call_tool to run one. Search again with other words if nothing fits."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to do, e.g. 'create a GitHub issue'."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "How many tools to return at most.",
            },
            "server": {"type": "string", "description": "Search only this server's tools."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The name to call it by."},
                        "server": {"type": "string"},
                        "tool": {"type": "string", "description": "The server's own name for it."},
                        "description": {"type": "string"},
                        "score": {"type": "number"},
                    },
                    "required": ["name", "server", "tool", "description", "score"],
                },
            },
            "total": {"type": "integer", "description": "How many tools were searched."},
            "good_match": {"type": "boolean"},
            "not_ready": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Servers still starting or restarting: their tools are not searched yet.",
            },
        },
        "required": ["tools", "total"],
    },
    annotations=_READ_ONLY,
)

DESCRIBE_DEFINITION = types.Tool(
    name=DESCRIBE_TOOLS,
    title="Describe tools",
    description=(
        "Get the full definitions (input schema, output schema, annotations) of tools found "
        "with search_tools, by name, before calling them with call_tool."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_DESCRIBE,
                "description": "Tool names as search_tools returned them.",
            }
        },
        "required": ["names"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "tools": {"type": "array", "items": {"type": "object"}},
            "unknown": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["tools"],
    },
    annotations=_READ_ONLY,
)

CALL_DEFINITION = types.Tool(
    name=CALL_TOOL,
    title="Call a tool",
    description=(
        "Call a tool found with search_tools by its name, with arguments that follow its "
        "input schema (see describe_tools). The answer is the tool's own."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The tool's name as search_tools returned it."},
            "arguments": {"type": "object", "description": "The tool's arguments."},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    # The called tool decides what happens: nothing here is read-only.
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True),
)

DEFINITIONS = (SEARCH_DEFINITION, DESCRIBE_DEFINITION, CALL_DEFINITION)


class BadArguments(ValueError):
    """A meta-tool's arguments are not usable; the message says what to send instead."""


@attrs.frozen
class SearchRequest:
    query: str
    limit: int = DEFAULT_LIMIT
    server: str | None = None


def search_request(arguments: Mapping[str, Any] | None, servers: Sequence[str]) -> SearchRequest:
    """`search_tools`'s arguments, checked.

    Raises:
        BadArguments: with what is wrong and what is expected.
    """
    arguments = arguments or {}
    _no_others(arguments, ("query", "limit", "server"), SEARCH_TOOLS)
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadArguments("search_tools needs `query`: a few words or a sentence about the task.")
    limit = arguments.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise BadArguments(f"`limit` must be an integer from 1 to {MAX_LIMIT}, got {json.dumps(limit)}.")
    server = arguments.get("server")
    if server is not None:
        if not isinstance(server, str):
            raise BadArguments("`server` must be a server's name.")
        if server not in servers:
            known = ", ".join(sorted(servers)) or "none"
            raise BadArguments(f"There is no server '{server}'. Servers: {known}.")
    return SearchRequest(query=query.strip(), limit=limit, server=server)


def describe_request(arguments: Mapping[str, Any] | None) -> list[str]:
    """`describe_tools`'s names, checked (repeats dropped, order kept)."""
    arguments = arguments or {}
    _no_others(arguments, ("names",), DESCRIBE_TOOLS)
    names = arguments.get("names")
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise BadArguments("describe_tools needs `names`: a list of tool names from search_tools.")
    if len(names) > MAX_DESCRIBE:
        raise BadArguments(f"describe_tools takes at most {MAX_DESCRIBE} names at once, got {len(names)}.")
    return list(dict.fromkeys(names))


@attrs.frozen
class CallRequest:
    name: str
    arguments: dict[str, Any] | None


def call_request(arguments: Mapping[str, Any] | None) -> CallRequest:
    """`call_tool`'s target and its arguments, checked."""
    arguments = arguments or {}
    _no_others(arguments, ("name", "arguments"), CALL_TOOL)
    name = arguments.get("name")
    if not isinstance(name, str) or not name:
        raise BadArguments("call_tool needs `name`: a tool's name from search_tools.")
    if name in META_TOOLS:
        raise BadArguments(f"call_tool calls the servers' tools; call {name} itself instead.")
    inner = arguments.get("arguments")
    if inner is not None and not isinstance(inner, dict):
        raise BadArguments("`arguments` must be an object with the tool's arguments.")
    return CallRequest(name=name, arguments=inner)


def _no_others(arguments: Mapping[str, Any], known: Sequence[str], tool: str) -> None:
    others = sorted(key for key in arguments if key not in known)
    if others:
        expected = ", ".join(f"`{key}`" for key in known)
        raise BadArguments(f"{tool} takes {expected}; not {', '.join(f'`{key}`' for key in others)}.")


# ------------------------------------------------------------------ answers


def _first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def search_result(
    request: SearchRequest,
    found: Found,
    descriptions: Mapping[str, str | None],
    *,
    servers: Sequence[str],
    not_ready: Sequence[str] = (),
) -> types.CallToolResult:
    """The answer of `search_tools`: structured matches, and the same as compact text.

    `descriptions` gives each found tool's description by exposed name.
    """
    good = found.good
    shown = found.hits if good else found.hits[:CLOSEST]
    tools: list[dict[str, Any]] = [
        {
            "name": hit.doc.name,
            "server": hit.doc.server,
            "tool": hit.doc.tool,
            "description": _first_line(descriptions.get(hit.doc.name)),
            "score": round(hit.score, 3),
        }
        for hit in shown
    ]
    structured: dict[str, Any] = {"tools": tools, "total": found.total, "good_match": good}
    if not_ready:
        structured["not_ready"] = list(not_ready)
    lines: list[str] = []
    if good:
        count = f"{len(tools)} tool" + ("" if len(tools) == 1 else "s")
        lines.append(f'{count} for "{request.query}" (of {found.total} searched):')
        lines.extend(f"- {tool['name']} ({tool['server']}): {tool['description']}" for tool in tools)
        lines.append("Next: describe_tools with the names you need, then call_tool.")
    else:
        lines.append(f'No good match for "{request.query}" among {found.total} tools.')
        if tools:
            lines.append("Closest: " + ", ".join(tool["name"] for tool in tools) + ".")
        lines.append("Servers: " + (", ".join(sorted(servers)) or "none") + ". Try other words.")
    if not_ready:
        lines.append("Not ready yet (their tools are not searched): " + ", ".join(not_ready) + ".")
    return types.CallToolResult(
        content=[types.TextContent(text="\n".join(lines))], structured_content=structured
    )


def describe_result(
    found: Sequence[types.Tool], unknown: Mapping[str, Sequence[str]]
) -> types.CallToolResult:
    """The answer of `describe_tools`: each known tool's full definition; unknown names
    with the closest names (an error only when none was known)."""
    definitions = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in found]
    structured: dict[str, Any] = {"tools": definitions}
    parts = [json.dumps(definitions, separators=(",", ":"), ensure_ascii=False)] if definitions else []
    if unknown:
        structured["unknown"] = list(unknown)
        for name, close in unknown.items():
            hint = f" Did you mean: {', '.join(close)}?" if close else " Use search_tools to find tools."
            parts.append(f"Unknown tool '{name}'.{hint}")
    return types.CallToolResult(
        content=[types.TextContent(text="\n".join(parts))],
        structured_content=structured,
        is_error=not definitions,
    )


def error_result(message: str) -> types.CallToolResult:
    """A meta-tool's refusal, as a tool result the model reads and acts on."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
