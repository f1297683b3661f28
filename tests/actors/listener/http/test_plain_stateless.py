"""2026-07-28 requests the front answers itself (plain_stateless.py): which ones, that
each answer is the one the SDK's own entry gives for the same request, and the
stream, keep-alive and cancellation of a request that is slow."""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.transport_context import TransportContext

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.http import plain_stateless, responses

BOTH = "application/json, text/event-stream"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "echo": {"type": "object", "properties": {"text": {"type": "string"}}},
    "weather": {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    },
}


def call(
    name: str, request_id: Any = 1, meta: dict[str, Any] | None = None, **arguments: Any
) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": META if meta is None else meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def headers_for(message: dict[str, Any], **extra: str) -> list[tuple[str, str]]:
    found = [
        ("content-type", "application/json"),
        ("accept", BOTH),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", message["method"]),
        ("host", "127.0.0.1:1"),
    ]
    name = (message.get("params") or {}).get("name")
    if name is not None:
        found.append(("mcp-name", name))
    changed = {key.replace("_", "-"): value for key, value in extra.items()}
    return [(key, changed.pop(key, value)) for key, value in found] + list(changed.items())


# ---------------------------------------------------------------- which POSTs


def test_a_tool_call_without_progress_is_plain() -> None:
    message = call("echo", text="hi")
    request = plain_stateless.plain_request(dict(headers_for(message)), message)
    assert request is not None
    assert (request.id, request.method) == (1, "tools/call")


@pytest.mark.parametrize(
    ("message", "change"),
    [
        pytest.param({"jsonrpc": "2.0", "method": "notifications/x"}, {}, id="notification"),
        pytest.param({**call("echo"), "id": None}, {}, id="null id"),
        pytest.param({**call("echo"), "jsonrpc": "1.0"}, {}, id="not JSON-RPC 2.0"),
        pytest.param([call("echo")], {}, id="batch"),
        pytest.param(call("echo", meta={**META, "progressToken": 7}), {}, id="asks progress"),
        pytest.param(
            {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {"_meta": META}},
            {},
            id="listen stream",
        ),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, {}, id="initialize"),
        pytest.param(call("echo"), {"accept": "application/json"}, id="JSON only accepted"),
        pytest.param(call("echo"), {"content-type": "text/plain"}, id="not a JSON body"),
    ],
)
def test_everything_else_goes_to_the_sdk_entry(message: Any, change: dict[str, str]) -> None:
    headers = {"content-type": "application/json", "accept": BOTH, **change}
    assert plain_stateless.plain_request(headers, message) is None


# ---------------------------------------------------------- the same answers


def server(handler: Callable[..., Any] | None = None) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name=name, input_schema=schema) for name, schema in SCHEMAS.items()]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if handler is not None:
            return await handler(ctx, params)  # type: ignore[no-any-return]
        if params.name not in SCHEMAS:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        text = json.dumps(params.arguments or {}, sort_keys=True)
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(
        "fixture",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=SCHEMAS.get,
    )


