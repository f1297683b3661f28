"""A backend's sampling, elicitation and roots requests during a call reach the client that
made it, whichever era each side speaks: as requests for a handshake-era client, as
`input_required` rounds (MRTR) for a 2026-07-28 one. The official client, real test servers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import AssernEnv, clients_of_every_era, server_table
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e

BACKENDS = {
    "handshake": server_table("alpha"),
    "2026-07-28": server_table("alpha", "--modern-only") + 'protocol = "2026-07-28"\n',
}


def text_of(result: types.CallToolResult) -> str:
    return text_in(result.content[0])


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    [message] = params.messages
    answer = types.TextContent(text=f"sampled: {text_in(message.content)}")
    return types.CreateMessageResult(role="assistant", content=answer, model="test-model")


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams)
    return types.ElicitResult(action="accept", content={"answer": f"yes to {params.message}"})


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root.model_validate({"uri": "file:///tmp/project"})])


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_server_to_client_requests_reach_the_calling_client_in_every_era(
    assern_env: AssernEnv, write_config: Callable[[str], Path], backend: str
) -> None:
    config = write_config(BACKENDS[backend])
    with trio.fail_after(90):
        async with clients_of_every_era(
            assern_env,
            config,
            sampling_callback=sample,
            elicitation_callback=elicit,
            list_roots_callback=roots,
        ) as clients:
            for era, client in clients:
                if era != "legacy":
                    assert client.protocol_version == era
                sampled = await client.call_tool("alpha_ask_sampling", {"prompt": "what is 2+2?"})
                assert text_of(sampled) == "sampled: what is 2+2?"
                elicited = await client.call_tool("alpha_ask_elicitation", {"message": "proceed?"})
                assert text_of(elicited) == "accept: yes to proceed?"
                assert text_of(await client.call_tool("alpha_ask_roots", {})) == "file:///tmp/project"


async def test_input_rounds_by_hand_bind_the_state_to_its_request(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """The rounds a 2026-07-28 client drives itself: a state is good for one retry of the
    very request that got it; anything else is refused and loses nothing."""
    config = write_config(BACKENDS["handshake"])
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="2026-07-28") as client:
            session = client.session
            first = await session.call_tool("alpha_ask_sampling", {"prompt": "hi"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.input_requests is not None
            assert first.request_state is not None
            [(key, asked)] = first.input_requests.items()
            assert isinstance(asked, types.CreateMessageRequest)
            assert text_in(asked.params.messages[0].content) == "hi"
            answer = types.CreateMessageResult(
                role="assistant", content=types.TextContent(text="by hand"), model="test-model"
            )

            # A forged state, and the right state on another request, are refused...
            with pytest.raises(MCPError, match="unknown or expired"):
                await session.call_tool(
                    "alpha_ask_sampling",
                    {"prompt": "hi"},
                    input_responses={key: answer},
                    request_state="forged",
                    allow_input_required=True,
                )
            with pytest.raises(MCPError, match="another request"):
                await session.call_tool(
                    "alpha_ask_sampling",
                    {"prompt": "something else"},
                    input_responses={key: answer},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            # ...and a retry without the answer is asked again, with a fresh state.
            again = await session.call_tool(
                "alpha_ask_sampling",
                {"prompt": "hi"},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(again, types.InputRequiredResult)
            assert again.input_requests is not None
            assert list(again.input_requests) == [key]
            assert again.request_state not in (None, first.request_state)

            # The rightful retry finishes the call that waited all along.
            done = await session.call_tool(
                "alpha_ask_sampling",
                {"prompt": "hi"},
                input_responses={key: answer},
                request_state=again.request_state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult)
            assert text_of(done) == "by hand"

            # A state is good once.
            with pytest.raises(MCPError, match="unknown or expired"):
                await session.call_tool(
                    "alpha_ask_sampling",
                    {"prompt": "hi"},
                    input_responses={key: answer},
                    request_state=again.request_state,
                    allow_input_required=True,
                )
            assert text_of(await client.call_tool("alpha_echo", {"text": "still here"})) == "still here"


async def test_a_2026_backends_own_rounds_pass_through_unchanged(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """When client and backend both speak 2026-07-28, the backend's `input_required` comes
    back as it asked it (its own key, no state of assern's), the client's retry goes
    through with the answer, and a request that needs a capability the client did not
    declare is refused with -32021 naming it, not asked anyway."""
    config = write_config(BACKENDS["2026-07-28"])
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="2026-07-28", sampling_callback=sample) as client:
            session = client.session
            first = await session.call_tool("alpha_ask_sampling", {"prompt": "hi"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.input_requests is not None
            assert list(first.input_requests) == ["answer"]  # the backend's key (testing_server.INPUT_KEY)
            assert first.request_state is None  # the backend keeps none, and assern adds none
            answer = types.CreateMessageResult(
                role="assistant", content=types.TextContent(text="passed through"), model="test-model"
            )
            done = await session.call_tool(
                "alpha_ask_sampling",
                {"prompt": "hi"},
                input_responses={"answer": answer},
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult)
            assert text_of(done) == "passed through"

            # The client declared sampling only: an elicitation is not asked of it.
            with pytest.raises(MCPError) as refused:
                await session.call_tool(
                    "alpha_ask_elicitation", {"message": "proceed?"}, allow_input_required=True
                )
            assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert refused.value.error.data == {"requiredCapabilities": {"elicitation": {}}}
            assert "elicitation capability" in refused.value.error.message

            # On a stdio backend the request's envelope declares this client's capabilities
            # (assern's own would include elicitation and roots).
            seen = json.loads(text_of(await client.call_tool("alpha_get_meta", {})))
            assert seen[types.CLIENT_CAPABILITIES_META_KEY] == {"sampling": {}}
            assert seen[types.PROTOCOL_VERSION_META_KEY] == "2026-07-28"
            assert seen[types.CLIENT_INFO_META_KEY]["name"] == "assern"
            assert text_of(await client.call_tool("alpha_echo", {"text": "still here"})) == "still here"


async def test_a_handshake_client_s_requests_to_a_2026_stdio_backend_keep_every_feature(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    """A handshake-era client's requests to a 2026-07-28 stdio backend are written on the
    raw lane with an envelope declaring what assern relays, and assern answers the
    backend's rounds by asking the client: progress, cancellation, prompts and resource
    reads work as on any other backend."""
    config = write_config(BACKENDS["2026-07-28"])
    marker = tmp_path / "cancelled"
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy", sampling_callback=sample) as client:
            seen = json.loads(text_of(await client.call_tool("alpha_get_meta", {})))
            assert seen[types.PROTOCOL_VERSION_META_KEY] == "2026-07-28"
            relayed: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {}}
            assert seen[types.CLIENT_CAPABILITIES_META_KEY] == relayed
            sampled = await client.call_tool("alpha_ask_sampling", {"prompt": "hi"})
            assert text_of(sampled) == "sampled: hi"

            done = await client.call_tool("alpha_progress", {"steps": 3}, progress_callback=on_progress)
            assert text_of(done) == "progressed"
            assert steps == [1, 2, 3]

            greeting = await client.get_prompt("alpha_greet", {"who": "era"})
            assert text_in(greeting.messages[0].content) == "Hello, era!"
            [info] = [
                r for r in (await client.list_resources()).resources if str(r.uri).endswith("test://info")
            ]
            read = await client.read_resource(info.uri)
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text == "info of alpha"

            with trio.move_on_after(1):
                await client.call_tool("alpha_wait_cancel", {"marker": str(marker)})
            while not marker.exists():  # noqa: ASYNC110 - another process writes the file
                await trio.sleep(0.02)
            assert marker.read_text() == "cancelled"
            assert text_of(await client.call_tool("alpha_echo", {"text": "still here"})) == "still here"


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_client_slower_than_the_backend_s_timeout_still_gets_its_answer(
    assern_env: AssernEnv, write_config: Callable[[str], Path], backend: str
) -> None:
    # A person may take minutes over an elicitation: the backend's timeout (0.5 s here)
    # measures the backend, so waiting on the client neither fails the call nor
    # restarts the backend as hung (both happened until the wait stopped its clock).
    config = write_config(BACKENDS[backend] + "timeout = 0.5\n")

    async def slow_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await trio.sleep(1.5)  # three timeouts
        return await elicit(context, params)

    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config, elicitation_callback=slow_elicit) as clients:
            for era, client in clients:
                result = await client.call_tool("alpha_ask_elicitation", {"message": era})
                assert text_of(result) == f"accept: yes to {era}", era
    restarts = ("backend_hung", "backend_restart_scheduled")
    assert [e for e in assern_env.log_events() if e.get("event") in restarts] == []
