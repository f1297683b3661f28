"""Backend sessions against a real backend process (tests/servers/testing_server.py).

A stdio backend on protocol "legacy" gets our own client; on "auto" it gets the SDK's,
behind the same interface. Real processes and pipes: no virtual clock here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from assern.actors.backend.client import HandshakeClient
from assern.actors.backend.forward import ForwardLost
from assern.actors.backend.hooks import SessionHooks
from assern.actors.backend.session import open_session
from assern.actors.backend.transport import ProcessLink
from assern.actors.config.spec import ServerSpec
from assern.actors.jsonrpc.errors import RpcError

SERVER = Path(__file__).resolve().parents[2] / "servers" / "testing_server.py"


def spec(*flags: str, protocol: str = "legacy") -> ServerSpec:
    return ServerSpec(
        name="real",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVER), "--name", "real", *flags),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        protocol=protocol,
    )


class Seen:
    """Hooks that keep what arrives and wake whoever waits for the next thing."""

    def __init__(self, answers: dict[str, dict[str, Any]] | None = None) -> None:
        self.answers = answers or {}
        self.notifications: list[types.ServerNotification] = []
        self.list_changes = 0
        self.bad: list[str] = []
        self.stderr: list[str] = []
        self.pids: list[int] = []
        self.asked: list[str] = []
        self.changed = trio.Event()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def _notify(self, notification: types.ServerNotification) -> None:
        self.notifications.append(notification)
        self._wake()

    def _list_changed(self) -> None:
        self.list_changes += 1
        self._wake()

    async def _ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self.asked.append(method)
        if method not in self.answers:
            raise RpcError(types.INVALID_REQUEST, f"no answer for {method}")
        return self.answers[method]

    def hooks(self) -> SessionHooks:
        return SessionHooks(
            list_changed=self._list_changed,
            notify=self._notify,
            bad_message=self.bad.append,
            ask=self._ask,
            stderr=self.stderr.append,
            spawned=self.pids.append,
        )

    async def until(self, done: Callable[[], bool]) -> None:
        while not done():
            await self.changed.wait()


def text(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


async def within(seconds: float, step: Awaitable[Any]) -> Any:
    with trio.fail_after(seconds):
        return await step


async def test_our_client_serves_a_legacy_stdio_backend_end_to_end() -> None:
    answers: dict[str, dict[str, Any]] = {
        "sampling/createMessage": {
            "role": "assistant",
            "content": {"type": "text", "text": "4"},
            "model": "m",
        },
        "elicitation/create": {"action": "accept", "content": {"answer": "yes"}},
        "roots/list": {"roots": [{"uri": "file:///work"}]},
    }
    seen = Seen(answers)
    link = ProcessLink()
    with trio.fail_after(30):
        async with open_session(spec(), link, seen.hooks()) as session:
            assert isinstance(session, HandshakeClient)
            assert session.protocol_version == HANDSHAKE_PROTOCOL_VERSIONS[-1]
            assert seen.pids == [link.process.pid if link.process else None]
            assert session.server_capabilities.tools is not None

            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"echo", "progress", "ask_sampling", "crash"} <= names
            assert text(await session.call_tool("echo", {"text": "hi"})) == "hi"

            seen_progress: list[tuple[float, float | None, str | None]] = []

            async def sink(progress: float, total: float | None, message: str | None) -> None:
                seen_progress.append((progress, total, message))

            assert text(await session.call_tool("progress", {"steps": 2}, progress=sink)) == "progressed"
            assert seen_progress == [(1, 2, "step 1"), (2, 2, "step 2")]

            resources = {str(r.uri) for r in (await session.list_resources()).resources}
            assert "test://info" in resources
            [templates] = [(await session.list_resource_templates()).resource_templates]
            assert [t.uri_template for t in templates] == ["test://items/{item}"]
            [info] = (await session.read_resource("test://info")).contents
            assert isinstance(info, types.TextResourceContents)
            assert info.text == "info of real"
            assert {p.name for p in (await session.list_prompts()).prompts} >= {"greet"}
            greeting = await session.get_prompt("greet", {"who": "Ada"})
            assert isinstance(greeting.messages[0].content, types.TextContent)
            assert greeting.messages[0].content.text == "Hello, Ada!"
            completed = await session.complete(
                types.PromptReference(name="generate-code"), {"name": "language", "value": "p"}, None
            )
            assert completed.completion.values == ["python", "perl", "php"]
            with pytest.raises(RpcError) as no_completion:  # the server's own refusal, passed on
                await session.complete(
                    types.PromptReference(name="greet"), {"name": "who", "value": "A"}, None
                )
            assert no_completion.value.code == types.INVALID_PARAMS
            with pytest.raises(RpcError, match="Unknown resource"):
                await session.read_resource("test://nope")

            await session.set_logging_level("debug")
            await session.send_ping()
            await session.subscribe_resource("test://info")
            assert text(await session.call_tool("update_resource", {"uri": "test://info"})) == "updated"
            assert (
                text(await session.call_tool("log", {"level": "warning", "message": "careful"})) == "logged"
            )
            await within(5, seen.until(lambda: len(seen.notifications) >= 2))
            kinds = {type(n) for n in seen.notifications}
            assert kinds == {types.ResourceUpdatedNotification, types.LoggingMessageNotification}
            await session.unsubscribe_resource("test://info")

            assert text(await session.call_tool("add_tool", {"name": "fresh"})) == "added"
            await within(5, seen.until(lambda: seen.list_changes >= 1))

            assert text(await session.call_tool("ask_sampling", {"prompt": "2+2"})) == "4"
            assert text(await session.call_tool("ask_elicitation", {"message": "ok?"})) == "accept: yes"
            assert text(await session.call_tool("ask_roots", {})) == "file:///work"
            assert seen.asked == ["sampling/createMessage", "elicitation/create", "roots/list"]
            await session.listen(tools=True, prompts=True, resources=True)  # nothing to follow
    assert link.exited.is_set()  # leaving stopped the process
    assert seen.bad == []


async def test_a_backend_that_dies_mid_call_fails_the_call_as_lost() -> None:
    link = ProcessLink()
    with trio.fail_after(30):
        async with open_session(spec(), link, Seen().hooks()) as session:
            with pytest.raises(ForwardLost, match="closed its stdout"):
                await session.call_tool("crash", {"code": 7})
            await link.exited.wait()
            assert link.exit_code == 7
            with pytest.raises(ForwardLost):
                await session.send_ping()


async def test_a_backend_refusing_the_handshake_fails_the_start() -> None:
    link = ProcessLink()
    with trio.fail_after(30), pytest.RaisesGroup(RpcError, allow_unwrapped=True, flatten_subgroups=True):
        async with open_session(spec("--modern-only"), link, Seen().hooks()):
            pass
    assert link.exited.is_set()


async def test_protocol_auto_runs_on_the_sdk_behind_the_same_interface() -> None:
    link = ProcessLink()
    with trio.fail_after(30):
        async with open_session(spec(protocol="auto"), link, Seen().hooks()) as session:
            assert type(session).__name__ == "SdkSession"
            assert session.protocol_version in MODERN_PROTOCOL_VERSIONS
            echoed = await session.call_tool("echo", {"text": "via the SDK"})
            assert isinstance(echoed, types.CallToolResult)  # no rounds asked: never input_required
            assert text(echoed) == "via the SDK"
            with pytest.raises(RpcError) as unknown:  # the SDK's error, converted at its edge
                await session.call_tool("nope", {})
            assert unknown.value.code == types.INVALID_PARAMS


async def test_the_sdk_and_the_raw_lane_share_the_pipes_of_a_handshake_era_backend() -> None:
    link = ProcessLink()
    with trio.fail_after(30):
        async with open_session(spec("--legacy-only", protocol="auto"), link, Seen().hooks()) as session:
            assert type(session).__name__ == "SdkSession"
            assert session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert link.forwarder is not None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.call_tool, "echo", {"text": "sdk"})
                raw = await link.forwarder.request(
                    "tools/call", {"name": "echo", "arguments": {"text": "raw"}}
                )
            assert raw["content"][0]["text"] == "raw"
