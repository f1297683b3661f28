"""A stand-in backend and a raw JSON-line client for listener tests.

`setup()` gives a `SessionContext` whose one backend, "a", is served by `Backend`: it
answers its mailbox as a backend actor would (`echo`, `block` until cancelled, `gate`
until released, `sample`, `roots`, `progress`, `fail`). `Wire` is the client's side of a
connection: raw JSON lines out, decoded messages in.
"""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace
from typing import Any

import attrs
import mcp_types as types
import outcome
import trio

from assern.actors.backend import messages as msgs
from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.status import BackendState, BackendStatus
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.session import SessionContext
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog
from assern.supervisor.cell import Cell


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"})


def catalog(*tools: str) -> Catalog:
    caps = types.ServerCapabilities(
        resources=types.ResourcesCapability(subscribe=True), logging=types.LoggingCapability()
    )
    listing = BackendListing(server="a", tools=tuple(tool(t) for t in tools), capabilities=caps)
    return build_catalog([listing], version=len(tools))


@attrs.define
class Backend:
    """Serves a backend's mailbox: `echo`, `block` (until cancelled), `gate`, `sample`, `progress`."""

    mailbox: trio.MemoryReceiveChannel[msgs.BackendRequest]
    started: trio.Event = attrs.field(factory=trio.Event)
    cancelled: trio.Event = attrs.field(factory=trio.Event)
    subscribed: list[tuple[str, bool]] = attrs.field(factory=list)
    levels: list[str] = attrs.field(factory=list)
    #: `gate` calls wait for this
    release: trio.Event = attrs.field(factory=trio.Event)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            async for msg in self.mailbox:
                nursery.start_soon(self.serve, msgs.take(msg))

    async def serve(self, msg: msgs.BackendRequest) -> None:
        with msg.reply:
            try:
                answer: outcome.Outcome[Any] = outcome.Value(await self.answer(msg))
            except Exception as exc:
                answer = outcome.Error(exc)
            with contextlib.suppress(trio.BrokenResourceError):  # the caller gave up
                msg.reply.send_nowait(answer)

    async def answer(self, msg: msgs.BackendRequest) -> Any:
        if isinstance(msg, msgs.Subscribe):
            self.subscribed.append((msg.uri, msg.subscribe))
            return None
        if isinstance(msg, msgs.SetLevel):
            self.levels.append(msg.level)
            return None
        if isinstance(msg, msgs.ForwardCall):  # the raw lane's: the result as a dict
            result = await self.call(msg)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)
        assert isinstance(msg, msgs.CallTool)
        return await self.call(msg)

    async def call(self, msg: msgs.CallTool | msgs.ForwardCall) -> types.CallToolResult:
        arguments = msg.arguments or {}
        if msg.name == "block":
            self.started.set()
            with msg.scope:
                await trio.sleep_forever()
            self.cancelled.set()
            return text("never")
        if msg.name == "gate":
            self.started.set()
            await self.release.wait()
            return text("opened")
        if msg.name == "sample":
            assert msg.origin is not None
            assert msg.origin.ask is not None
            request = {
                "messages": [{"role": "user", "content": {"type": "text", "text": arguments["prompt"]}}],
                "maxTokens": 10,
            }
            try:
                result = await msg.origin.ask("sampling/createMessage", request)
            except RpcError as exc:
                return text(f"refused: {exc.code} {exc.message}")
            return text(result["content"]["text"])
        if msg.name == "roots":  # the backend's own roots/list, through the calling client
            assert msg.origin is not None
            assert msg.origin.ask is not None
            listed = await msg.origin.ask("roots/list", None)
            return text(",".join(root["uri"] for root in listed["roots"]))
        if msg.name == "progress":
            assert msg.progress is not None
            await msg.progress(1, 2, "half")
            return text("done")
        if msg.name == "fail":
            raise RpcError(-32000, "it broke", {"why": "test"})
        return text(arguments.get("text", ""))


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


@attrs.define
class Setup:
    shared: SessionContext
    backend: Backend


def starting_handle(name: str) -> BackendHandle:
    """A backend that is starting: never listed, and nothing is sent to it."""
    send, _receive = trio.open_memory_channel[msgs.BackendRequest](1)
    view = SimpleNamespace(
        status=BackendStatus(server=name, transport="stdio", state=BackendState.STARTING),
        state=BackendState.STARTING,
        spec=SimpleNamespace(startup_timeout=5.0, timeout=30.0),
        fast_path=False,
        splice=lambda *_args, **_kwargs: None,
        listing=None,
    )
    return BackendHandle(name=name, mailbox=send, view=view)


def setup(*tools: str, settled: bool = True, raw_lane: bool = False) -> Setup:
    send, receive = trio.open_memory_channel[msgs.BackendRequest](16)
    actor = SimpleNamespace(
        status=BackendStatus(server="a", transport="stdio", state=BackendState.READY),
        state=BackendState.READY,
        spec=SimpleNamespace(startup_timeout=5.0, timeout=30.0),
        # On the raw lane, a backend that cannot splice now takes the mailbox in a task.
        fast_path=raw_lane,
        splice=lambda *_args, **_kwargs: None,
        listing=SimpleNamespace(capabilities=types.ServerCapabilities(logging=types.LoggingCapability())),
    )
    handle = BackendHandle(name="a", mailbox=send, view=actor)
    directory = {"a": handle}
    event = trio.Event()
    if settled:
        event.set()
    else:
        # Another backend is starting, and nothing of it is known yet (no saved listing):
        # lists wait for it (routing.py, `lists_ready`).
        directory["b"] = starting_handle("b")
    shared = SessionContext(
        catalog=Cell(catalog(*tools)), directory=lambda: directory, settled=event, list_wait=3600
    )
    return Setup(shared=shared, backend=Backend(receive))


class Wire:
    """The client's side: raw JSON lines out, decoded messages in."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send_stream = send
        self.receive_stream = receive
        self.buffer = b""

    async def send(self, message: Any) -> None:
        await self.send_stream.send_all(json.dumps(message).encode() + b"\n")

    async def send_line(self, line: bytes) -> None:
        await self.send_stream.send_all(line + b"\n")

    async def next(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.receive_stream.receive_some(65536)
            assert chunk, "the connection ended"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def ask(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.request(request_id, method, params)
        return await self.next()

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def handshake(self, version: str = "2025-11-25") -> dict[str, Any]:
        answer = await self.ask(0, "initialize", initialize_params(version))
        await self.notify("notifications/initialized")
        return answer


def initialize_params(version: str = "2025-11-25", name: str = "tester") -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}
