"""A small MCP server over streamable HTTP, for assern's remote-backend tests.

    python tests/servers/http_server.py --port 8765

Serves http://127.0.0.1:PORT/mcp. Tools: `echo(text)` -> exactly `text`; `whoami()` -> the
Authorization header of the request that called it (or `<none>`). It runs uvicorn in its
own process (uvicorn is asyncio's; assern itself never runs it) and prints `ready` on
stderr once it listens.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server

TOOLS = [
    types.Tool(
        name="echo",
        description="Return the text unchanged.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="whoami",
        description="The Authorization header this call arrived with.",
        input_schema={"type": "object", "properties": {}},
    ),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "echo":
        text = str((params.arguments or {}).get("text", ""))
    else:
        request = ctx.request
        text = request.headers.get("authorization", "<none>") if request is not None else "<none>"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    server = Server("remote", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app()
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
