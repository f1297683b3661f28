"""The conformance fixture: an MCP server built with the official SDK that implements
every server scenario of the MCP conformance harness (tools, resources, prompts,
completion, logging, progress, sampling, elicitation, subscriptions).

    python ops/conformance/fixture_server.py              # stdio (assern's backend)
    python ops/conformance/fixture_server.py --http 8931  # streamable HTTP at /mcp

What each tool, resource and prompt answers is what the harness's scenario
descriptions ask (`conformance list`, then each scenario's requirements). Over HTTP
it is served by the SDK's own streamable-HTTP app under uvicorn, with the SDK's
DNS-rebinding protection for loopback, and prints `ready` on stderr once it listens.
It is the "direct" baseline of `ops/conformance/run.py`: the same file, run by
assern as its only stdio backend, is the "through assern" side.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import warnings
import wave
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio
import mcp_types as types
from fixture_rounds import Rounds
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

Ctx = Any  # the SDK's ServerRequestContext; handlers only use its documented fields

# A 1x1 red pixel.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _wav() -> str:
    """A tenth of a second of silence, 8 kHz mono, base64."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(1)
        out.setframerate(8000)
        out.writeframes(b"\x80" * 800)
    return base64.b64encode(buffer.getvalue()).decode()


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def embedded(uri: str, mime_type: str, body: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=body)
    )


NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def string_args(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
    }


SCHEMA_2020 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}

ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

Run = Callable[[Ctx, dict[str, Any]], Awaitable[list[types.ContentBlock]]]


