"""A small MCP server over streamable HTTP, for assern's remote-backend tests.

    python tests/servers/http_server.py --port 8765
    python tests/servers/http_server.py --port 8765 --sse   # the 2024-11-05 SSE transport

Serves http://127.0.0.1:PORT/mcp (with `--sse`: GET /sse, POST /messages/). Tools:
`echo(text)` -> exactly `text`; `whoami()` -> the Authorization header of the request
that called it (or `<none>`); `sleep(seconds)` answers after that long; `get_meta()` ->
the request's `_meta` as JSON (without its progress token); `announce(after)` answers
at once, and `after` seconds later adds the tool `late` and sends `list_changed` on the
session's own stream (not a request's). It runs uvicorn
in its own process (uvicorn is asyncio's; assern itself never runs it) and prints
`ready` on stderr once it listens.
"""

from __future__ import annotations

import gc

# The SDK's import builds hundreds of pydantic models: without collector passes over them
# a start takes a sixth less CPU (1.40 -> 1.16 s for testing_server.py; the end-to-end
# tests start the test servers hundreds of times; their RSS is no concern).
gc.disable()

import argparse
import asyncio
import json
import sys
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.server.sse import SseServerTransport

gc.enable()
gc.freeze()

TOOLS = [
    types.Tool(
        name="echo",
        description="Return the text unchanged.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="sleep",
        description="Answer after the given number of seconds.",
        input_schema={
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
    ),
    types.Tool(
        name="whoami",
        description="The Authorization header this call arrived with.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="get_meta",
        description="The request's `_meta` as JSON.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="announce",
        description="Add the tool `late` after the given number of seconds, and say so.",
        input_schema={"type": "object", "properties": {"after": {"type": "number"}}, "required": ["after"]},
    ),
]
LATE = types.Tool(
    name="late", description="Added by announce.", input_schema={"type": "object", "properties": {}}
)
#: the tasks announce started (kept so that they are not collected while they wait)
ANNOUNCING: set[asyncio.Task[None]] = set()


async def announce_later(session: Any, after: float) -> None:
    await asyncio.sleep(after)
    if LATE not in TOOLS:
        TOOLS.append(LATE)
    await session.send_tool_list_changed()


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "echo":
        text = str((params.arguments or {}).get("text", ""))
    elif params.name == "sleep":
        seconds = float((params.arguments or {}).get("seconds", 0))
        await anyio.sleep(seconds)
        text = f"slept {seconds:g} s"
    elif params.name == "announce":
        after = float((params.arguments or {}).get("after", 0))
        task = asyncio.get_running_loop().create_task(announce_later(ctx.session, after))
        ANNOUNCING.add(task)
        task.add_done_callback(ANNOUNCING.discard)
        text = f"announcing in {after:g} s"
    elif params.name == "get_meta":
        meta = {k: v for k, v in dict(ctx.meta or {}).items() if k not in ("progress_token", "progressToken")}
        text = json.dumps(meta, sort_keys=True)
    else:
        request = ctx.request
        text = request.headers.get("authorization", "<none>") if request is not None else "<none>"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def sse_app(server: Server[Any]) -> Any:
    """The server over the 2024-11-05 HTTP+SSE transport, as a Starlette app."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    transport = SseServerTransport("/messages/")

    async def stream(request: Any) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[
            Route("/sse", stream, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sse", action="store_true", help="serve the HTTP+SSE transport instead")
    options = parser.parse_args()
    port = options.port
    server = Server("remote", on_list_tools=list_tools, on_call_tool=call_tool)
    app = sse_app(server) if options.sse else server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    instance = uvicorn.Server(config)
    original_startup = instance.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets)
        print("ready", file=sys.stderr, flush=True)

    instance.startup = startup  # type: ignore[method-assign]  # to say when it listens
    instance.run()


if __name__ == "__main__":
    main()
