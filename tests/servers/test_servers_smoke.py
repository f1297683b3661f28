"""Smoke tests of the MCP servers that assern's demo and end-to-end tests rely on.

Each test starts a server as a real child process and talks to it with the
official SDK client, so a broken server is caught here, before it shows up as
a puzzling failure of an aggregator test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

TESTING_SERVER = Path(__file__).with_name("testing_server.py")
TIMEOUT = 20


def spawn_testing_server(*flags: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(TESTING_SERVER), *flags], env=env)


def example_server(module: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", f"assern.examples.{module}"])


def text_of(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def prompt_text(result: types.GetPromptResult) -> str:
    [message] = result.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    return message.content.text


def resource_text(result: types.ReadResourceResult) -> str:
    [contents] = result.contents
    assert isinstance(contents, types.TextResourceContents)
    return contents.text


class Notifications:
    """A message_handler that records server notifications and wakes waiters."""

    def __init__(self) -> None:
        self.received: list[types.ServerNotification] = []
        self._changed = trio.Event()

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            raise message
        self.received.append(message)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, kind: type[types.ServerNotification]) -> types.ServerNotification:
        while True:
            for message in self.received:
                if isinstance(message, kind):
                    return message
            await self._changed.wait()


@asynccontextmanager
async def connected(params: StdioServerParameters, **options: Any) -> AsyncIterator[Client]:
    options.setdefault("mode", "legacy")
    async with Client(params, **options) as client:
        yield client


# --- the demo servers -----------------------------------------------------------


async def test_notes_server() -> None:
    notifications = Notifications()
    with trio.fail_after(TIMEOUT):
        async with connected(example_server("notes_server"), message_handler=notifications) as client:
            assert client.server_info is not None
            assert client.server_info.name == "notes"
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"add_note", "list_notes", "search_notes"}
            assert tools["add_note"].input_schema["required"] == ["title", "body"]

            listing = text_of(await client.call_tool("list_notes", {}))
            assert listing.splitlines()[1] == "[2] Groceries: Coffee beans, oat milk, rye bread, two lemons."
            assert len(listing.splitlines()) == 3
            found = text_of(await client.call_tool("search_notes", {"query": "COFFEE"}))
            assert found == "[2] Groceries: Coffee beans, oat milk, rye bread, two lemons."
            assert text_of(await client.call_tool("search_notes", {"query": "nothing"})) == (
                "No note mentions 'nothing'."
            )

            added = await client.call_tool("add_note", {"title": "Trip", "body": "Pack the tent."})
            assert text_of(added) == "Added note 4: Trip (note://4)"
            await notifications.wait_for(types.ResourceListChangedNotification)

            resources = (await client.list_resources()).resources
            assert [r.uri for r in resources] == ["note://1", "note://2", "note://3", "note://4"]
            [template] = (await client.list_resource_templates()).resource_templates
            assert template.uri_template == "note://{id}"
            assert resource_text(await client.read_resource("note://4")) == "# Trip\n\nPack the tent.\n"
            with pytest.raises(MCPError, match="no note with id '99'"):
                await client.read_resource("note://99")

            [prompt] = (await client.list_prompts()).prompts
            assert prompt.name == "summarize-notes"
            assert [(a.name, a.required) for a in prompt.arguments or []] == [
                ("style", True),
                ("max_words", False),
            ]
            summary = prompt_text(
                await client.get_prompt("summarize-notes", {"style": "haiku", "max_words": "20"})
            )
            assert summary.startswith(
                "Summarize the following notes as haiku. Use at most 20 words.\n\n# Welcome"
            )
            assert "# Trip\n\nPack the tent." in summary


async def test_calc_server() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(example_server("calc_server")) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {
                "add",
                "multiply",
                "sqrt",
            }
            added = await client.call_tool("add", {"a": 2, "b": 3.5})
            assert text_of(added) == "5.5"
            assert added.structured_content == {"result": 5.5}
            assert text_of(await client.call_tool("multiply", {"a": 6, "b": 7})) == "42.0"
            assert text_of(await client.call_tool("sqrt", {"x": 16})) == "4.0"

            negative = await client.call_tool("sqrt", {"x": -4})
            assert negative.is_error
            assert "Cannot take the square root of a negative number (-4)." in text_of(negative)

            [prompt] = (await client.list_prompts()).prompts
            assert prompt.name == "explain-calculation"
            explained = prompt_text(await client.get_prompt("explain-calculation", {"expression": "2 + 2"}))
            assert explained.startswith("Explain, step by step, how to calculate 2 + 2.")


async def test_time_server() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]
    )
    with trio.fail_after(TIMEOUT):
        async with connected(params) as client:
            result = await client.call_tool("get_current_time", {"timezone": "UTC"})
            assert not result.is_error
            answer = json.loads(text_of(result))
            assert answer["timezone"] == "UTC"
            assert answer["datetime"].endswith("+00:00")


# --- the testing server: tools ----------------------------------------------------


async def test_simple_tools() -> None:
    env = {"ASSERN_SMOKE_VALUE": "sesame"}
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server("--name", "alpha", env=env)) as client:
            assert client.server_info is not None
            assert client.server_info.name == "alpha"
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed

            assert (
                text_of(await client.call_tool("echo", {"text": "  spaces\nand lines  "}))
                == "  spaces\nand lines  "
            )
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
            assert text_of(await client.call_tool("add", {"a": 1.5, "b": 2})) == "3.5"
            assert text_of(await client.call_tool("get_env", {"name": "ASSERN_SMOKE_VALUE"})) == "sesame"
            assert text_of(await client.call_tool("get_env", {"name": "ASSERN_SMOKE_UNSET"})) == "<unset>"
            pid = int(text_of(await client.call_tool("get_pid", {})))
            assert pid != os.getpid()
            assert text_of(await client.call_tool("slow", {"seconds": 0.01})) == "done"
            assert text_of(await client.call_tool("big", {"n": 1_000_000})) == "x" * 1_000_000

            wrong = await client.call_tool("add", {"a": "two", "b": 3})
            assert wrong.is_error
            assert text_of(wrong) == "argument 'a' must be of type number"
            with pytest.raises(MCPError, match="Unknown tool: nope"):
                await client.call_tool("nope", {})


async def test_only_the_tools_asked_for() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server("--tools", "echo,add")) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo", "add"]


async def test_progress_reaches_the_callback() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server()) as client:
            result = await client.call_tool("progress", {"steps": 4}, progress_callback=on_progress)
            assert text_of(result) == "progressed"
    assert seen == [(i, 4, f"step {i}") for i in range(1, 5)]


async def test_gate_holds_a_call_while_others_complete(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    answers: list[str] = []

    async def call_gate(client: Client) -> None:
        answers.append(text_of(await client.call_tool("gate", {"path": str(gate)})))

    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server()) as client, trio.open_nursery() as nursery:
            nursery.start_soon(call_gate, client)
            # The gate call is in flight, yet other calls are answered meanwhile.
            assert text_of(await client.call_tool("echo", {"text": "meanwhile"})) == "meanwhile"
            assert answers == []
            gate.touch()
    assert answers == ["opened"]


async def test_cancelled_call_writes_the_marker(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server()) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "wait_cancel", {"marker": str(marker)})
                # Once a later call is answered, the server is surely inside wait_cancel.
                assert text_of(await client.call_tool("echo", {"text": "sync"})) == "sync"
                nursery.cancel_scope.cancel()  # the client sends notifications/cancelled
            while not marker.exists():  # noqa: ASYNC110 - the marker file is the server's only signal
                await trio.sleep(0.01)
            assert marker.read_text() == "cancelled"
            # The connection is still fine after the cancellation.
            assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"


async def test_crash_fails_the_call() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server()) as client:
            with pytest.raises(MCPError, match="Connection closed"):
                await client.call_tool("crash", {"code": 7})


async def test_add_tool_announces_list_changed() -> None:
    notifications = Notifications()
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server(), message_handler=notifications) as client:
            assert text_of(await client.call_tool("add_tool", {"name": "fresh"})) == "added"
            await notifications.wait_for(types.ToolListChangedNotification)
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names[-1] == "fresh"
            assert text_of(await client.call_tool("fresh", {})) == "called fresh"
            again = await client.call_tool("add_tool", {"name": "fresh"})
            assert again.is_error


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_to_client_requests(mode: str) -> None:
    """Sampling, elicitation and roots reach the client's callbacks in both protocol eras."""

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        [message] = params.messages
        assert isinstance(message.content, types.TextContent)
        answer = types.TextContent(text=f"sampled: {message.content.text}")
        return types.CreateMessageResult(role="assistant", content=answer, model="test-model")

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        return types.ElicitResult(action="accept", content={"answer": f"yes to {params.message}"})

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root.model_validate({"uri": "file:///tmp/project"})])

    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    with trio.fail_after(TIMEOUT):
        async with connected(
            spawn_testing_server("--name", "beta"),
            sampling_callback=sample,
            elicitation_callback=elicit,
            list_roots_callback=roots,
            logging_callback=on_log,
            log_level="debug",  # 2026-07-28 servers send log messages only on request
            mode=mode,
        ) as client:
            expected_era = MODERN_PROTOCOL_VERSIONS if mode == "auto" else HANDSHAKE_PROTOCOL_VERSIONS
            assert client.protocol_version in expected_era
            sampled = await client.call_tool("ask_sampling", {"prompt": "what is 2+2?"})
            assert text_of(sampled) == "sampled: what is 2+2?"
            elicited = await client.call_tool("ask_elicitation", {"message": "proceed?"})
            assert text_of(elicited) == "accept: yes to proceed?"
            assert text_of(await client.call_tool("ask_roots", {})) == "file:///tmp/project"
            assert (
                text_of(await client.call_tool("log", {"level": "warning", "message": "careful"})) == "logged"
            )
    assert [(p.level, p.logger, p.data) for p in logged] == [("warning", "beta", "careful")]


