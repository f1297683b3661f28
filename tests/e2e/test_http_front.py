"""The HTTP front: `assern serve --http` with the official client over streamable HTTP,
in both eras, with tokens, and against hostile requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from content import text_in
from harness import HTTP_INIT as INIT
from harness import MODERN_ENVELOPE, POST_HEADERS, AssernEnv, HttpFront, http_front, in_session, server_table
from instances import daemon, wait_until
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from assern.actors.listener.http.tokens import TokenStore

pytestmark = [
    pytest.mark.e2e,
    # The SDK's HTTP client leaves httpx2's response iterators to the collector when a
    # stream ends under trio; nothing is lost, but the collector warns about each.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
    ),
]

MODES = ["legacy", "2026-07-28"]


@asynccontextmanager
async def authed(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    """The official client over HTTP, sending `token`."""
    async with (
        create_mcp_http_client(headers={"authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    [message] = params.messages
    answer = types.TextContent(text=f"sampled: {text_in(message.content)}")
    return types.CreateMessageResult(role="assistant", content=answer, model="test-model")


def refusals(env: AssernEnv) -> list[dict[str, Any]]:
    return [e for e in env.log_events() if e.get("event") == "http_refused"]


async def test_both_eras_list_call_and_get_progress_over_http(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            for mode in MODES:  # one front serves both
                async with Client(front.url, mode=mode) as client:
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    assert {"alpha_echo", "alpha_progress"} <= names
                    echoed = await client.call_tool("alpha_echo", {"text": "over http"})
                    assert text_in(echoed.content[0]) == "over http"
                    steps: list[float] = []

                    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                        steps.append(progress)  # noqa: B023 - used within this iteration only

                    done = await client.call_tool(
                        "alpha_progress", {"steps": 3}, progress_callback=on_progress
                    )
                    assert not done.is_error, mode
                    assert steps == [1, 2, 3], mode


async def test_a_backend_request_reaches_the_http_client_over_its_get_stream(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with (
            http_front(assern_env, config) as front,
            Client(front.url, mode="legacy", sampling_callback=sample) as client,
        ):
            result = await client.call_tool("alpha_ask_sampling", {"prompt": "hello"})
            assert text_in(result.content[0]) == "sampled: hello"


async def test_sampling_reaches_a_stateless_client_as_input_rounds(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with (
            http_front(assern_env, config) as front,
            Client(front.url, mode="2026-07-28", sampling_callback=sample) as client,
        ):
            result = await client.call_tool("alpha_ask_sampling", {"prompt": "hi"})
            assert text_in(result.content[0]) == "sampled: hi"
            # Once the backend is listed a call takes the raw lane: its round too.
            again = await client.call_tool("alpha_ask_sampling", {"prompt": "again"})
            assert text_in(again.content[0]) == "sampled: again"


async def test_a_client_that_hangs_up_mid_call_gets_the_backend_call_cancelled(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(server_table("alpha"))
    marker = tmp_path / "cancelled"
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            async with Client(front.url, mode="legacy") as client:
                await client.list_tools()
                with trio.move_on_after(1.5):
                    await client.call_tool("alpha_wait_cancel", {"marker": str(marker)})
            # the session ended with the client (DELETE): its call is cancelled at the backend
            await wait_until(marker.exists)
            assert marker.read_text() == "cancelled"


def modern_call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments, "_meta": MODERN_ENVELOPE}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_stateless_calls_check_routing_headers_and_end_when_their_client_leaves(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    """A 2026-07-28 tool call the front answers itself: the official client's
    `Mcp-Param-*` header for an argument declared `x-mcp-header` passes, a header that
    disagrees with the body is refused as the specification says, and a client that
    closes its request cancels the backend's call."""
    config = write_config(server_table("alpha", "--routing-header", "text=Text"))
    marker = tmp_path / "cancelled"
    headers = {
        **POST_HEADERS,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "alpha_echo",
    }
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            async with Client(front.url, mode="2026-07-28") as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                schema = tools["alpha_echo"].input_schema
                assert schema["properties"]["text"]["x-mcp-header"] == "Text"
                echoed = await client.call_tool("alpha_echo", {"text": "routed"})
                assert text_in(echoed.content[0]) == "routed"
            async with httpx2.AsyncClient(timeout=30) as http:
                body = modern_call(2, "alpha_echo", {"text": "eu"})
                agreed = await http.post(front.url, json=body, headers={**headers, "mcp-param-text": "eu"})
                assert agreed.status_code == 200
                assert agreed.headers["content-type"] == "application/json"
                assert (
                    text_in(types.CallToolResult.model_validate(agreed.json()["result"]).content[0]) == "eu"
                )
                differs = await http.post(front.url, json=body, headers={**headers, "mcp-param-text": "us"})
                assert differs.status_code == 400
                assert differs.json()["error"]["code"] == types.HEADER_MISMATCH
                assert "Mcp-Param-Text" in differs.json()["error"]["message"]
                missing = await http.post(front.url, json=body, headers=headers)
                assert missing.status_code == 400
                wait = modern_call(3, "alpha_wait_cancel", {"marker": str(marker)})
                with trio.move_on_after(1.5):
                    await http.post(
                        front.url, json=wait, headers={**headers, "mcp-name": "alpha_wait_cancel"}
                    )
            await wait_until(marker.exists)
            assert marker.read_text() == "cancelled"


