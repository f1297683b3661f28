"""A client connection driven over in-memory byte streams with raw JSON lines.

The backend behind it is a stand-in that serves its mailbox as a backend actor would
(with `fast_path` off, calls take the session's own tools/call, not the raw lane).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
import trio.testing
from content import text_in
from fake_backend import Backend, Wire, catalog, initialize_params, setup, tool

from assern.actors.backend import messages as msgs
from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.status import BackendState, BackendStatus
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.inproc import call_tool, inproc_client
from assern.actors.listener.session import ClientConnection, SessionContext
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog
from assern.supervisor.cell import Cell

LIMIT = 30  # a guard against a hung test, never an assertion about speed
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "new", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@attrs.define
class Served:
    wire: Wire
    connection: ClientConnection
    backend: Backend
    shared: SessionContext
    client: trio.SocketStream


@contextlib.asynccontextmanager
async def serve(
    *tools: str, settled: bool = True, answered: Any = None, raw_lane: bool = False
) -> AsyncIterator[Served]:
    """A connection served over a socket pair (as a socket client's), and the client's end.

    A socket rather than trio's memory streams: what the connection writes as the client
    leaves must still reach it, as it does over a pipe or a socket.
    """
    parts = setup(
        *(tools or ("echo", "block", "sample", "progress", "fail")), settled=settled, raw_lane=raw_lane
    )
    ours, theirs = trio.socket.socketpair()
    client = trio.SocketStream(ours)
    connection = ClientConnection("test-1", parts.shared)

    async def run(stream: trio.SocketStream) -> None:
        async with stream:
            await connection.serve(stream, stream, answered=answered)

    with trio.fail_after(LIMIT):
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            nursery.start_soon(run, trio.SocketStream(theirs))
            yield Served(Wire(client, client), connection, parts.backend, parts.shared, client)
            nursery.cancel_scope.cancel()


def error_of(answer: dict[str, Any]) -> tuple[int, str, Any]:
    error = answer["error"]
    return error["code"], error["message"], error.get("data")


# ------------------------------------------------------------------- handshake


async def test_initialize_is_answered_and_the_client_recorded() -> None:
    async with serve() as s:
        answer = await s.wire.ask(1, "initialize", initialize_params("2025-06-18", name="claude"))
        assert answer["id"] == 1
        result = answer["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["serverInfo"] == {"name": "assern", "version": "0.1.0"}
        # A ready backend offers subscriptions and logging: so does the aggregate.
        assert result["capabilities"] == {
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "tools": {"listChanged": True},
        }
        assert s.connection.client_name == "claude"


@pytest.mark.parametrize(
    ("requested", "negotiated"), [("2024-11-05", "2024-11-05"), ("2031-01-01", "2025-11-25")]
)
async def test_the_version_is_negotiated(requested: str, negotiated: str) -> None:
    async with serve() as s:
        answer = await s.wire.ask("init", "initialize", initialize_params(requested))
        assert answer["result"]["protocolVersion"] == negotiated


async def test_an_initialize_the_door_answered_is_only_recorded() -> None:
    async with serve(answered=7) as s:
        await s.wire.request(7, "initialize", initialize_params(name="early"))
        await s.wire.notify("notifications/initialized")
        assert await s.wire.ask(8, "ping") == {"jsonrpc": "2.0", "id": 8, "result": {}}
        assert s.connection.client_name == "early"
        # Served as initialized: the calls work.
        answer = await s.wire.ask(9, "tools/call", {"name": "a_echo", "arguments": {"text": "hi"}})
        assert answer["result"]["content"][0]["text"] == "hi"


async def test_an_invalid_initialize_is_refused() -> None:
    async with serve() as s:
        answer = await s.wire.ask(1, "initialize", {"protocolVersion": "2025-11-25"})
        code, message, _ = error_of(answer)
        assert code == types.INVALID_PARAMS
        assert "capabilities" in message or "clientInfo" in message


# ------------------------------------------------------------- refusals, as the SDK


async def test_ping_is_served_before_initialize_and_nothing_else() -> None:
    async with serve() as s:
        assert await s.wire.ask(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        refused = await s.wire.ask(2, "tools/list")
        assert refused == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": types.INVALID_PARAMS, "message": "Invalid request parameters", "data": ""},
        }


@pytest.mark.parametrize("initialized", [False, True])
@pytest.mark.parametrize(
    "method", ["no/such/method", "server/discover", "subscriptions/listen", "tasks/list"]
)
async def test_a_method_not_served_is_not_found_whatever_the_state(method: str, initialized: bool) -> None:
    async with serve() as s:
        if initialized:
            await s.wire.handshake()
        answer = await s.wire.ask(3, method)
        assert error_of(answer) == (types.METHOD_NOT_FOUND, "Method not found", method)


@pytest.mark.parametrize(
    ("method", "params", "mentioned"),
    [
        ("tools/call", {"name": 5}, "name"),
        ("tools/call", {"arguments": {}}, "name"),
        ("resources/read", {}, "uri"),
        ("prompts/get", {"name": "p", "arguments": {"x": 1}}, "arguments"),
        ("logging/setLevel", {"level": "loud"}, "level"),
    ],
)
async def test_invalid_params_say_what_is_wrong(method: str, params: dict[str, Any], mentioned: str) -> None:
    async with serve() as s:
        await s.wire.handshake()
        code, message, _ = error_of(await s.wire.ask(4, method, params))
        assert code == types.INVALID_PARAMS
        assert message.startswith("Invalid request parameters: ")
        assert mentioned in message


async def test_a_2026_envelope_on_a_handshake_connection_is_refused() -> None:
    async with serve() as s:
        await s.wire.handshake()
        code, message, _ = error_of(await s.wire.ask(5, "tools/list", {"_meta": ENVELOPE}))
        assert code == types.INVALID_REQUEST
        assert "handshake protocol era" in message


async def test_bad_lines_are_answered_and_the_session_goes_on() -> None:
    async with serve() as s:
        await s.wire.send_line(b"not json")
        assert error_of(await s.wire.next())[0] == types.PARSE_ERROR
        await s.wire.send({"jsonrpc": "2.0", "id": 1, "params": {}})
        answer = await s.wire.next()
        assert answer["id"] == 1
        assert error_of(answer)[0] == types.INVALID_REQUEST
        await s.wire.send_line(b"")
        assert await s.wire.ask(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_a_client_that_says_it_is_initialized_is_served_without_initialize() -> None:
    async with serve() as s:
        await s.wire.notify("notifications/initialized")
        answer = await s.wire.ask(1, "resources/list")
        assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"resources": []}}


# ------------------------------------------------------------------ requests


async def test_results_are_dumped_for_the_handshake_era() -> None:
    async with serve() as s:
        await s.wire.handshake()
        # No resultType, ttlMs or cacheScope (2026-07-28 fields), no None fields.
        assert (await s.wire.ask(1, "prompts/list"))["result"] == {"prompts": []}
        assert (await s.wire.ask(2, "resources/templates/list"))["result"] == {"resourceTemplates": []}
        called = await s.wire.ask(3, "tools/call", {"name": "a_echo", "arguments": {"text": "é"}})
        assert called["result"] == {"content": [{"type": "text", "text": "é"}], "isError": False}


async def test_a_backend_error_is_the_clients_error() -> None:
    async with serve() as s:
        await s.wire.handshake()
        answer = await s.wire.ask(1, "tools/call", {"name": "a_fail", "arguments": {}})
        assert error_of(answer) == (-32000, "it broke", {"why": "test"})
        unknown = await s.wire.ask(2, "tools/call", {"name": "a_ech", "arguments": {}})
        code, _, data = error_of(unknown)
        assert code == types.INVALID_PARAMS
        assert "a_echo" in data["suggestions"]


async def test_a_slow_request_blocks_no_other() -> None:
    async with serve() as s:
        await s.wire.handshake()
        await s.wire.request(1, "tools/call", {"name": "a_block", "arguments": {}})
        await s.backend.started.wait()
        answer = await s.wire.ask(2, "tools/call", {"name": "a_echo", "arguments": {"text": "free"}})
        assert answer["id"] == 2
        assert answer["result"]["content"][0]["text"] == "free"


@pytest.mark.parametrize("cancelled_id", [11, "11"])
async def test_a_cancelled_request_is_cancelled_at_the_backend_and_never_answered(cancelled_id: Any) -> None:
    async with serve() as s:
        await s.wire.handshake()
        await s.wire.request(11, "tools/call", {"name": "a_block", "arguments": {}})
        await s.backend.started.wait()
        await s.wire.notify("notifications/cancelled", {"requestId": cancelled_id, "reason": "enough"})
        await s.backend.cancelled.wait()
        await trio.testing.wait_all_tasks_blocked()
        # The next thing the client hears of is its next request.
        assert await s.wire.ask(12, "ping") == {"jsonrpc": "2.0", "id": 12, "result": {}}


async def test_a_list_waiting_for_starting_backends_can_be_cancelled() -> None:
    async with serve(settled=False) as s:
        await s.wire.handshake()
        await s.wire.request(1, "resources/list")
        await trio.testing.wait_all_tasks_blocked()
        await s.wire.notify("notifications/cancelled", {"requestId": 1})
        await trio.testing.wait_all_tasks_blocked()
        s.shared.settled.set()  # an uncancelled list would be answered now
        assert await s.wire.ask(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}


def searching(*pinned: str) -> Catalog:
    listing = BackendListing(server="a", tools=(tool("echo"),))
    return build_catalog([listing], exposure="search", pinned=pinned)


@pytest.mark.parametrize("raw_lane", [False, True])
async def test_a_list_of_the_meta_tools_alone_does_not_wait_for_starting_backends(raw_lane: bool) -> None:
    async with serve(settled=False, raw_lane=raw_lane) as s:
        s.shared.catalog.set(searching())
        await s.wire.handshake()
        with trio.fail_after(5):  # not the hour the list would wait
            listed = await s.wire.ask(1, "tools/list")
        names = [listed_tool["name"] for listed_tool in listed["result"]["tools"]]
        assert names == ["search_tools", "describe_tools", "call_tool"]
        assert not s.shared.settled.is_set()


async def test_a_list_with_pinned_tools_waits_for_starting_backends() -> None:
    async with serve(settled=False) as s:
        s.shared.catalog.set(searching("a_*"))
        await s.wire.handshake()
        await s.wire.request(1, "tools/list")
        await trio.testing.wait_all_tasks_blocked()
        s.shared.settled.set()  # every backend had its first start
        answer = await s.wire.next()
        assert answer["id"] == 1


async def test_a_call_waits_for_its_own_tool_to_be_listed_not_for_every_backend() -> None:
    async with serve("echo", settled=False) as s:
        await s.wire.handshake()
        # `a_late` is not listed yet, and some backend is still starting (not settled)
        await s.wire.request(1, "tools/call", {"name": "a_late", "arguments": {"text": "here"}})
        await trio.testing.wait_all_tasks_blocked()
        s.shared.catalog.set(catalog("echo", "late"))  # its backend was listed
        answer = await s.wire.next()
        if answer.get("method") == "notifications/tools/list_changed":
            answer = await s.wire.next()
        assert answer["id"] == 1
        assert answer["result"]["content"][0]["text"] == "here"
        assert not s.shared.settled.is_set()  # the others are still starting


async def test_progress_reaches_the_caller() -> None:
    async with serve() as s:
        await s.wire.handshake()
        params = {"name": "a_progress", "arguments": {}, "_meta": {"progressToken": "tok"}}
        await s.wire.request(1, "tools/call", params)
        progress = await s.wire.next()
        assert progress == {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 1, "total": 2, "message": "half"},
        }
        assert (await s.wire.next())["result"]["content"][0]["text"] == "done"


async def test_a_backends_request_goes_to_the_calling_client_and_back() -> None:
    async with serve() as s:
        await s.wire.handshake()
        await s.wire.request(1, "tools/call", {"name": "a_sample", "arguments": {"prompt": "haiku"}})
        asked = await s.wire.next()
        assert asked["method"] == "sampling/createMessage"
        assert asked["params"]["messages"][0]["content"]["text"] == "haiku"
        sampled = {"role": "assistant", "content": {"type": "text", "text": "sampled!"}, "model": "m"}
        await s.wire.send({"jsonrpc": "2.0", "id": asked["id"], "result": sampled})
        assert (await s.wire.next())["result"]["content"][0]["text"] == "sampled!"

        # A refusal reaches the backend as the client's error.
        await s.wire.request(2, "tools/call", {"name": "a_sample", "arguments": {"prompt": "no"}})
        asked = await s.wire.next()
        refusal = {"code": types.INVALID_REQUEST, "message": "Sampling not supported"}
        await s.wire.send({"jsonrpc": "2.0", "id": asked["id"], "error": refusal})
        answer = await s.wire.next()
        assert (
            answer["result"]["content"][0]["text"]
            == f"refused: {types.INVALID_REQUEST} Sampling not supported"
        )


@pytest.mark.parametrize("raw_lane", [False, True], ids=["session", "raw-lane"])
async def test_leaving_answers_what_still_runs_and_cancels_it(raw_lane: bool) -> None:
    async with serve(raw_lane=raw_lane) as s:
        await s.wire.handshake()
        await s.wire.request(1, "tools/call", {"name": "a_block", "arguments": {}})
        await s.backend.started.wait()
        await s.client.send_eof()  # the client leaves
        answer = await s.wire.next()
        assert answer == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": types.CONNECTION_CLOSED, "message": "Connection closed"},
        }
        await s.backend.cancelled.wait()


async def test_a_backends_request_fails_when_the_client_leaves() -> None:
    async with serve() as s:
        await s.wire.handshake()
        await s.wire.request(1, "tools/call", {"name": "a_sample", "arguments": {"prompt": "bye"}})
        assert (await s.wire.next())["method"] == "sampling/createMessage"
        await s.client.send_eof()
        answer = await s.wire.next()
        # The call itself was cancelled (and answered as such) as the connection closed.
        assert answer["id"] == 1
        assert error_of(answer)[0] == types.CONNECTION_CLOSED


# ------------------------------------------------------------- notifications


async def test_list_changed_follows_the_catalog_once_the_client_listed() -> None:
    async with serve("echo") as s:
        await s.wire.handshake()
        listed = await s.wire.ask(1, "tools/list")
        assert [t["name"] for t in listed["result"]["tools"]] == ["a_echo"]
        s.shared.catalog.set(catalog("echo", "late"))
        assert await s.wire.next() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        listed = await s.wire.ask(2, "tools/list")
        assert [t["name"] for t in listed["result"]["tools"]] == ["a_echo", "a_late"]


@pytest.mark.parametrize("raw_lane", [False, True])
async def test_no_list_changed_before_the_first_list(raw_lane: bool) -> None:
    """A change before the client's first list is in that list: no notification, which
    a client still discovering servers may take for a second server to register."""
    async with serve("echo", raw_lane=raw_lane) as s:
        await s.wire.ask(1, "initialize", initialize_params())
        s.shared.catalog.set(catalog("echo", "early"))
        await trio.testing.wait_all_tasks_blocked()
        await s.wire.notify("notifications/initialized")
        await trio.testing.wait_all_tasks_blocked()
        s.shared.catalog.set(catalog("echo", "early", "late"))
        await trio.testing.wait_all_tasks_blocked()
        # The next line the client hears is the answer to its list: nothing came before it.
        listed = await s.wire.ask(2, "tools/list")
        assert [t["name"] for t in listed["result"]["tools"]] == ["a_echo", "a_early", "a_late"]
        # Once it listed, a change is announced.
        s.shared.catalog.set(catalog("echo", "early", "late", "later"))
        assert await s.wire.next() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def with_prompts_of_b(*prompts: str) -> Catalog:
    """Backend "a"'s echo tool, and the starting backend "b" listed with `prompts`."""
    return build_catalog(
        [
            BackendListing(server="a", tools=(tool("echo"),)),
            BackendListing(server="b", prompts=tuple(types.Prompt(name=name) for name in prompts)),
        ]
    )


@pytest.mark.parametrize("kind", ["prompts", "tools"])
async def test_a_change_while_a_first_list_waits_is_in_its_answer_and_not_announced(kind: str) -> None:
    """The catalog moves while the client's list waits for a starting backend: the answer
    carries the new list, and no list_changed follows it (a client still discovering
    registers everything twice on one). Which of the two tasks woken by the change runs
    first is the scheduler's pick, so the test repeats."""
    for attempt in range(12):
        async with serve("echo", settled=False) as s:
            await s.wire.handshake()
            await s.wire.request(attempt, f"{kind}/list")
            await trio.testing.wait_all_tasks_blocked()
            s.shared.catalog.set(with_prompts_of_b("summarize"))  # "b" listed: lists may go
            answer = await s.wire.next()
            assert answer["id"] == attempt
            if kind == "prompts":
                assert [p["name"] for p in answer["result"]["prompts"]] == ["b_summarize"]
            # The next line the client hears answers its ping: no notification came between.
            assert await s.wire.ask("after", "ping") == {"jsonrpc": "2.0", "id": "after", "result": {}}
            # A change of what it was given is announced; one of another list is not.
            s.shared.catalog.set(with_prompts_of_b("summarize", "explain"))
            if kind == "prompts":
                assert await s.wire.next() == {
                    "jsonrpc": "2.0",
                    "method": "notifications/prompts/list_changed",
                }
            assert await s.wire.ask("last", "ping") == {"jsonrpc": "2.0", "id": "last", "result": {}}


async def test_resource_updates_for_subscribed_uris_and_log_messages_reach_the_client() -> None:
    async with serve() as s:
        await s.wire.handshake()
        uri = "assern://a/test://info"
        assert await s.wire.ask(1, "resources/subscribe", {"uri": uri}) == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {},
        }
        assert s.backend.subscribed == [("test://info", True)]
        updated = types.ResourceUpdatedNotification(
            params=types.ResourceUpdatedNotificationParams(uri="test://info")
        )
        other = types.ResourceUpdatedNotification(
            params=types.ResourceUpdatedNotificationParams(uri="test://else")
        )
        await s.connection.backend_notification("a", other)  # not subscribed: not sent
        await s.connection.backend_notification("a", updated)
        assert await s.wire.next() == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": uri},
        }
        log_params = types.LoggingMessageNotificationParams(level="warning", data={"x": 1}, logger="db")
        await s.connection.backend_notification("a", types.LoggingMessageNotification(params=log_params))
        assert await s.wire.next() == {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "warning", "logger": "a.db", "data": {"x": 1}},
        }