# --- the testing server: resources and prompts ------------------------------------


async def test_resources() -> None:
    notifications = Notifications()
    with trio.fail_after(TIMEOUT):
        async with connected(
            spawn_testing_server("--name", "alpha"), message_handler=notifications
        ) as client:
            resources = (await client.list_resources()).resources
            assert [r.uri for r in resources] == [
                "test://info",
                "file:///tmp/assern-test/readme.txt",
            ]
            assert resource_text(await client.read_resource("test://info")) == "info of alpha"
            readme = await client.read_resource("file:///tmp/assern-test/readme.txt")
            assert resource_text(readme) == "readme of alpha"

            [template] = (await client.list_resource_templates()).resource_templates
            assert template.uri_template == "test://items/{item}"
            assert resource_text(await client.read_resource("test://items/apple")) == "item apple"
            with pytest.raises(MCPError, match="Unknown resource"):
                await client.read_resource("test://nothing")

            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe
            await client.session.subscribe_resource("test://info")
            assert text_of(await client.call_tool("update_resource", {"uri": "test://info"})) == "updated"
            updated = await notifications.wait_for(types.ResourceUpdatedNotification)
            assert isinstance(updated, types.ResourceUpdatedNotification)
            assert updated.params.uri == "test://info"


async def test_prompts() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server()) as client:
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert set(prompts) == {"greet", "generate-code"}
            assert [(a.name, a.required) for a in prompts["generate-code"].arguments or []] == [
                ("language", True),
                ("task", False),
            ]
            assert prompt_text(await client.get_prompt("greet", {"who": "World"})) == "Hello, World!"
            code = await client.get_prompt("generate-code", {"language": "Rust", "task": "parses TOML"})
            assert prompt_text(code) == "Write Rust code that parses TOML."
            code = await client.get_prompt("generate-code", {"language": "Go"})
            assert prompt_text(code) == "Write a short example program in Go."
            with pytest.raises(MCPError, match="Missing required argument: who"):
                await client.get_prompt("greet", {})


