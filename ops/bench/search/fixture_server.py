"""An MCP server over stdio that lists captured real tools (fixtures/*.json) and answers
any call with the called tool's name: a real server's catalog without its side effects.

    python ops/bench/search/fixture_server.py fixtures/github.json fixtures/slack.json
    python ops/bench/search/fixture_server.py --copies 25 fixtures/*.json   # a large catalog

With `--copies N` every tool is listed N times (`NAME`, `NAME_v2`, … `NAME_vN`, each
description tagged with its copy), which is how the benchmark makes 10,000 tools of the
real ones.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server


def load_tools(paths: list[Path], copies: int = 1) -> list[types.Tool]:
    """The tools of `paths`, each `copies` times (copies 2… renamed and tagged)."""
    tools: list[types.Tool] = []
    seen: set[str] = set()
    for path in paths:
        fixture = json.loads(path.read_text())
        for raw in fixture["tools"]:
            tool = types.Tool.model_validate(raw)
            if tool.name in seen:
                tool = tool.model_copy(update={"name": f"{fixture['server']}_{tool.name}"})
            seen.add(tool.name)
            tools.append(tool)
    if copies <= 1:
        return tools
    many = list(tools)
    for copy in range(2, copies + 1):
        for tool in tools:
            description = f"{tool.description or ''} (variant {copy})"
            many.append(tool.model_copy(update={"name": f"{tool.name}_v{copy}", "description": description}))
    return many


def build(tools: list[types.Tool], name: str) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


async def main(paths: list[Path], copies: int, name: str) -> None:
    server = build(load_tools(paths, copies), name)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("fixtures", nargs="+", type=Path, help="fixture files (fixtures/NAME.json)")
    parser.add_argument("--copies", type=int, default=1, help="list every tool this many times")
    parser.add_argument("--name", default="fixtures", help="server name reported at initialize")
    args = parser.parse_args()
    anyio.run(main, args.fixtures, max(1, args.copies), args.name, backend="trio")