# -------------------------------------------------------------------- eras


async def test_a_2026_07_28_first_request_opens_the_connection_to_the_sdks_server() -> None:
    async with serve() as s:
        # What comes before the first request is kept for the era's session.
        await s.wire.notify("notifications/initialized")
        answer = await s.wire.ask("m1", "tools/list", {"_meta": ENVELOPE})
        assert answer["id"] == "m1"
        result = answer["result"]
        assert [t["name"] for t in result["tools"]][:2] == ["a_echo", "a_block"]
        assert result["resultType"] == "complete"
        called = await s.wire.ask(
            "m2", "tools/call", {"name": "a_echo", "arguments": {"text": "new"}, "_meta": ENVELOPE}
        )
        assert called["result"]["content"][0]["text"] == "new"
        refused = await s.wire.ask("m3", "initialize", initialize_params())
        assert error_of(refused)[0] == types.UNSUPPORTED_PROTOCOL_VERSION
        # The SDK's errors are ours, converted at its edge.
        failed = await s.wire.ask("m4", "tools/call", {"name": "a_fail", "arguments": {}, "_meta": ENVELOPE})
        assert error_of(failed) == (-32000, "it broke", {"why": "test"})


async def test_an_initialize_with_an_envelope_still_opens_a_handshake_connection() -> None:
    async with serve() as s:
        answer = await s.wire.ask(1, "initialize", {**initialize_params(), "_meta": ENVELOPE})
        assert answer["result"]["protocolVersion"] == "2025-11-25"


