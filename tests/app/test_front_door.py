"""The front door: the early `initialize` answer, compared with the session's and the SDK's.

The session's answer is the listener's own: a `ClientConnection` on in-memory byte
streams. The SDK's is the SDK's lowlevel `Server` built with the same connection's
handlers (modern.py, which serves 2026-07-28 clients with it), asked by a handshake-era
client over the same kind of streams, with the capabilities `capabilities()` gives.
All three must be the same bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.server import runner
from mcp_types import version as sdk_versions

from assern.actors.config.spec import ServerSpec
from assern.actors.jsonrpc import framing
from assern.actors.listener.actor import BackendNote, ListenerActor
from assern.actors.listener.handshake import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    capabilities_from,
    initialize_request_id,
    negotiate,
)
from assern.actors.listener.modern import ModernServer
from assern.actors.listener.sdk_streams import message_streams
from assern.actors.listener.session import ClientConnection, SessionContext
from assern.actors.router.capabilities import CapabilityCache
from assern.actors.router.capability_file import remembered_raw
from assern.actors.router.catalog import Catalog, ToolRoute
from assern.app.front_door import FrontDoor
from assern.supervisor.cell import Cell
from assern.supervisor.io.writer import DirectWriter

LIMIT = 30  # a guard against a hung test, never an assertion about speed


def initialize(request_id: Any = 1, version: str = "2025-11-25", **params: Any) -> dict[str, Any]:
    body = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {**body, **params}}


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def shared_context(
    remembered: Mapping[str, types.ServerCapabilities] | None = None, instructions: str | None = None
) -> SessionContext:
    settled = trio.Event()
    settled.set()
    return SessionContext(
        catalog=Cell(Catalog()),
        directory=dict,
        settled=settled,
        remembered=lambda: dict(remembered or {}),
        instructions=instructions,
    )


class Lines:
    """The reading side of a byte stream, a line at a time."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the stream ended"
            self.buffer += chunk
        first, self.buffer = self.buffer.split(b"\n", 1)
        return first + b"\n"


class Recorder(trio.abc.SendStream):
    """A send stream that keeps everything written to it."""

    def __init__(self) -> None:
        self.data = b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.data += bytes(data)

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def session_answers(shared: SessionContext, sent: list[bytes], count: int) -> list[bytes]:
    """The first `count` lines the listener's session (no door) writes for these client lines."""
    client_send, server_receive = trio.testing.memory_stream_one_way_pair()
    server_send, client_receive = trio.testing.memory_stream_one_way_pair()
    connection = ClientConnection("stdio-1", shared)
    answers = []
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.serve, server_receive, server_send)
            for data in sent:
                await client_send.send_all(data)
            lines = Lines(client_receive)
            answers = [await lines.next() for _ in range(count)]
            nursery.cancel_scope.cancel()
    return answers


async def sdk_answers(shared: SessionContext, sent: list[bytes], count: int) -> list[bytes]:
    """The first `count` lines the SDK's server writes for these client lines."""
    client_send, server_receive = trio.testing.memory_stream_one_way_pair()
    server_send, client_receive = trio.testing.memory_stream_one_way_pair()
    connection = ClientConnection("stdio-1", shared)
    answers = []
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            subscribe = connection.handlers.set_subscription
            modern = ModernServer(connection.methods(), connection.shared, subscribe, nursery)
            options = modern.initialization_options()
            options.capabilities = connection.capabilities()

            async def serve() -> None:
                out = DirectWriter(server_send)
                nursery.start_soon(out.pump)
                async with message_streams(framing.line_reader(server_receive), out) as (read, write):
                    await modern.server.run(read, write, options)

            nursery.start_soon(serve)
            for data in sent:
                await client_send.send_all(data)
            lines = Lines(client_receive)
            answers = [await lines.next() for _ in range(count)]
            nursery.cancel_scope.cancel()
    return answers


async def door_answer(data: bytes, **options: Any) -> bytes:
    """What the door writes on reading `data` (then EOF)."""
    client_send, door_receive = trio.testing.memory_stream_one_way_pair()
    out = Recorder()
    door = FrontDoor(door_receive, out, **options)
    await client_send.send_all(data)
    await client_send.aclose()
    with trio.fail_after(LIMIT):
        await door.run()
    return out.data


# ----------------------------------------------------------------- pure parts


