"""A configurable MCP server for assern's end-to-end tests.

Every feature assern must aggregate or forward has a small, predictable tool,
resource or prompt here, and command-line flags turn it into a misbehaving
backend when a test needs one. Run it by path (this folder is not a package):

    python tests/servers/testing_server.py --name alpha
    python tests/servers/testing_server.py --name beta --tools echo,add --stderr-lines 3

It speaks MCP over stdio with the official SDK's low-level `Server` (both the
2025 handshake protocol and the 2026-07-28 per-request protocol unless a flag
says otherwise), or with `--http PORT` over streamable HTTP (the SDK's app under
hypercorn). Diagnostics go to stderr only: stdout carries the protocol.

Tools (results are a single text content block):
    echo(text)            -> exactly `text`
    add(a, b)             -> the sum, e.g. "5" or "3.5"
    get_env(name)         -> the variable's value in this process, or "<unset>"
    get_pid()             -> this process's pid
    slow(seconds)         -> sleeps, then "done"
    gate(path)            -> waits until `path` exists (polls every 10 ms), then "opened"
    progress(steps)       -> sends `steps` progress notifications (i of steps, "step i"),
                             then "progressed"
    ticker(steps, interval) -> the same, `interval` seconds apart ("tick i"), then "ticked"
    wait_cancel(marker)   -> never returns; when cancelled (by notifications/cancelled, or
                             by the shutdown that stdin EOF starts) writes "cancelled" to `marker`
    crash(code)           -> exits the process at once with `code`
    add_tool(name)        -> registers tool `name` (which answers "called NAME"),
                             sends tools/list_changed, then "added"
    ask_sampling(prompt)  -> asks the client for a sampling/createMessage, returns its text
    ask_elicitation(message) -> asks the client for an elicitation, returns "ACTION: ANSWER"
    ask_roots()           -> asks the client for roots/list, returns the URIs, one a line
                             (the ask_* tools send a server-to-client request on 2025
                             connections and answer "input required" on 2026-07-28 ones)
    log(level, message)   -> sends a notifications/message log entry, then "logged"
    update_resource(uri)  -> sends notifications/resources/updated for `uri`, then "updated"
    subscribed()          -> the URIs subscribed to (resources/subscribe), one a line
    big(n)                -> a text of exactly `n` bytes ("xxx…")
    get_meta()            -> the request's `_meta` as JSON, without its progress token
    break_off(seconds)    -> (with --http only) reports a progress step, closes the call's
                             event stream, reports another after `seconds`, then "resumed":
                             the client must resume the stream (GET with Last-Event-ID)

Resources:
    test://info                         -> "info of NAME"
    file:///tmp/assern-test/readme.txt  -> "readme of NAME" (fixed text, no file is read)
    test://items/{item}  (template)     -> "item ITEM"
    resources/subscribe and resources/unsubscribe are supported.

Prompts:
    greet(who)                        -> one user message "Hello, WHO!"
    generate-code(language, [task])   -> one user message asking for code

Completion: generate-code's `language` (python, perl, php, rust) and the item
template's `item` (apple, apricot, banana), by prefix.

Flags (see `--help`):
    --name NAME                 server name (default "testing"), also used in texts
    --tools a,b                 offer only these tools (an unknown name is an error)
    --stderr-lines N            write "stderr line 1" … "stderr line N" to stderr at start
    --spawn-grandchild PIDFILE  start `sleep 1000` (same process group) and write its pid
    --start-delay SECONDS       wait before serving
    --start-gate FILE           wait until FILE exists (polls every 10 ms) before serving
    --hang-on-start             answer no request at all, not even initialize
    --crash-on-start            write a line to stderr, then exit 3 at once
    --crash-on-start-if FILE    the same, but only while FILE exists (starts fine, then fails)
    --modern-only               refuse `initialize`: 2026-07-28 clients only
    --legacy-only               refuse `server/discover`: 2025 handshake clients only
    --http PORT                 serve streamable HTTP at http://127.0.0.1:PORT/mcp (0: any),
                                printing `ready PORT` on stderr once it listens

Without --hang-on-start the process exits (status 0) when its stdin closes.
"""

