"""An MCP server that advertises more than it serves, as the SDK's low-level Server allows.

Built on the SDK's low-level `Server` with a `tools/list`, a `tools/call` (`echo`) and a
`resources/list` handler, and no `resources/templates/list` handler: the SDK then
advertises `resources` and answers `resources/templates/list` with -32601 Method not
found. With `--broken-prompts` it also advertises `prompts` and fails `prompts/list`;
with `--broken-completion` it advertises completions and fails `completion/complete`.
"""

from __future__ import annotations

import gc

# The SDK's import builds hundreds of pydantic models: without collector passes over them
# a start takes a sixth less CPU (1.40 -> 1.16 s for testing_server.py; the end-to-end
# tests start the test servers hundreds of times; their RSS is no concern).
gc.disable()

import argparse
from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

gc.enable()
gc.freeze()


async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema)])


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_resources(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="loose://only", name="only")])


async def list_prompts(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListPromptsResult:
    raise MCPError(types.INTERNAL_ERROR, "prompts are not available today")


async def complete(ctx: ServerRequestContext[Any, Any], params: Any) -> types.CompleteResult:
    raise MCPError(types.METHOD_NOT_FOUND, "Method not found")


async def serve(args: argparse.Namespace) -> None:
    handlers: dict[str, Any] = {
        "on_list_tools": list_tools,
        "on_call_tool": call_tool,
        "on_list_resources": list_resources,
    }
    if args.broken_prompts:
        handlers["on_list_prompts"] = list_prompts
    if args.broken_completion:
        handlers["on_completion"] = complete
    server: Server[Any] = Server("loose", **handlers)
    options = server.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broken-prompts", action="store_true")
    parser.add_argument("--broken-completion", action="store_true")
    anyio.run(serve, parser.parse_args(), backend="trio")


if __name__ == "__main__":
    main()