class Post:
    """One POST as hypercorn hands it to the application, and what was sent back."""

    def __init__(
        self, message: Any, headers: list[tuple[str, str]], *, leave_after: float | None = None
    ) -> None:
        self.body = json.dumps(message).encode()
        self.message = message
        self.headers = headers
        self.leave_after = leave_after
        self.sent: list[dict[str, Any]] = []
        self._delivered = False

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": [(k.encode(), v.encode()) for k, v in self.headers],
            "server": ("127.0.0.1", 1),
            "client": ("127.0.0.1", 2),
        }

    async def receive(self) -> dict[str, Any]:
        if not self._delivered:
            self._delivered = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if self.leave_after is None:
            await trio.sleep_forever()
        await trio.sleep(self.leave_after)
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(dict(message))

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def content_type(self) -> bytes:
        content_type: bytes = dict(self.sent[0]["headers"])[b"content-type"]
        return content_type

    @property
    def body_sent(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    def answer(self) -> Any:
        if self.content_type == b"text/event-stream":
            return json.loads(self.body_sent.split(b"data: ")[-1])
        return json.loads(self.body_sent)

    async def plain(self, app: Server[Any], lane: Any = None) -> None:
        request = plain_stateless.plain_request(dict(self.headers), self.message)
        assert request is not None, "the case is meant to take the plain way"
        await plain_stateless.answer(
            app, {}, request, self.message, self.scope(), self.receive, self.send, lane=lane
        )

    async def sdk(self, app: Server[Any]) -> None:
        manager = StreamableHTTPSessionManager(app, stateless=True)
        async with manager.run():
            await manager.handle_request(self.scope(), self.receive, self.send)


CASES = [
    pytest.param(call("echo", text="hi"), {}, id="a call"),
    pytest.param(call("nope"), {}, id="unknown tool"),
    pytest.param({**call("echo"), "id": "text-id"}, {}, id="string id"),
    pytest.param(
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}}, {}, id="a list"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 3, "method": "prompts/list", "params": {"_meta": META}},
        {},
        id="a method not served",
    ),
    pytest.param(call("echo", text="hi"), {"mcp_method": "tools/list"}, id="Mcp-Method disagrees"),
    pytest.param(call("echo", meta={}), {}, id="no envelope"),
    pytest.param(
        call("echo", meta={**META, "io.modelcontextprotocol/protocolVersion": "2031-01-01"}),
        {"mcp_protocol_version": "2031-01-01"},
        id="unsupported version",
    ),
    pytest.param(call("weather", region="eu"), {"mcp_param_region": "eu"}, id="Mcp-Param matches"),
    pytest.param(call("weather", region="eu"), {"mcp_param_region": "us"}, id="Mcp-Param differs"),
    pytest.param(call("weather", region="eu"), {}, id="Mcp-Param missing"),
    pytest.param({**call("echo"), "params": {"arguments": {}, "_meta": META}}, {}, id="params invalid"),
]


@pytest.mark.parametrize(("message", "extra"), CASES)
async def test_the_answer_is_the_one_the_sdk_entry_gives(
    message: dict[str, Any], extra: dict[str, str]
) -> None:
    headers = headers_for(message, **extra)
    if message["method"] == "tools/call" and "name" not in message["params"]:
        headers = [(k, v) for k, v in headers if k != "mcp-name"]
    ours, theirs = Post(message, headers), Post(message, headers)
    await ours.plain(server())
    await theirs.sdk(server())
    assert (ours.status, ours.content_type) == (theirs.status, theirs.content_type)
    assert ours.answer() == theirs.answer()


async def test_a_repeated_routing_header_is_refused_as_the_sdk_refuses_it() -> None:
    message = call("echo", text="hi")
    headers = [*headers_for(message), ("mcp-method", "tools/call")]
    ours, theirs = Post(message, headers), Post(message, headers)
    await ours.plain(server())
    await theirs.sdk(server())
    assert ours.status == theirs.status == 400
    assert ours.answer() == theirs.answer()
    assert "appears more than once" in ours.answer()["error"]["message"]


# ------------------------------------------------- the raw lane's answers


