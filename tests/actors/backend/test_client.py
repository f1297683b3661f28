"""Our handshake-era client, against a scripted backend: exactly what goes over the wire.

The backend's stdin is an in-memory `Outbox`; what the backend "writes" is handed to the
client the way the stdout reader does (the `Forwarder` first, then `receive`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from assern.actors.backend.actor import _all_pages
from assern.actors.backend.client import MODERN_RESULT_KEYS, HandshakeClient
from assern.actors.backend.errors import HandshakeFailed
from assern.actors.backend.forward import Forwarder, ForwardLost
from assern.actors.backend.hooks import SessionHooks
from assern.actors.backend.session import CLIENT_INFO
from assern.actors.backend.transport import ProcessLink
from assern.actors.jsonrpc.errors import RpcError

Handler = Callable[[dict[str, Any]], dict[str, Any] | None]

INIT_RESULT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
    "serverInfo": {"name": "fake", "version": "1.0"},
}


class Recorder:
    """Session hooks that remember what they were given; `ask` answers with `answers`."""

    def __init__(self) -> None:
        self.list_changes = 0
        self.notifications: list[types.ServerNotification] = []
        self.bad: list[str] = []
        self.asked: list[tuple[str, dict[str, Any] | None]] = []
        self.answer: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]] = self._refuse

    @staticmethod
    async def _refuse(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise RpcError(types.INVALID_REQUEST, f"nobody to ask for {method}")

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self.asked.append((method, params))
        return await self.answer(method, params)

    def list_changed(self) -> None:
        self.list_changes += 1

    def hooks(self) -> SessionHooks:
        return SessionHooks(
            list_changed=self.list_changed,
            notify=self.notifications.append,
            bad_message=self.bad.append,
            ask=self.ask,
        )


class Backend:
    """The scripted backend: reads what the client wrote, writes to the client's reader."""

    def __init__(self, out: Any, forwarder: Forwarder, client: HandshakeClient) -> None:
        self.out = out
        self.forwarder = forwarder
        self.client = client

    async def send(self, message: Any) -> None:
        """As the stdout reader hands on one decoded line."""
        if not self.forwarder.route(message, json.dumps(message).encode()):
            await self.client.receive(message)

    async def run(self, call: Awaitable[Any], handler: Handler) -> Any:
        """Run `call`, answering each request the client sends with `handler` (None: no answer)."""
        done: dict[str, Any] = {}

        async def runner() -> None:
            try:
                done["value"] = await call
            except Exception as exc:
                done["error"] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(runner)
            while True:
                await trio.testing.wait_all_tasks_blocked()
                lines = self.out.take()
                if not lines:
                    break
                for line in lines:
                    if "id" in line and "method" in line:
                        response = handler(line)
                        if response is not None:
                            await self.send({"jsonrpc": "2.0", "id": line["id"], **response})
            nursery.cancel_scope.cancel()
        if "error" in done:
            raise done["error"]
        return done.get("value")


@contextlib.asynccontextmanager
async def backend(outbox: Callable[..., Any], recorder: Recorder) -> AsyncIterator[Backend]:
    out = outbox()
    link = ProcessLink()
    forwarder = link.forwarder = Forwarder(out)
    async with trio.open_nursery() as tasks:
        client = HandshakeClient("fake", link, recorder.hooks(), tasks, CLIENT_INFO)
        yield Backend(out, forwarder, client)
        tasks.cancel_scope.cancel()


def result(value: dict[str, Any]) -> Handler:
    return lambda _request: {"result": value}


