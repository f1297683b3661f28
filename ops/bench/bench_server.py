"""A fast MCP server for benchmarks: `echo`, `sleep` and cheap numbered tools, over stdio.

    python ops/bench/bench_server.py --tools 10 --name b01
    python ops/bench/bench_server.py --http 8765      # streamable HTTP at /mcp instead

Over HTTP it is the SDK's own streamable-HTTP app under hypercorn's trio worker (the
direct connection HTTP benchmarks compare with); it prints `ready PORT` on stderr.

`--tools N` is the total number of tools (`echo`, `sleep`, then `tool_01` …); `--name` is
the server name it reports at initialize (so name hooks such as ClientSessionGroup's can
prefix by it) and lets the harness find this process among an aggregator's children.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def build(tool_count: int, name: str) -> Server[Any]:
    tools = [
        types.Tool(
            name="echo",
            description="Return the text unchanged.",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        ),
        types.Tool(
            name="sleep",
            description="Wait `ms` milliseconds, then answer (an in-flight call for crash tests).",
            input_schema={"type": "object", "properties": {"ms": {"type": "integer"}}},
        ),
    ] + [
        types.Tool(
            name=f"tool_{i:02d}",
            description=f"Numbered tool {i}: returns its own name.",
            input_schema=EMPTY_SCHEMA,
        )
        for i in range(1, tool_count - 1)
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        text: object = params.name
        if params.name == "echo":
            text = arguments.get("text", "")
        elif params.name == "sleep":
            await anyio.sleep(int(arguments.get("ms", 0)) / 1000)
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(text))])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


async def main(tool_count: int, name: str) -> None:
    server = build(tool_count, name)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def main_http(tool_count: int, name: str, port: int) -> None:
    import sys

    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    app = build(tool_count, name).streamable_http_app()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, config)
        print(f"ready {binds[0].rsplit(':', 1)[1]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=10, help="total number of tools (at least 2)")
    parser.add_argument("--name", default="bench", help="server name reported at initialize")
    parser.add_argument("--http", type=int, help="serve streamable HTTP on this loopback port (0: any)")
    args = parser.parse_args()
    if args.http is not None:
        anyio.run(main_http, max(2, args.tools), args.name, args.http, backend="trio")
    else:
        anyio.run(main, max(2, args.tools), args.name, backend="trio")