def test_the_door_loads_without_the_sdk() -> None:
    """It answers while the SDK is imported: `assern serve`'s path to it must stay light."""
    code = (
        "import sys\n"
        "import assern.app.cli, assern.app.detach, assern.app.election\n"
        "import assern.app.front_door, assern.actors.listener.stdio, assern.actors.listener.handshake\n"
        "import assern.actors.router.capability_file\n"
        "heavy = ('mcp', 'mcp_types', 'pydantic', 'anyio')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_handshake_versions_are_the_sdks() -> None:
    assert HANDSHAKE_VERSIONS == sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS
    assert LATEST_HANDSHAKE_VERSION == sdk_versions.LATEST_HANDSHAKE_VERSION
    # ... and the ones the SDK's server negotiates with.
    # The runner imports them without re-exporting them: read them as attributes.
    assert getattr(runner, "HANDSHAKE_PROTOCOL_VERSIONS") == HANDSHAKE_VERSIONS  # noqa: B009
    assert getattr(runner, "LATEST_HANDSHAKE_VERSION") == LATEST_HANDSHAKE_VERSION  # noqa: B009


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),  # not a handshake-era version
        ("1999-01-01", "2025-11-25"),
        ("", "2025-11-25"),
    ],
)
def test_the_version_is_negotiated_as_the_sdk_does(requested: str, negotiated: str) -> None:
    assert negotiate(requested) == negotiated


def test_capabilities_without_anything_remembered() -> None:
    assert capabilities_from([]) == {
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": False},
        "tools": {"listChanged": True},
    }


def test_capabilities_offer_what_a_remembered_backend_offers() -> None:
    caps = capabilities_from(
        [{"tools": {}}, {"resources": {"subscribe": True}, "logging": {}, "completions": {}}]
    )
    assert caps["resources"] == {"listChanged": True, "subscribe": True}
    assert caps["logging"] == {}
    assert caps["completions"] == {}
    assert caps["tools"] == {"listChanged": True}


def spec(name: str, *args: str) -> ServerSpec:
    return ServerSpec(name=name, transport="stdio", command="srv", args=args)