from __future__ import annotations

import gc

# The SDK's import builds hundreds of pydantic models: without collector passes over them
# a start takes a sixth less CPU (1.40 -> 1.16 s for testing_server.py; the end-to-end
# tests start the test servers hundreds of times; their RSS is no concern).
gc.disable()

import argparse
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import anyio
import mcp_types as types
import trio
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

gc.enable()
gc.freeze()

Ctx = ServerRequestContext[Any]
ToolFn = Callable[..., Awaitable[str]]
R = TypeVar("R", bound=types.Result)

# JSON Schema type of each argument kind, and the Python types that satisfy it.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
}

ITEM_TEMPLATE_PREFIX = "test://items/"
INPUT_KEY = "answer"  # the key of our one input request in a 2026-07-28 input round trip
LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


class ToolFailed(Exception):
    """Raised by a tool to return an error result (`isError: true`) with this text."""


class InputNeeded(Exception):
    """Raised by a tool on a 2026-07-28 connection to ask the client for input first.

    That protocol has no server-to-client requests: the call answers with an
    `InputRequiredResult` instead, and the client retries it with the answer.
    """

    def __init__(self, request: types.InputRequest) -> None:
        super().__init__(request.method)
        self.request = request


@dataclass(frozen=True)
class ToolDef:
    """One tool: what `tools/list` shows and the coroutine `tools/call` runs."""

    name: str
    description: str
    params: Mapping[str, str]  # argument name -> JSON type; every argument is required
    run: ToolFn

    def to_mcp(self, routing_headers: Mapping[str, str]) -> types.Tool:
        properties: dict[str, Any] = {}
        for name, kind in self.params.items():
            properties[name] = {"type": kind}
            if name in routing_headers:  # 2026-07-28 clients mirror it as `Mcp-Param-<token>`
                properties[name]["x-mcp-header"] = routing_headers[name]
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema={"type": "object", "properties": properties, "required": list(self.params)},
        )

    def check_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments this tool takes, type-checked; raises ToolFailed otherwise."""
        checked: dict[str, Any] = {}
        for name, kind in self.params.items():
            if name not in arguments:
                raise ToolFailed(f"missing argument {name!r}")
            value = arguments[name]
            if isinstance(value, bool) or not isinstance(value, _JSON_TYPES[kind]):
                raise ToolFailed(f"argument {name!r} must be of type {kind}")
            checked[name] = value
        return checked


class TestingServer:
    """The state and handlers of one test server process."""

    def __init__(
        self,
        name: str,
        only_tools: list[str] | None,
        routing_headers: Mapping[str, str] | None = None,
        *,
        http: bool = False,
    ) -> None:
        self.name = name
        self.routing_headers = dict(routing_headers or {})
        self.tools: dict[str, ToolDef] = {t.name: t for t in self._builtin_tools()}
        if http:
            self.tools["break_off"] = ToolDef(
                "break_off",
                "Report a progress step, close this call's event stream, report another after "
                "`seconds`, then return `resumed` (the client resumes the stream to get them).",
                {"seconds": "number"},
                self.break_off,
            )
        if only_tools is not None:
            unknown = sorted(set(only_tools) - set(self.tools))
            if unknown:
                raise SystemExit(f"--tools: unknown tool(s) {', '.join(unknown)}")
            self.tools = {n: t for n, t in self.tools.items() if n in only_tools}
        self.static_resources = {
            "test://info": (f"info of {name}", "info"),
            "file:///tmp/assern-test/readme.txt": (f"readme of {name}", "readme"),
        }
        self.subscribed: set[str] = set()
        # 2026-07-28 clients receive change events on `subscriptions/listen`
        # streams instead of spontaneous notifications; this bus feeds them.
        self.events = InMemorySubscriptionBus()

    def build(self) -> Server[Any]:
        return Server(
            self.name,
            version="1.0.0",
            instructions=f"The {self.name} test server of assern's test suite.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_subscriptions_listen=ListenHandler(self.events),
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_set_logging_level=self.set_logging_level,
            on_completion=self.complete,
        )

    # --- tools --------------------------------------------------------------

    def _builtin_tools(self) -> list[ToolDef]:
        return [
            ToolDef("echo", "Return `text` unchanged.", {"text": "string"}, self.echo),
            ToolDef("add", "Add two numbers.", {"a": "number", "b": "number"}, self.add),
            ToolDef(
                "get_env",
                "Read an environment variable of the server process.\n\n"
                "Returns its value, or `<unset>` when it is not set.",
                {"name": "string"},
                self.get_env,
            ),
            ToolDef("get_pid", "Return the server's process id.", {}, self.get_pid),
            ToolDef("get_meta", "Return the request's `_meta` as JSON.", {}, self.get_meta),
            ToolDef("slow", "Sleep `seconds`, then return `done`.", {"seconds": "number"}, self.slow),
            ToolDef(
                "gate",
                "Wait until the file at `path` exists, then return `opened`.\n\n"
                "Lets a test hold a call open and release it with an event of its own.",
                {"path": "string"},
                self.gate,
            ),
            ToolDef(
                "progress",
                "Report `steps` progress notifications, then return `progressed`.",
                {"steps": "integer"},
                self.progress,
            ),
            ToolDef(
                "ticker",
                "Report `steps` progress notifications `interval` seconds apart, then return `ticked`.",
                {"steps": "integer", "interval": "number"},
                self.ticker,
            ),
            ToolDef(
                "wait_cancel",
                "Wait until cancelled; on cancellation write `cancelled` to the file `marker`.",
                {"marker": "string"},
                self.wait_cancel,
            ),
            ToolDef(
                "crash",
                "Exit the server process at once with `code`.",
                {"code": "integer"},
                self.crash,
            ),
            ToolDef(
                "add_tool",
                "Register a new tool called `name`, then announce tools/list_changed.",
                {"name": "string"},
                self.add_tool,
            ),
            ToolDef(
                "ask_sampling",
                "Ask the client to sample an answer to `prompt`; return the answer's text.",
                {"prompt": "string"},
                self.ask_sampling,
            ),
            ToolDef(
                "ask_elicitation",
                "Ask the client's user a question; return `ACTION` or `ACTION: ANSWER`.",
                {"message": "string"},
                self.ask_elicitation,
            ),
            ToolDef("ask_roots", "Ask the client for its roots; return their URIs.", {}, self.ask_roots),
            ToolDef(
                "log",
                "Send a log message notification at `level`, then return `logged`.",
                {"level": "string", "message": "string"},
                self.log,
            ),
            ToolDef(
                "update_resource",
                "Announce that the resource `uri` changed (notifications/resources/updated).",
                {"uri": "string"},
                self.update_resource,
            ),
            ToolDef("subscribed", "The URIs a client subscribed to, one a line.", {}, self.subscribed_uris),
            ToolDef("big", "Return a text of exactly `n` bytes.", {"n": "integer"}, self.big),
        ]

    async def list_tools(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[tool.to_mcp(self.routing_headers) for tool in self.tools.values()]
        )

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        tool = self.tools.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            arguments = tool.check_arguments(params.arguments or {})
            text = await tool.run(ctx, **arguments)
        except ToolFailed as failure:
            return types.CallToolResult(content=[types.TextContent(text=str(failure))], is_error=True)
        except InputNeeded as needed:
            return types.InputRequiredResult(input_requests={INPUT_KEY: needed.request})
        return types.CallToolResult(content=[types.TextContent(text=text)])

    async def echo(self, ctx: Ctx, text: str) -> str:
        return text

    async def add(self, ctx: Ctx, a: float, b: float) -> str:
        return str(a + b)

    async def get_env(self, ctx: Ctx, name: str) -> str:
        return os.environ.get(name, "<unset>")

    async def get_pid(self, ctx: Ctx) -> str:
        return str(os.getpid())

    async def get_meta(self, ctx: Ctx) -> str:
        meta = dict(ctx.meta or {})
        meta.pop("progress_token", None)
        meta.pop("progressToken", None)
        return json.dumps(meta, sort_keys=True)

    async def slow(self, ctx: Ctx, seconds: float) -> str:
        await anyio.sleep(seconds)
        return "done"

    async def gate(self, ctx: Ctx, path: str) -> str:
        # Polling on purpose: the test's only signal is a file it creates.
        while not os.path.exists(path):  # noqa: ASYNC110, ASYNC240 - a stat is quick
            await anyio.sleep(0.01)
        return "opened"

    async def progress(self, ctx: Ctx, steps: int) -> str:
        for i in range(1, steps + 1):
            # A no-op when the caller sent no progressToken.
            await ctx.session.report_progress(i, steps, f"step {i}")
        return "progressed"

    async def ticker(self, ctx: Ctx, steps: int, interval: float) -> str:
        for i in range(1, steps + 1):
            await anyio.sleep(interval)
            await ctx.session.report_progress(i, steps, f"tick {i}")
        return "ticked"

    async def break_off(self, ctx: Ctx, seconds: float) -> str:
        if ctx.close_sse_stream is None:
            raise ToolFailed("this connection's streams cannot be resumed")
        # An event first, given time to go out: a stream closed before the client saw an
        # event has no id to resume from.
        await ctx.session.report_progress(1, 2, "before the break")
        await anyio.sleep(0.2)
        await ctx.close_sse_stream()
        await anyio.sleep(seconds)
        await ctx.session.report_progress(2, 2, "after the break")
        return "resumed"

    async def wait_cancel(self, ctx: Ctx, marker: str) -> str:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            # Synchronous on purpose: an await here would be cancelled too.
            Path(marker).write_text("cancelled")  # noqa: ASYNC240
            raise
        raise AssertionError("unreachable")

    async def crash(self, ctx: Ctx, code: int) -> str:
        os._exit(code)

    async def add_tool(self, ctx: Ctx, name: str) -> str:
        if name in self.tools:
            raise ToolFailed(f"tool {name!r} already exists")

        async def added(ctx: Ctx) -> str:
            return f"called {name}"

        self.tools[name] = ToolDef(name, "A tool added at runtime by add_tool.", {}, added)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.events.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()
        return "added"

    async def ask_client(self, ctx: Ctx, request: types.InputRequest, answer_type: type[R]) -> R:
        """Ask the client something, in the way the connection's protocol era allows."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # 2025 handshake era: a server-to-client JSON-RPC request tied to this call.
            related = ServerMessageMetadata(related_request_id=ctx.request_id)
            return await ctx.session.send_request(request, answer_type, metadata=related)
        # 2026-07-28: answer "input required"; the client's retry carries the answer.
        answers = (ctx.params or {}).get("inputResponses") or {}
        if INPUT_KEY not in answers:
            raise InputNeeded(request)
        return answer_type.model_validate(answers[INPUT_KEY], by_name=False)

    async def ask_sampling(self, ctx: Ctx, prompt: str) -> str:
        message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(messages=[message], max_tokens=200)
        )
        answer = await self.ask_client(ctx, request, types.CreateMessageResult)
        if not isinstance(answer.content, types.TextContent):
            raise ToolFailed(f"the sampling answer is {answer.content.type}, not text")
        return answer.content.text

    async def ask_elicitation(self, ctx: Ctx, message: str) -> str:
        schema: types.ElicitRequestedSchema = {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        }
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        result = await self.ask_client(ctx, request, types.ElicitResult)
        if result.action == "accept" and result.content is not None:
            return f"accept: {result.content.get('answer')}"
        return result.action

    async def ask_roots(self, ctx: Ctx) -> str:
        result = await self.ask_client(ctx, types.ListRootsRequest(), types.ListRootsResult)
        return "\n".join(str(root.uri) for root in result.roots)

    async def log(self, ctx: Ctx, level: str, message: str) -> str:
        if level not in LOG_LEVELS:
            raise ToolFailed(f"level must be one of {', '.join(LOG_LEVELS)}")
        await ctx.session.send_log_message(
            level,  # checked against LOG_LEVELS above
            message,
            logger=self.name,
            related_request_id=ctx.request_id,
        )
        return "logged"

    async def update_resource(self, ctx: Ctx, uri: str) -> str:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.events.publish(ResourceUpdated(uri=uri))
        elif uri in self.subscribed:
            await ctx.session.send_resource_updated(uri)
        return "updated"

    async def subscribed_uris(self, ctx: Ctx) -> str:
        return "\n".join(sorted(self.subscribed))

    async def big(self, ctx: Ctx, n: int) -> str:
        return "x" * n

    # --- resources ----------------------------------------------------------

    async def list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=uri, name=name, mime_type="text/plain")
                for uri, (_, name) in self.static_resources.items()
            ]
        )

    async def list_resource_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=ITEM_TEMPLATE_PREFIX + "{item}",
            name="item",
            description="Any item by name; reads as `item NAME`.",
            mime_type="text/plain",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri in self.static_resources:
            text = self.static_resources[uri][0]
        elif uri.startswith(ITEM_TEMPLATE_PREFIX) and len(uri) > len(ITEM_TEMPLATE_PREFIX):
            text = f"item {unquote(uri.removeprefix(ITEM_TEMPLATE_PREFIX))}"
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}", data={"uri": uri})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type="text/plain")]
        )

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.discard(str(params.uri))
        return types.EmptyResult()

    # --- completion ---------------------------------------------------------

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        """`language` of the generate-code prompt and `item` of the item template."""
        ref, argument = params.ref, params.argument
        if (
            isinstance(ref, types.PromptReference)
            and ref.name == "generate-code"
            and argument.name == "language"
        ):
            known = ["python", "perl", "php", "rust"]
        elif isinstance(ref, types.ResourceTemplateReference) and ref.uri == ITEM_TEMPLATE_PREFIX + "{item}":
            known = ["apple", "apricot", "banana"]
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"nothing to complete for {ref}")
        values = [value for value in known if value.startswith(argument.value)]
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values)))

    # --- prompts ------------------------------------------------------------

    async def list_prompts(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name="greet",
                    description="Greet someone by name.",
                    arguments=[types.PromptArgument(name="who", description="Who to greet.", required=True)],
                ),
                types.Prompt(
                    name="generate-code",
                    description="Ask for code in a given language.",
                    arguments=[
                        types.PromptArgument(
                            name="language", description="A programming language.", required=True
                        ),
                        types.PromptArgument(
                            name="task", description="What the code should do.", required=False
                        ),
                    ],
                ),
            ]
        )

    async def get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        arguments = params.arguments or {}

        def required(name: str) -> str:
            if name not in arguments:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Missing required argument: {name}")
            return arguments[name]

        if params.name == "greet":
            text = f"Hello, {required('who')}!"
        elif params.name == "generate-code":
            language = required("language")
            task = arguments.get("task")
            text = (
                f"Write {language} code that {task}."
                if task
                else f"Write a short example program in {language}."
            )
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(messages=[message])

    # --- logging ------------------------------------------------------------

    async def set_logging_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()  # `log` sends whatever it is asked to; nothing to filter