async def test_the_handshake_offers_the_latest_version_and_what_assern_can_do(
    outbox: Callable[..., Any],
) -> None:
    async with backend(outbox, Recorder()) as peer:
        sent: list[dict[str, Any]] = []

        def answer(request: dict[str, Any]) -> dict[str, Any]:
            sent.append(request)
            return {"result": INIT_RESULT}

        got = await peer.run(peer.client.initialize(), answer)
        [initialize] = sent
        assert initialize["method"] == "initialize"
        assert isinstance(initialize["id"], str)
        assert initialize["params"] == {
            "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1],
            "capabilities": {
                "sampling": {},
                "elicitation": {"form": {}, "url": {}},
                "roots": {"listChanged": True},
            },
            "clientInfo": {"name": "assern", "version": "0.1.0"},
        }
        assert got.server_info.name == "fake"
        assert peer.client.protocol_version == "2025-06-18"
        caps = peer.client.server_capabilities
        assert caps.tools == types.ToolsCapability(list_changed=True)
        assert caps.resources == types.ResourcesCapability(subscribe=True)
        assert caps.prompts is None


async def test_initialized_follows_the_answer(outbox: Callable[..., Any]) -> None:
    async with backend(outbox, Recorder()) as peer:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.client.initialize)
            await trio.testing.wait_all_tasks_blocked()
            [initialize] = peer.out.take()
            await peer.send({"jsonrpc": "2.0", "id": initialize["id"], "result": INIT_RESULT})
        assert peer.out.take() == [{"jsonrpc": "2.0", "method": "notifications/initialized"}]


async def test_a_version_the_handshake_does_not_offer_is_refused(outbox: Callable[..., Any]) -> None:
    async with backend(outbox, Recorder()) as peer:
        modern = {**INIT_RESULT, "protocolVersion": "2026-07-28"}
        with pytest.raises(
            HandshakeFailed,
            match="chose protocol version '2026-07-28', which the initialize handshake does not offer",
        ) as refused:
            await peer.run(peer.client.initialize(), result(modern))
        assert "2025-11-25" in str(refused.value)
        assert peer.out.take() == []  # no notifications/initialized
        assert peer.client.protocol_version is None


async def test_an_invalid_initialize_result_fails_the_handshake_and_says_why(
    outbox: Callable[..., Any],
) -> None:
    async with backend(outbox, Recorder()) as peer:
        broken = {"protocolVersion": "2025-06-18", "capabilities": {}}
        with pytest.raises(HandshakeFailed, match=r"invalid initialize result: serverInfo: Field required"):
            await peer.run(peer.client.initialize(), result(broken))


async def test_lists_follow_their_cursors(outbox: Callable[..., Any]) -> None:
    pages = {
        None: {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "p2"},
        "p2": {"tools": [{"name": "b", "inputSchema": {"type": "object"}}], "nextCursor": "p3"},
        "p3": {"tools": [{"name": "c", "inputSchema": {"type": "object"}}]},
    }
    seen: list[Any] = []

    def page(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request.get("params"))
        cursor = (request.get("params") or {}).get("cursor")
        return {"result": pages[cursor]}

    async with backend(outbox, Recorder()) as peer:
        tools = await peer.run(_all_pages(peer.client.list_tools, "tools"), page)
    assert [tool.name for tool in tools] == ["a", "b", "c"]
    assert seen == [None, {"cursor": "p2"}, {"cursor": "p3"}]  # the first page has no params


@pytest.mark.parametrize(
    ("method", "call"),
    [
        ("resources/list", lambda c: c.list_resources()),
        ("resources/templates/list", lambda c: c.list_resource_templates()),
        ("prompts/list", lambda c: c.list_prompts()),
    ],
)
async def test_every_list_has_its_method(outbox: Callable[..., Any], method: str, call: Any) -> None:
    field = {"resources/list": "resources", "resources/templates/list": "resourceTemplates"}.get(
        method, "prompts"
    )
    methods: list[str] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        methods.append(request["method"])
        return {"result": {field: []}}

    async with backend(outbox, Recorder()) as peer:
        await peer.run(call(peer.client), answer)
    assert methods == [method]