def test_remembered_capabilities_are_read_from_the_cache_file(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "capabilities.json"
    specs = {"a": spec("a"), "b": spec("b"), "c": spec("c")}
    CapabilityCache(path).remember(
        specs,
        {
            "a": types.ServerCapabilities(resources=types.ResourcesCapability(subscribe=True)),
            "b": types.ServerCapabilities(logging=types.LoggingCapability()),
        },
    )
    assert remembered_raw(path, specs) == {"a": {"resources": {"subscribe": True}}, "b": {"logging": {}}}
    # Started another way now: what it offered then says nothing.
    assert remembered_raw(path, {"a": spec("a", "--other")}) == {}


@pytest.mark.parametrize("content", [None, "", "{not json", "[]", '{"a": 5}', '{"a": {"fingerprint": 3}}'])
def test_an_absent_or_corrupt_cache_file_remembers_nothing(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "capabilities.json"
    if content is not None:
        path.write_text(content)
    assert remembered_raw(path, {"a": spec("a")}) == {}
    assert capabilities_from(remembered_raw(path, {"a": spec("a")}).values()) == capabilities_from([])


def test_a_malformed_entry_is_skipped_as_the_sdk_path_skips_it(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.json"
    cache = CapabilityCache(path)
    cache.remember({"a": spec("a")}, {"a": types.ServerCapabilities(logging=types.LoggingCapability())})
    entries = json.loads(path.read_text())
    entries["a"]["capabilities"] = {"logging": 5}
    path.write_text(json.dumps(entries))
    assert CapabilityCache(path).get(spec("a")) is None
    assert remembered_raw(path, {"a": spec("a")}) == {}


@pytest.mark.parametrize(
    "message",
    [
        {**initialize(), "jsonrpc": "1.0"},
        {**initialize(), "method": "tools/list"},
        {k: v for k, v in initialize().items() if k != "id"},  # a notification
        initialize(request_id=True),
        initialize(request_id=1.5),
        initialize(request_id=None),
        {**initialize(), "params": None},
        initialize(version=5),  # type: ignore[arg-type]  # a wrong type on purpose
        initialize(capabilities=None),
        initialize(capabilities={"roots": 5}),
        initialize(capabilities={"roots": {"listChanged": "yes"}}),
        initialize(capabilities={"experimental": {"x": 1}}),
        initialize(clientInfo={"name": "x"}),
        initialize(clientInfo={"name": 1, "version": "1"}),
        initialize(clientInfo={"name": "x", "version": "1", "icons": [{"src": "x"}]}),
        initialize(_meta=[]),
        initialize(_meta={"progressToken": [1]}),
        [initialize()],
        "initialize",
    ],
)
def test_only_a_well_formed_initialize_is_answerable(message: Any) -> None:
    assert initialize_request_id(message) is None


# --------------------------------------------------- the answer, against the SDK's

ANSWERABLE = [
    initialize(),
    initialize(request_id="abc-1"),
    initialize(request_id=0),
    initialize(version="2024-11-05"),
    initialize(version="2025-03-26"),
    initialize(version="2025-06-18"),
    initialize(version="2026-07-28"),
    initialize(version="not-a-version"),
    initialize(
        clientInfo={"name": "claude-code", "version": "2.1", "title": "Claude Code", "websiteUrl": None}
    ),
    initialize(
        capabilities={
            "roots": {"listChanged": True},
            "sampling": {"context": {}, "tools": {}},
            "elicitation": {"form": {}, "url": {}},
            "experimental": {"x": {"y": 1}},
            "tasks": {"requests": {"sampling": {"createMessage": {}}}},
        }
    ),
    initialize(_meta={"progressToken": "t"}),
]


@pytest.mark.parametrize("message", ANSWERABLE)
async def test_the_door_answers_exactly_as_the_session_and_the_sdk(message: dict[str, Any]) -> None:
    assert initialize_request_id(message) == message["id"]
    answer = await door_answer(line(message))
    assert answer == (await session_answers(shared_context(), [line(message)], 1))[0]
    assert answer == (await sdk_answers(shared_context(), [line(message)], 1))[0]


async def test_the_answer_carries_the_remembered_capabilities_and_instructions(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.json"
    specs = {"a": spec("a"), "b": spec("b")}
    offered = {
        "a": types.ServerCapabilities(
            resources=types.ResourcesCapability(subscribe=True), completions=types.CompletionsCapability()
        ),
        "b": types.ServerCapabilities(logging=types.LoggingCapability(), tools=types.ToolsCapability()),
    }
    CapabilityCache(path).remember(specs, offered)
    # The session, as the tree builds it: a fresh cache, looked up per configured server.
    cache = CapabilityCache(path)
    remembered = {name: caps for name, s in specs.items() if (caps := cache.get(s)) is not None}
    shared = shared_context(remembered, instructions="Ask assern — it knows.")
    expected = (await session_answers(shared, [line(initialize())], 1))[0]
    assert expected == (await sdk_answers(shared, [line(initialize())], 1))[0]

    answer = await door_answer(
        line(initialize()),
        capabilities=lambda: capabilities_from(remembered_raw(path, specs).values()),
        instructions="Ask assern — it knows.",
    )
    assert answer == expected
    result = json.loads(answer)["result"]
    assert result["capabilities"]["resources"]["subscribe"] is True
    assert result["capabilities"]["logging"] == {}
    assert result["capabilities"]["completions"] == {}
    assert result["serverInfo"] == {"name": "assern", "version": "0.1.0"}
    assert result["instructions"] == "Ask assern — it knows."


# ------------------------------------------------------------ reading and keeping


async def test_a_split_initialize_after_blank_lines_is_answered_once_complete() -> None:
    client_send, door_receive = trio.testing.memory_stream_one_way_pair()
    out = Recorder()
    door = FrontDoor(door_receive, out)
    data = b"\n  \r\n" + line(initialize(request_id=7))
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(door.run)
            await client_send.send_all(data[:20])
            await trio.testing.wait_all_tasks_blocked()
            assert out.data == b""
            await client_send.send_all(data[20:])
            await trio.testing.wait_all_tasks_blocked()
            assert json.loads(out.data)["id"] == 7
            assert door.answered == 7
            wire = await door.take()
    assert wire.answered == 7
    # The listener still gets every byte, the answered initialize included.
    kept = await wire.receive.receive_some()
    assert kept == data


@pytest.mark.parametrize(
    "first",
    [
        b"not json\n",
        line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        line(initialize(capabilities={"roots": 5})),
    ],
)
async def test_anything_before_or_instead_of_an_initialize_is_only_kept(first: bytes) -> None:
    data = first + line(initialize(request_id=2)) + line({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert await door_answer(data) == b""


async def test_with_initialize_wait_the_door_answers_nothing() -> None:
    assert await door_answer(line(initialize()), answer=False) == b""


async def test_take_over_hands_on_the_kept_bytes_then_the_live_stream() -> None:
    client_send, door_receive = trio.testing.memory_stream_one_way_pair()
    out = Recorder()
    door = FrontDoor(door_receive, out, answer=False)
    modern = {
        "jsonrpc": "2.0",
        "id": "m1",
        "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
    }
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(door.run)
            await client_send.send_all(line(modern) + b'{"partial')
            await trio.testing.wait_all_tasks_blocked()
            wire = await door.take()
            nursery.cancel_scope.cancel()
        assert wire.answered is None
        await client_send.send_all(b'": 1}\n')
        received = b""
        while received.count(b"\n") < 2:
            received += await wire.receive.receive_some(65536)
    assert received == line(modern) + b'{"partial": 1}\n'
    assert out.data == b""
    again = await door.take()  # a restarted listener: the same wire, nothing answered
    assert again.receive is wire.receive
    assert again.answered is None


# ------------------------------------------------------- the listener takes over


async def test_the_listener_takes_over_and_the_session_answers_everything_else() -> None:
    client_send, door_receive = trio.testing.memory_stream_one_way_pair()
    door_send, client_receive = trio.testing.memory_stream_one_way_pair()
    released: list[str] = []
    door = FrontDoor(door_receive, door_send, release=lambda: released.append("released"))
    shared = shared_context()
    _, notes = trio.open_memory_channel[BackendNote](1)
    events: list[str] = []
    idle = trio.Event()

    def on_idle() -> None:
        events.append("idle")
        idle.set()

    listener = ListenerActor(
        shared, notes, door=door, on_stdio_closed=lambda: events.append("stdio closed"), on_idle=on_idle
    )
    lines = Lines(client_receive)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(door.run)
            await client_send.send_all(line(initialize(request_id=1)))
            answer = json.loads(await lines.next())
            assert answer["id"] == 1
            assert answer["result"]["protocolVersion"] == "2025-11-25"
            # Sent before the listener runs: kept by the door, in order.
            await client_send.send_all(
                line({"jsonrpc": "2.0", "method": "notifications/initialized"})
                + b"this is not json\n"
                + line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            )
            await trio.testing.wait_all_tasks_blocked()
            await nursery.start(listener.run)
            parse_error = json.loads(await lines.next())
            assert parse_error["error"]["code"] == types.PARSE_ERROR
            listed = json.loads(await lines.next())
            assert listed == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
            # Live, after the take-over: the session answers.
            await client_send.send_all(line({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
            assert json.loads(await lines.next()) == {"jsonrpc": "2.0", "id": 3, "result": {}}
            [connection] = listener.connections.values()
            assert connection.client_name == "x"
            await client_send.aclose()  # the client leaves
            await idle.wait()
            nursery.cancel_scope.cancel()
    assert events == ["stdio closed", "idle"]
    assert released == ["released"]
    assert lines.buffer == b""  # the initialize was not answered a second time


async def test_a_2026_07_28_client_is_answered_by_the_sdk_after_the_take_over() -> None:
    client_send, door_receive = trio.testing.memory_stream_one_way_pair()
    door_send, client_receive = trio.testing.memory_stream_one_way_pair()
    door = FrontDoor(door_receive, door_send)
    _, notes = trio.open_memory_channel[BackendNote](1)
    listener = ListenerActor(shared_context(), notes, door=door)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "new", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    lines = Lines(client_receive)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(door.run)
            await client_send.send_all(
                line({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
            )
            await trio.testing.wait_all_tasks_blocked()
            assert door.answered is None
            await nursery.start(listener.run)
            answer = json.loads(await lines.next())
            assert answer["id"] == 1
            assert answer["result"]["tools"] == []
            nursery.cancel_scope.cancel()


def catalog_with(*names: str) -> Catalog:
    tools = {
        f"a_{name}": ToolRoute(
            name=f"a_{name}",
            server="a",
            original=name,
            definition=types.Tool(name=name, input_schema={"type": "object"}),
        )
        for name in names
    }
    return Catalog(version=len(names), servers=frozenset({"a"}), tools=tools)


async def test_nothing_reaches_the_client_before_it_sent_initialized() -> None:
    client_send, door_receive = trio.testing.memory_stream_one_way_pair()
    door_send, client_receive = trio.testing.memory_stream_one_way_pair()
    door = FrontDoor(door_receive, door_send)
    shared = shared_context()
    notes_send, notes = trio.open_memory_channel[BackendNote](1)
    listener = ListenerActor(shared, notes, door=door)
    lines = Lines(client_receive)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(door.run)
            await client_send.send_all(line(initialize()))
            assert json.loads(await lines.next())["id"] == 1
            await nursery.start(listener.run)
            await trio.testing.wait_all_tasks_blocked()
            # A catalog change and a backend's log message, before notifications/initialized.
            shared.catalog.set(catalog_with("x"))
            log_params = types.LoggingMessageNotificationParams(level="info", data="hello")
            await notes_send.send(
                BackendNote(server="a", note=types.LoggingMessageNotification(params=log_params))
            )
            await trio.testing.wait_all_tasks_blocked()
            await client_send.send_all(line({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
            assert json.loads(await lines.next()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
            # Once initialized, the client hears of changes to what it listed.
            await client_send.send_all(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            await client_send.send_all(line({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            assert json.loads(await lines.next())["id"] == 3
            await trio.testing.wait_all_tasks_blocked()
            shared.catalog.set(catalog_with("x", "y"))
            changed = json.loads(await lines.next())
            assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            nursery.cancel_scope.cancel()
