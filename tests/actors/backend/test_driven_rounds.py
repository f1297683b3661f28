"""assern answering a 2026-07-28 backend's input rounds for a client without rounds."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from assern.actors.backend.driven_rounds import MAX_ROUNDS, drive
from assern.actors.jsonrpc.errors import RpcError

SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
ROOTS = {"method": "roots/list"}


def round_of(requests: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
    answer: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        answer["inputRequests"] = requests
    if state is not None:
        answer["requestState"] = state
    return answer


class Backend:
    """Answers each retry from a script; records what each retry carried."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.retries: list[tuple[dict[str, Any] | None, str | None]] = []

    async def retry(self, responses: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
        self.retries.append((responses, state))
        return self.answers.pop(0)


class Client:
    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any] | None]] = []

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self.asked.append((method, params))
        if method == "roots/list":
            return {"roots": [{"uri": "file:///work"}]}
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}


async def test_a_terminal_answer_passes_as_it_came() -> None:
    answer = {"content": [{"type": "text", "text": "done"}]}
    backend, client = Backend(), Client()
    assert await drive(answer, client.ask, backend.retry) is answer
    assert backend.retries == []
    assert client.asked == []


async def test_each_round_asks_the_client_and_retries_with_its_answers_and_the_state() -> None:
    done = {"content": [{"type": "text", "text": "done"}]}
    backend = Backend(round_of({"where": ROOTS}, "s2"), done)
    client = Client()
    first = round_of({"a": SAMPLE, "b": ROOTS}, "s1")
    assert await drive(first, client.ask, backend.retry) == done
    assert [m for m, _ in client.asked] == ["sampling/createMessage", "roots/list", "roots/list"]
    assert client.asked[0][1] == SAMPLE["params"]
    [(answers, state), (again, state2)] = backend.retries
    assert set(answers or {}) == {"a", "b"}
    assert state == "s1"
    assert again == {"where": {"roots": [{"uri": "file:///work"}]}}
    assert state2 == "s2"


async def test_a_round_with_only_a_state_is_retried_after_a_short_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    done: dict[str, Any] = {"content": []}
    backend = Backend(round_of(None, "s2"), done)
    started = trio.current_time()
    assert await drive(round_of(None, "s1"), Client().ask, backend.retry) == done
    assert backend.retries == [(None, "s1"), (None, "s2")]
    assert 0.1 <= trio.current_time() - started <= 0.2  # 50 ms, then 100 ms


async def test_a_backend_that_never_answers_is_given_up_on() -> None:
    backend = Backend(*[round_of({"a": ROOTS}, None) for _ in range(MAX_ROUNDS + 1)])
    with pytest.raises(RpcError, match=f"asked for input {MAX_ROUNDS} times"):
        await drive(round_of({"a": ROOTS}, None), Client().ask, backend.retry)
    assert len(backend.retries) == MAX_ROUNDS


@pytest.mark.parametrize(
    "requests",
    [
        {"a": {"method": "tools/call"}},
        {"a": "sampling/createMessage"},
        ["not", "a", "map"],
        {"a": {"method": {"not": "a name"}}},  # once a TypeError (a dict looked up in a map)
        {"a": {"method": ["roots/list"]}},
    ],
)
async def test_what_assern_cannot_relay_is_a_clear_error(requests: Any) -> None:
    with pytest.raises(RpcError, match=r"cannot relay|malformed"):
        await drive(round_of(requests, None), Client().ask, Backend().retry)


async def test_the_client_s_refusal_is_the_call_s_error() -> None:
    async def refuse(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise RpcError(-32601, "Method not found: elicitation/create")

    with pytest.raises(RpcError, match="elicitation/create"):
        await drive(round_of({"a": {"method": "elicitation/create"}}, None), refuse, Backend().retry)
