"""The rate limit and concurrency cap, on virtual time."""

from __future__ import annotations

import re

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.gate.middleware import Call
from assern.actors.gate.middlewares.rate_limit import factory


def call(tool: str = "search", server: str = "web") -> Call:
    return Call(server=server, tool=tool, exposed=f"{server}_{tool}", client="tester")


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def ok(passed: Call) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="done")])


async def test_calls_past_the_rate_are_refused_until_the_window_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limit = factory({"calls": 2, "per": 10})
    assert text(await limit(call(), ok)) == "done"
    await trio.sleep(4)
    assert text(await limit(call(), ok)) == "done"
    refused = await limit(call(), ok)
    assert refused.is_error
    assert text(refused) == (
        "Rate limit reached: at most 2 calls per 10 s for web_search. Try again in 6.0 s."
    )
    assert text(await limit(call("fetch"), ok)) == "done"  # per tool by default
    await trio.sleep(6)
    assert text(await limit(call(), ok)) == "done"


async def test_a_server_scope_counts_all_its_tools_together(autojump_clock: trio.testing.MockClock) -> None:
    limit = factory({"calls": 1, "per": 60, "scope": "server"})
    assert text(await limit(call("a"), ok)) == "done"
    refused = await limit(call("b"), ok)
    assert "for server 'web'" in text(refused)
    assert text(await limit(call("a", server="db"), ok)) == "done"


async def test_calls_past_the_cap_wait_for_a_slot_then_give_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limit = factory({"concurrency": 2, "wait": 5})
    release = trio.Event()
    running = 0
    peak = 0

    async def slow(passed: Call) -> types.CallToolResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        return await ok(passed)

    answers: list[str] = []

    async def one() -> None:
        answers.append(text(await limit(call(), slow)))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(one)
        await trio.sleep(1)
        assert (running, answers) == (2, [])
        await trio.sleep(10)  # the third waited 5 s for a slot: refused
        assert answers == [
            "Too many calls in flight: at most 2 at a time for web_search, and none finished "
            "within 5 s. Try again later."
        ]
        release.set()
    assert answers[1:] == ["done", "done"]
    assert peak == 2


async def test_a_slot_is_given_back_when_a_call_is_cancelled(autojump_clock: trio.testing.MockClock) -> None:
    limit = factory({"concurrency": 1, "wait": 1})

    async def forever(passed: Call) -> types.CallToolResult:
        await trio.sleep_forever()
        raise AssertionError

    with trio.move_on_after(3):
        await limit(call(), forever)
    assert text(await limit(call(), ok)) == "done"


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "give `calls` (with `per`), `concurrency`, or both"),
        ({"calls": 0}, "option 'calls' must be at least 1, got 0"),
        ({"calls": "ten"}, "option 'calls' expects an integer, got 'ten'"),
        ({"calls": True}, "option 'calls' expects an integer, got True"),
        ({"concurrency": 2, "scope": "user"}, "option 'scope' expects one of tool, server, all, got 'user'"),
        (
            {"concurrency": 2, "burst": 3},
            "unknown option 'burst' (known: calls, concurrency, per, scope, wait)",
        ),
    ],
)
def test_wrong_options_are_refused_with_a_reason(options: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}$"):
        factory(options)