# -------------------------------------------------------------------- in-process


async def test_call_tool_in_process_needs_no_sdk_client() -> None:
    parts = setup("echo", "fail", "sample")
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            result = await call_tool(parts.shared, "a_echo", {"text": "inproc"})
            assert result == {
                "content": [{"type": "text", "text": "inproc"}],
                "isError": False,
                "resultType": "complete",
            }
            with pytest.raises(RpcError) as failed:
                await call_tool(parts.shared, "a_fail", {})
            assert (failed.value.code, failed.value.data) == (-32000, {"why": "test"})
            # It has no sampling to offer: the backend is told so, as the SDK client tells it.
            refused = await call_tool(parts.shared, "a_sample", {"prompt": "x"})
            assert refused["content"][0]["text"] == f"refused: {types.INVALID_REQUEST} Sampling not supported"
            nursery.cancel_scope.cancel()


async def test_the_official_client_in_process() -> None:
    parts = setup("echo")
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            async with inproc_client(parts.shared, "sdk") as client:
                assert client.protocol_version == "2025-11-25"
                assert [t.name for t in (await client.list_tools()).tools] == ["a_echo"]
                result = await client.call_tool("a_echo", {"text": "official"})
                assert text_in(result.content[0]) == "official"
            nursery.cancel_scope.cancel()


