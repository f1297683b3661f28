"""A fast MCP server for benchmarks: `echo` plus N cheap numbered tools, over stdio.

python ops/bench/bench_server.py --tools 10
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server


def build(tool_count: int) -> Server[Any]:
    tools = [
        types.Tool(
            name="echo",
            description="Return the text unchanged.",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        )
    ] + [
        types.Tool(
            name=f"tool_{i:02d}",
            description=f"Numbered tool {i}: returns its own name.",
            input_schema={"type": "object", "properties": {}},
        )
        for i in range(1, tool_count)
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = (params.arguments or {}).get("text", params.name) if params.name == "echo" else params.name
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(text))])

    return Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(tool_count: int) -> None:
    server = build(tool_count)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=10)
    anyio.run(main, parser.parse_args().tools, backend="trio")