# --- the testing server: protocol eras ---------------------------------------------


async def test_both_eras_by_default() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server(), mode="auto") as client:
            assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
            assert text_of(await client.call_tool("echo", {"text": "modern"})) == "modern"
            # On 2026-07-28 connections change events arrive on a listen stream.
            async with client.listen(
                tools_list_changed=True, resource_subscriptions=["test://info"]
            ) as subscription:
                await client.call_tool("add_tool", {"name": "late"})
                assert isinstance(await subscription.__anext__(), ToolsListChanged)
                await client.call_tool("update_resource", {"uri": "test://info"})
                assert await subscription.__anext__() == ResourceUpdated(uri="test://info")
            assert "late" in [tool.name for tool in (await client.list_tools()).tools]


async def test_modern_only() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server("--modern-only"), mode="auto") as client:
            assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
            assert text_of(await client.call_tool("echo", {"text": "new"})) == "new"
        # The client's task groups wrap the handshake's error in exception groups.
        refused = pytest.RaisesExc(MCPError, match="only speaks the 2026-07-28 protocol")
        with pytest.RaisesGroup(refused, flatten_subgroups=True):
            async with connected(spawn_testing_server("--modern-only"), mode="legacy"):
                pass


async def test_legacy_only() -> None:
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server("--legacy-only"), mode="auto") as client:
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            assert text_of(await client.call_tool("echo", {"text": "old"})) == "old"