# --- middleware for the misbehaving modes ---------------------------------------


async def answer_nothing(ctx: Ctx, call_next: CallNext) -> HandlerResult:
    """--hang-on-start: never answer a request (initialize, server/discover, anything).

    The SDK reads `initialize` inline, so while it hangs the server stops reading
    stdin as well: only a signal stops this process.
    """
    if ctx.request_id is not None:
        await anyio.sleep_forever()
    return await call_next(ctx)


async def refuse_handshake(ctx: Ctx, call_next: CallNext) -> HandlerResult:
    """--modern-only: refuse the 2025 `initialize` handshake like a 2026-only server."""
    if ctx.method == "initialize":
        raise MCPError(
            code=types.UNSUPPORTED_PROTOCOL_VERSION,
            message="this server only speaks the 2026-07-28 protocol",
            data={"supported": list(MODERN_PROTOCOL_VERSIONS)},
        )
    return await call_next(ctx)


# --- process entry --------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A configurable MCP test server (stdio).")
    parser.add_argument(
        "--name", default="testing", help="server name, also used in texts (default: testing)"
    )
    parser.add_argument("--tools", help="comma-separated tools to offer (default: all)")
    parser.add_argument(
        "--routing-header",
        action="append",
        default=[],
        metavar="ARGUMENT=TOKEN",
        help="declare every tool argument ARGUMENT with `x-mcp-header: TOKEN` (repeatable)",
    )
    parser.add_argument(
        "--stderr-lines", type=int, default=0, metavar="N", help="write N lines to stderr at start"
    )
    parser.add_argument(
        "--spawn-grandchild",
        metavar="PIDFILE",
        help="start `sleep 1000` and write its pid to PIDFILE",
    )
    parser.add_argument(
        "--start-delay", type=float, default=0.0, metavar="SECONDS", help="wait before serving"
    )
    parser.add_argument(
        "--start-gate", metavar="FILE", help="wait until FILE exists (polls every 10 ms) before serving"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--hang-on-start", action="store_true", help="never answer any request")
    mode.add_argument("--crash-on-start", action="store_true", help="write to stderr and exit 3 at once")
    parser.add_argument(
        "--crash-on-start-if", metavar="FILE", help="crash on start (as --crash-on-start) while FILE exists"
    )
    mode.add_argument("--modern-only", action="store_true", help="refuse the initialize handshake")
    mode.add_argument("--legacy-only", action="store_true", help="serve only the initialize handshake era")
    parser.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (0: any port); "
        "prints `ready PORT` on stderr once it listens",
    )
    return parser.parse_args(argv)