class Fixture:
    """Handlers of the fixture server; the only state is the set of subscribed URIs."""

    def __init__(self) -> None:
        self.subscribed: set[str] = set()
        self.rounds = Rounds()
        self.tools: dict[str, tuple[types.Tool, Run]] = {}
        for name, description, schema, run in [
            ("test_simple_text", "Returns simple text.", NO_ARGS, self.simple_text),
            ("test_image_content", "Returns an image.", NO_ARGS, self.image_content),
            ("test_audio_content", "Returns audio.", NO_ARGS, self.audio_content),
            ("test_embedded_resource", "Returns an embedded resource.", NO_ARGS, self.embedded),
            ("test_multiple_content_types", "Returns text, image and resource.", NO_ARGS, self.mixed),
            ("test_tool_with_logging", "Logs three messages while it runs.", NO_ARGS, self.logging),
            ("test_logging_tool", "Logs three messages while it runs.", NO_ARGS, self.logging),
            ("test_tool_with_progress", "Reports progress 0, 50, 100 of 100.", NO_ARGS, self.progress),
            ("test_error_handling", "Always fails.", NO_ARGS, self.error),
            ("test_sampling", "Asks the client's LLM.", string_args("prompt"), self.sampling),
            ("test_elicitation", "Asks the user.", string_args("message"), self.elicitation),
            ("test_elicitation_sep1034_defaults", "Elicits with defaults.", NO_ARGS, self.defaults),
            ("test_elicitation_sep1330_enums", "Elicits with enums.", NO_ARGS, self.enums),
            ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", SCHEMA_2020, self.schema),
            (
                "test_reconnection",
                "Closes its SSE stream mid-call, then answers.",
                NO_ARGS,
                self.reconnection,
            ),
        ]:
            self.tools[name] = (types.Tool(name=name, description=description, input_schema=schema), run)

    def build(self) -> Server[Any]:
        return Server(
            "conformance-fixture",
            version="1.0.0",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_templates,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_set_logging_level=self.set_logging_level,
            on_completion=self.complete,
        )

    # --- tools --------------------------------------------------------------

    async def list_tools(self, ctx: Ctx, params: Any) -> types.ListToolsResult:
        tools = [tool for tool, _ in self.tools.values()] + self.rounds.definitions()
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name in self.rounds.tools:
            return await self.rounds.tools[params.name](params)
        entry = self.tools.get(params.name)
        if entry is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            content = await entry[1](ctx, dict(params.arguments or {}))
        except ToolError as failure:
            return types.CallToolResult(content=[text(str(failure))], is_error=True)
        return types.CallToolResult(content=content)

    async def simple_text(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        return [text("This is a simple text response for testing.")]

    async def image_content(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        return [image()]

    async def audio_content(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        return [types.AudioContent(type="audio", data=_wav(), mime_type="audio/wav")]

    async def embedded(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]

    async def mixed(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
        return [
            text("Multiple content types test:"),
            image(),
            embedded("test://mixed-content-resource", "application/json", data),
        ]

    async def logging(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        for i, message in enumerate(
            ["Tool execution started", "Tool processing data", "Tool execution completed"]
        ):
            if i:
                await anyio.sleep(0.05)
            await ctx.session.send_log_message("info", message, related_request_id=ctx.request_id)
        return [text("Tool with logging executed successfully")]

    async def progress(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        for i, value in enumerate([0, 50, 100]):
            if i:
                await anyio.sleep(0.05)
            await ctx.session.report_progress(value, 100)
        return [text("Tool with progress executed successfully")]

    async def error(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        raise ToolError("This tool intentionally returns an error for testing")

    async def sampling(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        message = types.SamplingMessage(role="user", content=text(str(args.get("prompt", ""))))
        answer = await ctx.session.create_message(
            [message], max_tokens=100, related_request_id=ctx.request_id
        )
        content = answer.content
        reply = content.text if isinstance(content, types.TextContent) else str(content)
        return [text(f"LLM response: {reply}")]

    async def elicit(self, ctx: Ctx, message: str, schema: dict[str, Any]) -> types.ElicitResult:
        result: types.ElicitResult = await ctx.session.elicit(
            message, schema, related_request_id=ctx.request_id
        )
        return result

    async def elicitation(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        schema = {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        }
        result = await self.elicit(ctx, str(args.get("message", "")), schema)
        return [text(f"User response: action={result.action}, content={json.dumps(result.content)}")]

    async def defaults(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        result = await self.elicit(
            ctx, "Please review and update the form fields with defaults", DEFAULTS_SCHEMA
        )
        return [text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")]

    async def enums(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        result = await self.elicit(ctx, "Please select options from the enum fields", ENUMS_SCHEMA)
        return [text(f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}")]

    async def schema(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        return [text(f"Received: {json.dumps(args, sort_keys=True)}")]

    async def reconnection(self, ctx: Ctx, args: dict[str, Any]) -> list[types.ContentBlock]:
        # Only an HTTP transport with an event store can close the stream; elsewhere
        # the answer simply arrives on the open stream.
        if getattr(ctx, "close_sse_stream", None) is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        return [text("Reconnection test completed")]

    # --- resources ----------------------------------------------------------

    STATIC: ClassVar[dict[str, tuple[str, str | None]]] = {
        "test://static-text": ("text/plain", "This is the content of the static text resource."),
        "test://static-binary": ("image/png", None),
        "test://watched-resource": ("text/plain", "Watched resource content."),
    }

    async def list_resources(self, ctx: Ctx, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=uri,
                    name=uri.removeprefix("test://"),
                    description=f"The {uri} resource.",
                    mime_type=mime,
                )
                for uri, (mime, _) in self.STATIC.items()
            ]
        )

    async def list_templates(self, ctx: Ctx, params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template="test://template/{id}/data",
            name="template",
            description="Data for any id.",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        contents: types.TextResourceContents | types.BlobResourceContents
        if uri == "test://static-binary":
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
        elif uri in self.STATIC:
            mime, body = self.STATIC[uri]
            contents = types.TextResourceContents(uri=uri, mime_type=mime, text=body or "")
        elif uri.startswith("test://template/") and uri.endswith("/data"):
            ident = uri.removeprefix("test://template/").removesuffix("/data")
            body = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
            contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=body)
        else:
            raise MCPError(code=-32002, message=f"Resource not found: {uri}", data={"uri": uri})
        return types.ReadResourceResult(contents=[contents])

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.discard(str(params.uri))
        return types.EmptyResult()

    # --- prompts, completion, logging ---------------------------------------

    async def list_prompts(self, ctx: Ctx, params: Any) -> types.ListPromptsResult:
        def arg(name: str, description: str) -> types.PromptArgument:
            return types.PromptArgument(name=name, description=description, required=True)

        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name="test_simple_prompt", description="A simple prompt."),
                types.Prompt(
                    name="test_prompt_with_arguments",
                    description="A prompt with two arguments.",
                    arguments=[arg("arg1", "First test argument"), arg("arg2", "Second test argument")],
                ),
                types.Prompt(
                    name="test_prompt_with_embedded_resource",
                    description="A prompt embedding a resource.",
                    arguments=[arg("resourceUri", "URI of the resource to embed")],
                ),
                types.Prompt(name="test_prompt_with_image", description="A prompt with an image."),
                types.Prompt(name=Rounds.PROMPT, description="Asks the user for context in an input round."),
            ]
        )

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        if params.name == Rounds.PROMPT:
            return await self.rounds.prompt(params)
        args = dict(params.arguments or {})

        def user(content: Any) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        match params.name:
            case "test_simple_prompt":
                messages = [user(text("This is a simple prompt for testing."))]
            case "test_prompt_with_arguments":
                body = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
                messages = [user(text(body))]
            case "test_prompt_with_embedded_resource":
                uri = str(args.get("resourceUri", "test://embedded-resource"))
                messages = [
                    user(embedded(uri, "text/plain", "Embedded resource content for testing.")),
                    user(text("Please process the embedded resource above.")),
                ]
            case "test_prompt_with_image":
                messages = [user(image()), user(text("Please analyze the image above."))]
            case _:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
        return types.GetPromptResult(messages=messages)

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        candidates = ["test-alpha", "test-beta", "paris", "park"]
        values = [value for value in candidates if value.startswith(params.argument.value)]
        return types.CompleteResult(
            completion=types.Completion(values=values, total=len(values), has_more=False)
        )

    async def set_logging_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()


class ToolError(Exception):
    """A tool's failure, returned as an `isError` result with this text."""


def serve_http(server: Server[Any], port: int) -> None:
    import uvicorn  # the SDK's own dependency; this standalone process is asyncio's

    app = server.streamable_http_app(host="127.0.0.1")
    instance = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    original_startup = instance.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets)
        print("ready", file=sys.stderr, flush=True)

    instance.startup = startup  # type: ignore[method-assign]  # to say when it listens
    instance.run()


async def serve_stdio(server: Server[Any]) -> None:
    options = server.create_initialization_options(NotificationOptions(resources_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    options = parser.parse_args(argv)
    # Sampling, elicitation, logging and subscriptions are what the harness tests.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    server = Fixture().build()
    if options.http is not None:
        serve_http(server, options.http)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