async def test_a_result_that_does_not_validate_fails_that_request_alone(outbox: Callable[..., Any]) -> None:
    async with backend(outbox, Recorder()) as peer:
        with pytest.raises(RpcError) as invalid:
            await peer.run(peer.client.list_tools(), result({"tools": [{"name": 3}]}))
        assert invalid.value.code == types.INTERNAL_ERROR
        assert "'fake' sent an invalid tools/list result" in invalid.value.message
        assert "tools.0.name" in invalid.value.message
        assert "tools.0.inputSchema: Field required" in invalid.value.message
        with pytest.raises(RpcError, match="resources/read result: contents: Field required"):
            await peer.run(peer.client.read_resource("test://x"), result({"text": "no contents"}))
        with pytest.raises(RpcError, match="is not a JSON object"):
            await peer.run(peer.client.get_prompt("p", None), result([]))  # type: ignore[arg-type]  # a list on purpose
        # The connection is still fine: the next request gets its answer.
        pong = await peer.run(peer.client.send_ping(), result({}))
        assert pong is None


async def test_fields_of_a_later_revision_are_not_held_against_an_older_backend(
    outbox: Callable[..., Any],
) -> None:
    later = {"tools": [], "ttlMs": -5, "cacheScope": 42, "resultType": "complete"}
    async with backend(outbox, Recorder()) as peer:
        listed = await peer.run(peer.client.list_tools(), result(later))
    assert listed.tools == []
    assert {"ttlMs", "cacheScope", "resultType"} <= MODERN_RESULT_KEYS


def test_the_later_revision_keys_are_those_of_the_protocol_maps() -> None:
    """MODERN_RESULT_KEYS, checked against the per-version result maps it summarizes."""
    from mcp_types import methods

    def keys(target: Any) -> set[str]:
        members = getattr(target, "__args__", (target,))
        return {field.alias or name for member in members for name, field in member.model_fields.items()}

    later: set[str] = set()
    for (method, version), target in methods.SERVER_RESULTS.items():
        if version == HANDSHAKE_PROTOCOL_VERSIONS[-1] and (method, "2026-07-28") in methods.SERVER_RESULTS:
            later |= keys(methods.SERVER_RESULTS[(method, "2026-07-28")]) - keys(target)
    assert later == MODERN_RESULT_KEYS


async def test_a_call_reports_progress_and_returns_a_validated_result(outbox: Callable[..., Any]) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def sink(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with backend(outbox, Recorder()) as peer, trio.open_nursery() as nursery:
        got: dict[str, Any] = {}

        async def call() -> None:
            got["result"] = await peer.client.call_tool(
                "echo", {"text": "hi"}, meta={"trace": "t1"}, progress=sink
            )

        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        [request] = peer.out.take()
        token = request["params"]["_meta"]["progressToken"]
        assert request["params"] == {
            "name": "echo",
            "arguments": {"text": "hi"},
            "_meta": {"trace": "t1", "progressToken": token},
        }
        for step in (1, 2):
            note = {"progressToken": token, "progress": step, "total": 2, "message": f"step {step}"}
            await peer.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
            await trio.testing.wait_all_tasks_blocked()
        answer = {"content": [{"type": "text", "text": "hi"}], "isError": False}
        await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": answer})
    assert seen == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert isinstance(got["result"], types.CallToolResult)
    [content] = got["result"].content
    assert isinstance(content, types.TextContent)
    assert content.text == "hi"


async def test_an_error_answer_raises_the_backends_error(outbox: Callable[..., Any]) -> None:
    error = {"error": {"code": -32602, "message": "Unknown resource", "data": {"uri": "x"}}}
    async with backend(outbox, Recorder()) as peer:
        with pytest.raises(RpcError) as raised:
            await peer.run(peer.client.read_resource("x"), lambda _request: error)
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32602,
        "Unknown resource",
        {"uri": "x"},
    )