# ------------------------------------------------------------------ time


def starting_backend(initialize_wait: float) -> SessionContext:
    """A backend still starting, whose capabilities nobody knows yet, and an empty catalog."""
    send, _ = trio.open_memory_channel[msgs.BackendRequest](1)
    actor = SimpleNamespace(
        status=BackendStatus(server="a", transport="stdio", state=BackendState.STARTING),
        state=BackendState.STARTING,
        listing=None,
    )
    handle = BackendHandle(name="a", mailbox=send, view=actor)
    return SessionContext(
        catalog=Cell(Catalog()),
        directory=lambda: {"a": handle},
        settled=trio.Event(),
        initialize_wait=initialize_wait,
    )


async def handshake_over_memory(
    shared: SessionContext, ready_after: float | None
) -> tuple[float, dict[str, Any]]:
    """How long `initialize` took (virtual time), and its result."""
    client_send, server_receive = trio.testing.memory_stream_one_way_pair()
    server_send, client_receive = trio.testing.memory_stream_one_way_pair()
    connection = ClientConnection("stdio-1", shared)
    wire = Wire(client_send, client_receive)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.serve, server_receive, server_send)
        started = trio.current_time()
        await wire.request(1, "initialize", initialize_params())
        if ready_after is not None:
            await trio.sleep(ready_after)
            shared.catalog.set(catalog("echo"))  # ready now: its capabilities are known
            shared.settled.set()
        answer = await wire.next()
        took = trio.current_time() - started
        nursery.cancel_scope.cancel()
    return took, answer["result"]


async def test_initialize_waits_for_a_backend_nobody_knows_yet(
    autojump_clock: trio.testing.MockClock,
) -> None:
    took, result = await handshake_over_memory(starting_backend(initialize_wait=20), ready_after=3)
    assert took == pytest.approx(3)
    assert result["capabilities"]["logging"] == {}
    assert result["capabilities"]["resources"]["subscribe"] is True


async def test_initialize_waits_no_longer_than_its_limit(autojump_clock: trio.testing.MockClock) -> None:
    took, result = await handshake_over_memory(starting_backend(initialize_wait=5), ready_after=None)
    assert took == pytest.approx(5)
    assert "logging" not in result["capabilities"]


async def test_without_a_wait_initialize_is_answered_at_once(autojump_clock: trio.testing.MockClock) -> None:
    took, _ = await handshake_over_memory(starting_backend(initialize_wait=0), ready_after=None)
    assert took == 0