async def open_raw_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """Initialize a handshake-era session by hand; the headers of its later requests."""
    opened = await http.post(url, json=INIT, headers=POST_HEADERS)
    headers = in_session(opened.headers["mcp-session-id"])
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers)).status_code == 202
    return headers


def call_message(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def sse_events(raw: bytes) -> list[dict[str, str]]:
    """The events of an SSE body: each one's fields (`id`, `data`, ...)."""
    events = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields: dict[str, str] = {}
        for line in block.decode().splitlines():
            name, _, value = line.partition(":")
            if name:
                fields[name] = value.strip()
        if fields:
            events.append(fields)
    return events


async def test_a_quick_call_is_answered_as_json_and_one_with_progress_as_a_stream(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            headers = await open_raw_session(http, front.url)
            # (a list waits for the backend to start, which can take longer than a quick call)
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            assert (await http.post(front.url, json=listing, headers=headers)).status_code == 200
            echo = call_message(2, "alpha_echo", {"text": "hi"})
            quick = await http.post(front.url, json=echo, headers=headers)
            assert quick.status_code == 200
            assert quick.headers["content-type"] == "application/json"
            assert quick.headers["mcp-session-id"] == headers["mcp-session-id"]
            answer = quick.json()
            assert answer["id"] == 2
            assert text_in(types.CallToolResult.model_validate(answer["result"]).content[0]) == "hi"
            # a pretty-printed body is the same request
            body = json.dumps(call_message(3, "alpha_echo", {"text": "again"}), indent=2)
            spaced = await http.post(front.url, content=body, headers=headers)
            assert spaced.json()["id"] == 3
            with_progress = call_message(4, "alpha_progress", {"steps": 2})
            with_progress["params"]["_meta"] = {"progressToken": "p4"}
            streamed = await http.post(front.url, json=with_progress, headers=headers)
            assert streamed.headers["content-type"].startswith("text/event-stream")
            messages = [json.loads(e["data"]) for e in sse_events(streamed.content) if e.get("data")]
            assert [m.get("method") for m in messages[:-1]] == ["notifications/progress"] * 2
            assert messages[-1]["id"] == 4


@pytest.mark.parametrize(
    "listen",
    ["replay_events = 0", "resume_grace = 1"],
    ids=["no-replay-cancels-at-once", "cancelled-when-not-resumed"],
)
async def test_a_dropped_post_cancels_its_call_while_the_session_lives(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path, listen: str
) -> None:
    config = write_config(server_table("alpha") + f"[listen]\n{listen}\n")
    marker = tmp_path / "cancelled"
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            headers = await open_raw_session(http, front.url)
            # (a list waits for the backend: the call reaches it before the client leaves)
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            assert (await http.post(front.url, json=listing, headers=headers)).status_code == 200
            call = call_message(2, "alpha_wait_cancel", {"marker": str(marker)})
            with trio.move_on_after(1.5):
                async with http.stream("POST", front.url, json=call, headers=headers) as response:
                    assert response.status_code == 200
                    async for _ in response.aiter_bytes():
                        pass
            await wait_until(marker.exists)
            # the session itself is still there
            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            assert (await http.post(front.url, json=ping, headers=headers)).status_code == 200
    assert any(e.get("event") == "http_call_abandoned" for e in assern_env.log_events())


def answered(env: AssernEnv, tool: str) -> bool:
    """Whether the backend answered a call of `tool` (its own name or the exposed one)."""
    return any(
        e.get("event") == "tool_call_finished" and str(e.get("tool", "")).endswith(tool)
        for e in env.log_events()
    )


async def test_a_client_that_lost_its_stream_resumes_it_with_last_event_id(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(server_table("alpha") + "[listen]\nresume_grace = 4\n")
    gate = tmp_path / "gate"
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            headers = await open_raw_session(http, front.url)
            call = call_message(2, "alpha_gate", {"path": str(gate)})
            async with http.stream("POST", front.url, json=call, headers=headers) as response:
                assert response.status_code == 200
                first = await anext(response.aiter_bytes())
            # the stream broke after its first event (the priming one, which names a place)
            [primed] = sse_events(first)
            assert primed["data"] == ""
            broke = trio.current_time()
            gate.touch()  # the call is answered while nobody listens
            await wait_until(lambda: answered(assern_env, "gate"), limit=4)
            # the answer waits in the session's buffer, past the grace
            await trio.sleep(max(0.0, broke + 5 - trio.current_time()))
            resume = {"accept": "text/event-stream", "last-event-id": primed["id"]}
            resume |= {k: v for k, v in headers.items() if k.startswith("mcp-")}
            async with http.stream("GET", front.url, headers=resume) as replayed:
                assert replayed.status_code == 200
                received = b""
                async for chunk in replayed.aiter_bytes():
                    received += chunk
                    if b'"id":2' in received:
                        break
            answers = [json.loads(e["data"]) for e in sse_events(received) if e.get("data")]
            assert answers[0]["id"] == 2
            assert text_in(types.CallToolResult.model_validate(answers[0]["result"]).content[0]) == "opened"
            # an id the session never gave replays nothing, and the session serves on
            async with http.stream("GET", front.url, headers={**resume, "last-event-id": "9999"}) as unknown:
                assert unknown.status_code == 200
                assert b"data" not in await unknown.aread()
            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            assert (await http.post(front.url, json=ping, headers=headers)).status_code == 200
    events = assern_env.log_events()
    assert {e.get("found") for e in events if e.get("event") == "http_stream_resumed"} == {True, False}
    assert not any(e.get("event") == "http_call_abandoned" for e in events)


async def test_tokens_separate_clients_and_their_sessions(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    store = TokenStore(assern_env.assern_home / "tokens.toml")
    first, second = store.create("first"), store.create("second")
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:

            async def use(token: str, mode: str) -> str:
                async with authed(front.url, token, mode) as client:
                    return text_in((await client.call_tool("alpha_echo", {"text": token[-4:]})).content[0])

            async with trio.open_nursery() as nursery:
                answers: list[str] = []

                async def run(token: str, mode: str) -> None:
                    answers.append(await use(token, mode))

                nursery.start_soon(run, first, "legacy")
                nursery.start_soon(run, second, "2026-07-28")
            assert sorted(answers) == sorted([first[-4:], second[-4:]])

            async with httpx2.AsyncClient(timeout=30) as http:
                mine = {**POST_HEADERS, "authorization": f"Bearer {first}"}
                opened = await http.post(front.url, json=INIT, headers=mine)
                assert opened.status_code == 200
                session = opened.headers["mcp-session-id"]
                theirs = {**in_session(session), "authorization": f"Bearer {second}"}
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                assert (await http.post(front.url, json=ping, headers=theirs)).status_code == 404

                # a revoked token stops working with the next request, no restart
                store.revoke("first")
                refused = await http.post(front.url, json=INIT, headers=mine)
                assert refused.status_code == 401
    events = refusals(assern_env)
    assert {"session_of_another_token", "bad_token"} <= {e["reason"] for e in events}
    text = (assern_env.assern_home / "logs" / "assern.log").read_text()
    assert first not in text
    assert second not in text


async def hostile(front: HttpFront, token: str) -> dict[str, int]:
    auth = {"authorization": f"Bearer {token}"}
    statuses: dict[str, int] = {}
    async with httpx2.AsyncClient(timeout=30) as http:
        post = {**POST_HEADERS, **auth}
        statuses["bad_origin"] = (
            await http.post(front.url, json=INIT, headers={**post, "origin": "http://evil.example"})
        ).status_code
        statuses["bad_host"] = (
            await http.post(front.url, json=INIT, headers={**post, "host": "evil.example:80"})
        ).status_code
        statuses["no_token"] = (await http.post(front.url, json=INIT, headers=POST_HEADERS)).status_code
        statuses["bad_token"] = (
            await http.post(
                front.url, json=INIT, headers={**POST_HEADERS, "authorization": "Bearer asn_nope"}
            )
        ).status_code
        statuses["oversized"] = (
            await http.post(front.url, content=b'{"pad":"' + b"x" * 70_000 + b'"}', headers=post)
        ).status_code
        statuses["invalid_json"] = (
            await http.post(front.url, content=b"{not json", headers=post)
        ).status_code
        statuses["unknown_session"] = (
            await http.post(
                front.url,
                json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                headers={**post, "mcp-session-id": "0" * 32, "mcp-protocol-version": "2025-11-25"},
            )
        ).status_code
        statuses["wrong_path"] = (await http.get(front.base + "/other", headers=auth)).status_code
        # after all that, a proper client still works
        statuses["good"] = (await http.post(front.url, json=INIT, headers=post)).status_code
    return statuses


async def test_hostile_requests_get_clear_errors_and_harm_nothing(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    token = TokenStore(assern_env.assern_home / "tokens.toml").create("ci")
    config = write_config(server_table("alpha") + "[listen]\nmax_body_bytes = 65536\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            statuses = await hostile(front, token)
            async with authed(front.url, token, "legacy") as client:
                echoed = await client.call_tool("alpha_echo", {"text": "still fine"})
                assert text_in(echoed.content[0]) == "still fine"
    assert statuses == {
        "bad_origin": 403,
        "bad_host": 421,
        "no_token": 401,
        "bad_token": 401,
        "oversized": 413,
        "invalid_json": 400,
        "unknown_session": 404,
        "wrong_path": 404,
        "good": 200,
    }
    reasons = {e["reason"] for e in refusals(assern_env)}
    assert {"bad_origin", "bad_host", "no_token", "bad_token", "body_too_large", "unknown_session"} <= reasons
    assert token not in (assern_env.assern_home / "logs" / "assern.log").read_text()


async def test_session_limits_per_token_are_clear_errors(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + "[listen]\nmax_sessions_per_token = 2\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            codes = [
                (await http.post(front.url, json=INIT, headers=POST_HEADERS)).status_code for _ in range(3)
            ]
            assert codes == [200, 200, 429]
            body = (await http.post(front.url, json=INIT, headers=POST_HEADERS)).json()
            assert "Too many open sessions for this token (2)" in body["error"]["message"]


async def until_ready(http: httpx2.AsyncClient, front: HttpFront) -> dict[str, Any]:
    """/readyz once it says ready (503 while the first backends start)."""
    with trio.fail_after(30):
        while (ready := await http.get(front.base + "/readyz")).status_code != 200:
            assert ready.status_code == 503
            assert ready.json()["ready"] is False
            await trio.sleep(0.1)
    body: dict[str, Any] = ready.json()
    assert body["ready"] is True
    return body


async def test_operators_endpoints(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> None:
    config = write_config(server_table("alpha") + server_table("beta"))
    with trio.fail_after(60):
        async with (
            http_front(assern_env, config) as front,
            Client(front.url, mode="legacy") as client,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            await client.call_tool("alpha_echo", {"text": "counted"})
            assert (await http.get(front.base + "/healthz")).json() == {"status": "alive"}
            ready = await until_ready(http, front)
            assert ready["backends"] == {"alpha": "ready", "beta": "ready"}
            metrics = (await http.get(front.base + "/metrics")).text
    assert 'assern_backend_up{server="alpha"} 1.0' in metrics
    assert 'assern_calls_total{outcome="ok",server="alpha",tool="echo"} 1.0' in metrics
    assert 'assern_call_duration_seconds_count{server="alpha",tool="echo"} 1.0' in metrics
    assert 'assern_http_requests_total{era="handshake"}' in metrics
    assert 'assern_clients{kind="http"} 1.0' in metrics


async def test_readyz_names_backends_only_to_token_holders(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    token = TokenStore(assern_env.assern_home / "tokens.toml").create("ops")
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            anonymous = await until_ready(http, front)
            assert anonymous["backends"] == {"ready": 1}
            named = await http.get(front.base + "/readyz", headers={"authorization": f"Bearer {token}"})
            assert named.json()["backends"] == {"alpha": "ready"}
            assert (await http.get(front.base + "/metrics")).status_code == 401


async def test_a_taken_port_or_an_unsafe_address_is_a_clear_start_error(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + '[listen]\nauth = "none"\n')
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            port = front.url.split(":")[2].split("/")[0]
            result = await trio.run_process(
                [assern_env.params().command, "serve", "--config", str(config), "--http", port, "--no-stdio"],
                env=assern_env.env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert result.returncode == 2
            assert f"cannot serve HTTP on 127.0.0.1:{port}" in result.stderr.decode()
        unsafe = await trio.run_process(
            [
                assern_env.params().command,
                "serve",
                "--config",
                str(config),
                "--http",
                "0.0.0.0:0",
                "--no-stdio",
            ],
            env=assern_env.env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert unsafe.returncode == 2
        assert "without authentication is refused" in unsafe.stderr.decode()


async def test_off_loopback_the_front_is_refused_until_a_token_exists(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    # auth = "auto" (the default) asks every request off loopback for a token: with none
    # created, the front would only answer 401, so it does not start, and says how.
    config = write_config(server_table("alpha"))
    serve = [assern_env.params().command, "serve", "--config", str(config), "--no-stdio", "--http"]
    with trio.fail_after(60):
        refused = await trio.run_process(
            [*serve, "0.0.0.0:0"], env=assern_env.env, capture_stdout=True, capture_stderr=True, check=False
        )
        stderr = refused.stderr.decode()
        assert refused.returncode == 2, stderr
        assert "serving 0.0.0.0:0 (not a loopback address) needs a bearer token, and none exists" in stderr
        assert "create one with `assernctl token create NAME`" in stderr
        assert "serving MCP over HTTP" not in stderr
        # The command it names is the one that lifts the refusal.
        ctl = str(Path(assern_env.params().command).with_name("assernctl"))
        created = await trio.run_process(
            [ctl, "token", "create", "remote", "--config", str(config)],
            env=assern_env.env,
            capture_stdout=True,
            capture_stderr=True,
        )
        token = created.stdout.decode().strip()
        async with (
            http_front(assern_env, config, address="0.0.0.0:0") as front,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            assert front.url.startswith("http://0.0.0.0:")
            local = front.base.replace("0.0.0.0", "127.0.0.1")
            assert (await http.get(local + "/metrics")).status_code == 401
            authorized = {"authorization": f"Bearer {token}"}
            assert (await http.get(local + "/metrics", headers=authorized)).status_code == 200


def test_assernctl_token_commands(assern_env: AssernEnv) -> None:
    import subprocess
    import sys

    ctl = str(Path(sys.executable).with_name("assernctl"))
    created = subprocess.run(
        [ctl, "token", "create", "laptop"], env=assern_env.env, capture_output=True, text=True
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("asn_")
    assert len(token) > 40
    path = assern_env.assern_home / "tokens.toml"
    assert path.stat().st_mode & 0o777 == 0o600
    assert token not in path.read_text()
    listed = subprocess.run(
        [ctl, "token", "list", "--json"], env=assern_env.env, capture_output=True, text=True
    )
    [entry] = json.loads(listed.stdout)
    assert entry["name"] == "laptop"
    assert token.startswith(entry["starts"])
    again = subprocess.run(
        [ctl, "token", "create", "laptop"], env=assern_env.env, capture_output=True, text=True
    )
    assert again.returncode == 1
    assert "exists" in again.stderr
    revoked = subprocess.run(
        [ctl, "token", "revoke", "laptop"], env=assern_env.env, capture_output=True, text=True
    )
    assert revoked.returncode == 0
    assert (
        json.loads(
            subprocess.run(
                [ctl, "token", "list", "--json"], env=assern_env.env, capture_output=True, text=True
            ).stdout
        )
        == []
    )


async def test_legacy_sse_clients_when_enabled(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    token = TokenStore(assern_env.assern_home / "tokens.toml").create("old")
    config = write_config(server_table("alpha") + "[listen]\nlegacy_sse = true\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front:
            auth = {"authorization": f"Bearer {token}"}
            async with Client(
                sse_client(front.base + "/sse", headers=auth), mode="legacy", sampling_callback=sample
            ) as client:
                echoed = await client.call_tool("alpha_echo", {"text": "over sse"})
                assert text_in(echoed.content[0]) == "over sse"
                sampled = await client.call_tool("alpha_ask_sampling", {"prompt": "old"})
                assert text_in(sampled.content[0]) == "sampled: old"
            async with httpx2.AsyncClient(timeout=30) as http:
                assert (await http.get(front.base + "/sse")).status_code == 401
                posted = await http.post(
                    front.base + "/messages/?session_id=" + "0" * 32, json=INIT, headers=auth
                )
                assert posted.status_code == 404


async def test_legacy_sse_is_off_unless_enabled(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, httpx2.AsyncClient(timeout=30) as http:
            assert (await http.get(front.base + "/sse")).status_code == 404


async def test_sigterm_drains_open_calls_before_stopping(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + "[listen]\ngraceful_timeout = 3\n")
    with trio.fail_after(60):
        async with http_front(assern_env, config) as front, Client(front.url, mode="2026-07-28") as client:
            await client.list_tools()
            answers: list[str] = []

            async def slow_call() -> None:
                result = await client.call_tool("alpha_slow", {"seconds": 1.5})
                answers.append(text_in(result.content[0]))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await trio.sleep(0.5)
                front.process.terminate()
            assert len(answers) == 1  # the call that was open when SIGTERM came was answered
            await front.process.wait()
            assert front.process.returncode == 0
    events = [e["event"] for e in assern_env.log_events()]
    assert events.index("http_draining") < events.index("http_drained") < events.index("assern_stopped")


async def test_the_daemon_serves_listen_http_with_the_backends_it_shares(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    assern_env.per_config()  # `assern daemon --config` and its proxies
    import socket

    with socket.socket() as probe:  # a free loopback port for [listen] http
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_config(server_table("alpha") + f'[listen]\nhttp = "127.0.0.1:{port}"\n')
    with trio.fail_after(60):
        async with daemon(assern_env, "--config", str(config)) as process:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url, mode="legacy") as over_http:
                pid = text_in((await over_http.call_tool("alpha_get_pid", {})).content[0])
                # a stdio client of the same configuration reaches the same instance
                async with Client(assern_env.serve(config), mode="legacy") as over_stdio:
                    shared = text_in((await over_stdio.call_tool("alpha_get_pid", {})).content[0])
                assert shared == pid
            process.terminate()
            assert await process.wait() == 0