async def test_the_other_requests_carry_their_params(outbox: Callable[..., Any]) -> None:
    sent: list[tuple[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        sent.append((request["method"], request.get("params")))
        if request["method"] == "prompts/get":
            return {"result": {"messages": []}}
        if request["method"] == "completion/complete":
            return {"result": {"completion": {"values": ["py"]}}}
        return {"result": {}}

    ref = types.PromptReference(name="generate-code")
    async with backend(outbox, Recorder()) as peer:
        client = peer.client
        await peer.run(client.get_prompt("greet", {"who": "x"}), answer)
        done = await peer.run(client.complete(ref, {"name": "language", "value": "p"}, {"task": "t"}), answer)
        await peer.run(client.subscribe_resource("test://info"), answer)
        await peer.run(client.unsubscribe_resource("test://info"), answer)
        await peer.run(client.set_logging_level("debug"), answer)
        await peer.run(client.send_ping(), answer)
    assert done.completion.values == ["py"]
    assert sent == [
        ("prompts/get", {"name": "greet", "arguments": {"who": "x"}}),
        (
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "generate-code"},
                "argument": {"name": "language", "value": "p"},
                "context": {"arguments": {"task": "t"}},
            },
        ),
        ("resources/subscribe", {"uri": "test://info"}),
        ("resources/unsubscribe", {"uri": "test://info"}),
        ("logging/setLevel", {"level": "debug"}),
        ("ping", None),
    ]


async def test_a_cancelled_request_is_cancelled_at_the_backend(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    async with backend(outbox, Recorder()) as peer:
        with trio.move_on_after(5):
            await peer.client.read_resource("test://slow")
        request, note = peer.out.take()
        assert note["method"] == "notifications/cancelled"
        assert note["params"]["requestId"] == request["id"]
        # Its late answer is dropped quietly.
        await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"contents": []}})


async def test_initialize_is_never_cancelled_at_the_backend(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    async with backend(outbox, Recorder()) as peer:
        with trio.move_on_after(5):
            await peer.client.initialize()
        [initialize] = peer.out.take()
        assert initialize["method"] == "initialize"


async def test_the_backends_ping_is_answered_and_unknown_requests_are_refused(
    outbox: Callable[..., Any],
) -> None:
    async with backend(outbox, Recorder()) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
        await peer.send({"jsonrpc": "2.0", "id": "t1", "method": "tasks/list", "params": {}})
        await trio.testing.wait_all_tasks_blocked()
        replies = {reply["id"]: reply for reply in peer.out.take()}
    pong, refused = replies[5], replies["t1"]
    assert pong == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert refused == {
        "jsonrpc": "2.0",
        "id": "t1",
        "error": {"code": types.METHOD_NOT_FOUND, "message": "Method not found", "data": "tasks/list"},
    }


async def test_sampling_elicitation_and_roots_go_to_a_client_and_back(outbox: Callable[..., Any]) -> None:
    recorder = Recorder()
    answers: dict[str, dict[str, Any]] = {
        "sampling/createMessage": {
            "role": "assistant",
            "content": {"type": "text", "text": "4"},
            "model": "m",
        },
        "elicitation/create": {"action": "accept", "content": {"name": "x"}},
        "roots/list": {"roots": [{"uri": "file:///work"}]},
    }

    async def answer(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        found: dict[str, Any] = answers[method]
        return found

    recorder.answer = answer
    sampling = {"messages": [{"role": "user", "content": {"type": "text", "text": "2+2"}}], "maxTokens": 5}
    elicitation = {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}
    async with backend(outbox, recorder) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": sampling})
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "elicitation/create", "params": elicitation})
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "roots/list"})
        await trio.testing.wait_all_tasks_blocked()
        replies = {reply["id"]: reply for reply in peer.out.take()}
    assert replies[1]["result"] == answers["sampling/createMessage"]
    assert replies[2]["result"] == answers["elicitation/create"]
    assert replies[3]["result"] == answers["roots/list"]
    asked = dict(recorder.asked)
    assert asked["sampling/createMessage"] == sampling
    assert asked["elicitation/create"] == {"mode": "form", **elicitation}  # as the SDK path dumps it
    assert asked["roots/list"] is None


