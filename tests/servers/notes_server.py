"""A small notes server whose tools say what they do: read-only, destructive and
structured tools for assern's policy, validation, grouping and middleware tests.

Built on the SDK's low-level `Server` so that every schema and annotation is exactly as
written here. Run it by path: `python tests/servers/notes_server.py [--name N]`.

Tools (each declares an inputSchema; `readOnlyHint`/`destructiveHint` as noted):
    list_notes()              read-only; structured {"notes": [{"id", "text"}]} (outputSchema)
    read_note(id: integer)    read-only; structured {"id", "text"} (outputSchema)
    add_note(text, tags?)     not read-only, destructiveHint false; answers "added N"
    delete_note(id: integer)  destructiveHint true; answers "deleted N"
    tag_note(id: string, tag) no annotations (so destructive by MCP's default): `id` is a
                              string here and an integer elsewhere, as real servers clash
    miscount(text)            read-only; declares {"count": integer} and answers a string,
                              a backend at fault
    reveal()                  read-only; answers a text holding a secret token
    echo_arguments(...)       read-only; any fields; answers the arguments it got as JSON

With `--broken-schema`, `read_note`'s inputSchema is not valid JSON Schema; with
`--record FILE`, every call is appended to FILE as a JSON line {"tool", "arguments"}.
"""

from __future__ import annotations

import gc

# The SDK's import builds hundreds of pydantic models: without collector passes over them
# a start takes a sixth less CPU (1.40 -> 1.16 s for testing_server.py; the end-to-end
# tests start the test servers hundreds of times; their RSS is no concern).
gc.disable()

import argparse
import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

gc.enable()
gc.freeze()

Ctx = ServerRequestContext[Any, Any]

NOTES = {1: "buy milk", 2: "call the plumber"}
#: what `reveal` answers: a token-looking secret a redactor should catch
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
NOTE = {"type": "object", "properties": {"id": {"type": "integer"}, "text": {"type": "string"}}}
READ = types.ToolAnnotations(read_only_hint=True)


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def tools(broken: bool) -> list[types.Tool]:
    note_id = {"type": "integer", "description": "The note's number."}
    return [
        types.Tool(
            name="list_notes",
            description="List every note.",
            input_schema=_object({}, []),
            output_schema=_object({"notes": {"type": "array", "items": NOTE}}, ["notes"]),
            annotations=READ,
        ),
        types.Tool(
            name="read_note",
            description="Read one note by its number.",
            input_schema=(
                _object({"id": {"type": "integr"}}, ["id"]) if broken else _object({"id": note_id}, ["id"])
            ),
            output_schema={**NOTE, "required": ["id", "text"]},
            annotations=READ,
        ),
        types.Tool(
            name="add_note",
            description="Add a note.\n\nReturns its number.",
            input_schema=_object(
                {
                    "text": {"type": "string", "description": "What to remember."},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                ["text"],
            ),
            annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
        ),
        types.Tool(
            name="delete_note",
            description="Delete a note for good.",
            input_schema=_object({"id": note_id}, ["id"]),
            annotations=types.ToolAnnotations(destructive_hint=True, idempotent_hint=True),
        ),
        types.Tool(
            name="tag_note",
            description="Tag a note given its number as text.",
            input_schema=_object(
                {
                    "id": {"type": "string", "description": "The note's number, as text."},
                    "tag": {"type": "string"},
                },
                ["id", "tag"],
            ),
        ),
        types.Tool(
            name="miscount",
            description="Count the characters of a text (wrongly typed answer).",
            input_schema=_object({"text": {"type": "string"}}, ["text"]),
            output_schema=_object({"count": {"type": "integer"}}, ["count"]),
            annotations=READ,
        ),
        types.Tool(
            name="reveal",
            description="Show the configured access token.",
            input_schema=_object({}, []),
            annotations=READ,
        ),
        types.Tool(
            name="echo_arguments",
            description="Answer the arguments received, as JSON.",
            input_schema={"type": "object", "additionalProperties": True},
            annotations=READ,
        ),
    ]


def _text(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    if name == "list_notes":
        notes = [{"id": i, "text": t} for i, t in NOTES.items()]
        return _text(json.dumps(notes), {"notes": notes})
    if name == "read_note":
        note_id = arguments.get("id")
        if note_id not in NOTES:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="no such note")], is_error=True
            )
        return _text(NOTES[note_id], {"id": note_id, "text": NOTES[note_id]})
    if name == "add_note":
        return _text(f"added {len(NOTES) + 1}")
    if name == "delete_note":
        return _text(f"deleted {arguments.get('id')}")
    if name == "tag_note":
        return _text(f"tagged {arguments.get('id')} with {arguments.get('tag')}")
    if name == "miscount":
        count = str(len(str(arguments.get("text", ""))))
        return _text(count, {"count": count})
    if name == "reveal":
        return _text(f"token={SECRET}")
    if name == "echo_arguments":
        return _text(json.dumps(arguments, sort_keys=True))
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")


async def serve(args: argparse.Namespace) -> None:
    listed = tools(args.broken_schema)

    async def list_tools(ctx: Ctx, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if args.record:
            with open(args.record, "a", encoding="utf-8") as record:  # noqa: ASYNC230 - one short line
                record.write(json.dumps({"tool": params.name, "arguments": arguments}) + "\n")
        return call(params.name, arguments)

    server: Server[Any] = Server(args.name, on_list_tools=list_tools, on_call_tool=call_tool)
    options = server.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", default="notes")
    parser.add_argument("--broken-schema", action="store_true")
    parser.add_argument("--record", metavar="FILE")
    anyio.run(serve, parser.parse_args(), backend="trio")


if __name__ == "__main__":
    main()