class MemoryEventStore(EventStore):
    """Every event of every stream, in memory: a client may resume any of them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, types.JSONRPCMessage | None]] = []  # id, stream, message

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = f"e{len(self.events) + 1}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        ids = [event_id for event_id, _, _ in self.events]
        if last_event_id not in ids:
            return None
        start = ids.index(last_event_id)
        stream = self.events[start][1]
        for event_id, stream_id, message in self.events[start + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


async def serve_http(server: Any, port: int) -> None:
    """The server as the SDK's streamable-HTTP app, under hypercorn's trio worker, with
    resumable streams (events kept in memory; clients told to retry after 100 ms)."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=100)
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(hypercorn_serve, app, config)
        print(f"ready {binds[0].rsplit(':', 1)[1]}", file=sys.stderr, flush=True)


async def serve(args: argparse.Namespace) -> None:
    only_tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools is not None else None
    routing = dict(item.split("=", 1) for item in args.routing_header)
    state = TestingServer(args.name, only_tools, routing, http=args.http is not None)
    server = state.build()
    if args.hang_on_start:
        server.middleware.append(answer_nothing)
    if args.modern_only:
        server.middleware.append(refuse_handshake)
    init_options = server.create_initialization_options(NotificationOptions(tools_changed=True))

    if args.start_delay:
        await anyio.sleep(args.start_delay)
    # Polling on purpose, as `gate`: the test's only signal is a file it creates.
    while args.start_gate and not os.path.exists(args.start_gate):  # noqa: ASYNC110, ASYNC240
        await anyio.sleep(0.01)
    if args.http is not None:
        await serve_http(server, args.http)
        return
    async with stdio_server() as (read_stream, write_stream):
        if args.legacy_only:
            # The handshake-only loop: 2026-07-28 requests (server/discover) are refused.
            async with server.lifespan(server) as lifespan_state:
                await serve_loop(
                    server,
                    read_stream,
                    write_stream,
                    lifespan_state=lifespan_state,
                    init_options=init_options,
                )
        else:
            await server.run(read_stream, write_stream, init_options)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.crash_on_start or (args.crash_on_start_if and Path(args.crash_on_start_if).exists()):
        print(f"{args.name}: crashing on start as asked", file=sys.stderr, flush=True)
        os._exit(3)
    for i in range(1, args.stderr_lines + 1):
        print(f"stderr line {i}", file=sys.stderr, flush=True)
    if args.spawn_grandchild:
        # No pipes shared with us: the grandchild must not hold our stdout open.
        grandchild = subprocess.Popen(
            ["sleep", "1000"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        Path(args.spawn_grandchild).write_text(f"{grandchild.pid}\n")
    # Sampling, elicitation, roots, logging and resources/subscribe are deprecated
    # in the 2026-07-28 protocol; this server offers them on purpose.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    anyio.run(serve, args, backend="trio")


if __name__ == "__main__":
    main()