async def test_a_refused_or_malformed_backend_request_is_answered_with_an_error(
    outbox: Callable[..., Any],
) -> None:
    recorder = Recorder()  # refuses everything with INVALID_REQUEST
    async with backend(outbox, recorder) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage", "params": {"x": 1}})
        await trio.testing.wait_all_tasks_blocked()
        replies = {reply["id"]: reply for reply in peer.out.take()}
    assert replies[1]["error"] == {"code": types.INVALID_REQUEST, "message": "nobody to ask for roots/list"}
    assert replies[2]["error"]["code"] == types.INVALID_PARAMS
    assert (
        "invalid sampling/createMessage params: params.messages: Field required"
        in replies[2]["error"]["message"]
    )
    assert [method for method, _ in recorder.asked] == ["roots/list"]  # the malformed one asked nobody


def never_answered(recorder: Recorder) -> trio.Event:
    """Make the client of `recorder` never answer what it is asked; the event: it was asked."""
    asked = trio.Event()

    async def never(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError

    recorder.answer = never
    return asked


async def test_a_request_the_backend_cancels_gets_no_answer(outbox: Callable[..., Any]) -> None:
    recorder = Recorder()
    asked = never_answered(recorder)
    async with backend(outbox, recorder) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 9, "method": "roots/list"})
        await asked.wait()
        cancel = {"requestId": 9, "reason": "no longer needed"}
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        await trio.testing.wait_all_tasks_blocked()
        assert peer.out.take() == []
        assert peer.client._answering == {}


async def test_notifications_reach_the_actor(outbox: Callable[..., Any]) -> None:
    recorder = Recorder()
    async with backend(outbox, recorder) as peer:
        for kind in ("tools", "prompts", "resources"):
            await peer.send({"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"})
        await peer.send(
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://info"}}
        )
        log = {"level": "warning", "logger": "fake", "data": "careful"}
        await peer.send({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
        await peer.send({"jsonrpc": "2.0", "method": "notifications/something/new", "params": {}})
        progress = {"progressToken": "a77", "progress": 1}
        await peer.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    assert recorder.list_changes == 3
    updated, logged = recorder.notifications
    assert isinstance(updated, types.ResourceUpdatedNotification)
    assert updated.params.uri == "test://info"
    assert isinstance(logged, types.LoggingMessageNotification)
    assert (logged.params.level, logged.params.data) == ("warning", "careful")
    assert recorder.bad == []


async def test_what_is_not_json_rpc_is_reported_and_skipped(outbox: Callable[..., Any]) -> None:
    recorder = Recorder()
    async with backend(outbox, recorder) as peer:
        await peer.client.receive(ValueError("Expecting value: line 1 column 1 (char 0)"))
        await peer.send([1, 2])
        await peer.send({"jsonrpc": "1.0", "method": "ping", "id": 1})
        await peer.send({"jsonrpc": "2.0", "id": 3})
        await peer.send({"jsonrpc": "2.0", "method": "notifications/resources/updated"})
        await peer.send({"jsonrpc": "2.0", "id": "a42", "result": {}})  # nobody waits: dropped quietly
        pong = await peer.run(peer.client.send_ping(), result({}))
    assert pong is None
    assert len(recorder.bad) == 5
    assert recorder.bad[0].startswith("not JSON")
    assert recorder.bad[1].startswith("not a JSON-RPC 2.0 message")
    assert recorder.bad[4].startswith("invalid notifications/resources/updated: params: ")


async def test_a_lost_backend_fails_pending_requests_and_stops_answering(outbox: Callable[..., Any]) -> None:
    recorder = Recorder()
    asked = never_answered(recorder)
    async with backend(outbox, recorder) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
        await asked.wait()
        outcome: dict[str, Exception] = {}

        async def call() -> None:
            try:
                await peer.client.list_tools()
            except ForwardLost as exc:
                outcome["lost"] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            peer.forwarder.close("the backend closed its stdout")
            peer.client.closed()
        assert str(outcome["lost"]) == "the backend closed its stdout"
        await trio.testing.wait_all_tasks_blocked()
        assert peer.client._answering == {}
        with pytest.raises(ForwardLost, match="closed its stdout"):
            await peer.client.send_ping()