class Lane:
    """A 2026-07-28 connection's raw lane (modern_lane.py) with a set answer."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, Any]] = []

    async def call(self, request_id: Any, params: Any) -> Any:
        self.calls.append((request_id, params))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


ROUND = types.InputRequiredResult(
    input_requests={
        "r1": types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(text="hi"))],
                max_tokens=10,
            )
        )
    },
    request_state="assern.abc",
)


@pytest.mark.parametrize(
    ("raw", "model"),
    [
        pytest.param(
            {
                "content": [{"type": "text", "text": "hi"}],
                "isError": False,
                "structuredContent": {"n": 1},
                "resultType": "complete",
            },
            types.CallToolResult(content=[types.TextContent(text="hi")], structured_content={"n": 1}),
            id="a backend's result",
        ),
        pytest.param(
            {
                "content": [{"type": "text", "text": "no"}],
                "isError": True,
                "_meta": {"k": "v"},
                "resultType": "complete",
            },
            types.CallToolResult(content=[types.TextContent(text="no")], is_error=True, _meta={"k": "v"}),
            id="a tool error with its own _meta",
        ),
        pytest.param(ROUND, ROUND, id="an input round"),
        pytest.param(
            RpcError(types.INVALID_PARAMS, "bad", {"why": "x"}),
            MCPError(code=types.INVALID_PARAMS, message="bad", data={"why": "x"}),
            id="an error",
        ),
    ],
)
async def test_a_raw_call_is_answered_as_the_sdk_entry_answers_its_result(raw: Any, model: Any) -> None:
    async def handler(ctx: Any, params: Any) -> Any:
        if isinstance(model, Exception):
            raise model
        return model

    message = call("echo", text="hi")
    ours, theirs = Post(message, headers_for(message)), Post(message, headers_for(message))
    lane = Lane(raw)
    await ours.plain(server(), lane)
    await theirs.sdk(server(handler))
    assert lane.calls == [(1, message["params"])]
    assert (ours.status, ours.content_type) == (theirs.status, theirs.content_type)
    assert ours.answer() == theirs.answer()


async def test_a_backend_result_that_is_no_result_is_an_internal_error() -> None:
    message = call("echo", text="hi")
    post = Post(message, headers_for(message))
    await post.plain(server(), Lane(["not", "an", "object"]))
    invalid = {"code": types.INTERNAL_ERROR, "message": "Handler returned an invalid result"}
    assert post.answer()["error"] == invalid


async def test_a_call_the_lane_leaves_goes_to_the_sdk_server() -> None:
    message = call("echo", text="hi")
    ours, theirs = Post(message, headers_for(message)), Post(message, headers_for(message))
    lane = Lane(None)
    await ours.plain(server(), lane)
    await theirs.sdk(server())
    assert len(lane.calls) == 1
    assert ours.answer() == theirs.answer()


# ------------------------------------------------------------ slow requests


async def test_a_silent_slow_request_is_streamed_with_keepalives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(ctx: Any, params: Any) -> types.CallToolResult:
        await trio.sleep(40)
        return types.CallToolResult(content=[types.TextContent(text="late")])

    message = call("echo")
    post = Post(message, headers_for(message))
    start = trio.current_time()
    await post.plain(server(slow))
    assert trio.current_time() - start == pytest.approx(40)
    assert post.status == 200
    assert post.content_type == b"text/event-stream"
    assert post.body_sent.count(responses.KEEPALIVE) == 2  # at 15 s and 30 s
    assert post.answer()["result"]["content"][0]["text"] == "late"
    assert post.sent[-1]["more_body"] is False


async def test_a_notification_opens_the_stream_before_the_answer() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    exchange = plain_stateless.Exchange(
        transport=TransportContext(kind="streamable-http", can_send_request=False), request_id=5, send=send
    )
    await exchange.notify("notifications/message", {"level": "info", "data": "working"})
    await exchange.finish(200, b'{"jsonrpc":"2.0","id":5,"result":{}}')
    assert sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"content-type"] == b"text/event-stream"
    events = [json.loads(m["body"].split(b"data: ")[1]) for m in sent[1:]]
    assert events == [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}},
        {"jsonrpc": "2.0", "id": 5, "result": {}},
    ]
    assert sent[-1]["more_body"] is False


async def test_a_client_that_leaves_cancels_its_request(autojump_clock: trio.testing.MockClock) -> None:
    cancelled = trio.Event()

    async def forever(ctx: Any, params: Any) -> types.CallToolResult:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    message = call("echo")
    post = Post(message, headers_for(message), leave_after=3)
    start = trio.current_time()
    await post.plain(server(forever))
    assert cancelled.is_set()
    assert trio.current_time() - start == pytest.approx(3)
    assert post.sent == []  # nobody to answer


async def test_a_handler_that_crashes_is_an_internal_error_as_in_the_sdk_entry() -> None:
    async def crash(ctx: Any, params: Any) -> types.CallToolResult:
        raise RuntimeError("a secret detail")

    message = call("echo")
    ours, theirs = Post(message, headers_for(message)), Post(message, headers_for(message))
    await ours.plain(server(crash))
    await theirs.sdk(server(crash))
    assert (ours.status, ours.answer()) == (theirs.status, theirs.answer())
    assert "secret" not in ours.body_sent.decode()