# --- the testing server: start-up behaviour ------------------------------------------


async def test_crash_on_start() -> None:
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, str(TESTING_SERVER), "--crash-on-start"],
            check=False,
            capture_stdout=True,
            capture_stderr=True,
        )
    assert done.returncode == 3
    assert done.stdout == b""
    assert b"crashing on start" in done.stderr


async def test_stderr_lines_and_a_clean_exit_on_stdin_eof() -> None:
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, str(TESTING_SERVER), "--stderr-lines", "3"],
            stdin=b"",
            check=False,
            capture_stdout=True,
            capture_stderr=True,
        )
    assert done.returncode == 0
    assert done.stdout == b""
    assert done.stderr.decode().splitlines() == ["stderr line 1", "stderr line 2", "stderr line 3"]


async def test_hang_on_start_never_answers() -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    with trio.fail_after(TIMEOUT):
        process = await trio.lowlevel.open_process(
            [sys.executable, str(TESTING_SERVER), "--hang-on-start"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            await process.stdin.send_all(json.dumps(initialize).encode() + b"\n")
            answered: bytes | bytearray = b""
            with trio.move_on_after(3):
                answered = await process.stdout.receive_some()
            assert answered == b""
            assert process.returncode is None
        finally:
            process.kill()
            await process.wait()
            await process.stdin.aclose()
            await process.stdout.aclose()


async def test_spawn_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with trio.fail_after(TIMEOUT):
        async with connected(spawn_testing_server("--spawn-grandchild", str(pidfile))) as client:
            server_pid = int(text_of(await client.call_tool("get_pid", {})))
    grandchild = int(pidfile.read_text())
    try:
        # The client started the server as a process group leader (start_new_session),
        # and the grandchild stays in that group: a group kill reaches it.
        stat = await trio.Path(f"/proc/{grandchild}/stat").read_text()
        pgrp = int(stat.rsplit(")", 1)[1].split()[2])  # after the name: state, ppid, pgrp
        assert pgrp == server_pid
        cmdline = await trio.Path(f"/proc/{grandchild}/cmdline").read_bytes()
        assert cmdline == b"sleep\x001000\x00"
    finally:
        os.kill(grandchild, signal.SIGKILL)
