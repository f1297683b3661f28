"""Strict validation end to end on generated calls: hypothesis generates arguments for the
notes server's `add_note` from its schema, valid ones and each kind of mistake; through
`assern serve` every valid call reaches the backend and every invalid one is answered
with the problem at its JSON path (and the field meant), without reaching it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, clients_of_every_era, notes_table
from hypothesis import given, settings
from hypothesis import strategies as st
from instances import (
    reap,  # noqa: F401 - autouse fixture
    text_of,
)

pytestmark = pytest.mark.e2e

TEXT = st.text(max_size=12)
VALID = st.fixed_dictionaries({"text": TEXT}, optional={"tags": st.lists(TEXT, max_size=3)})


@st.composite
def calls(draw: st.DrawFn) -> tuple[dict[str, Any], str | None]:
    """Arguments for add_note, and the problem line strict validation must report (None:
    the call is valid)."""
    arguments: dict[str, Any] = dict(draw(VALID))
    mistake = draw(st.sampled_from(["none", "missing", "type", "item", "typo", "unknown"]))
    if mistake == "missing":
        del arguments["text"]
        return arguments, '$: "text" is a required property'
    if mistake == "type":
        arguments["text"] = draw(st.integers())
        return arguments, f'$.text: {arguments["text"]} is not of type "string"'
    if mistake == "item":
        tags = [*arguments.get("tags", []), draw(st.integers(min_value=0, max_value=99))]
        arguments["tags"] = tags
        return arguments, f'$.tags[{len(tags) - 1}]: {tags[-1]} is not of type "string"'
    if mistake == "typo":
        typo = draw(st.sampled_from(["txt", "tex", "ext", "texts"]))
        arguments[typo] = arguments.pop("text")
        return arguments, f'$.{typo}: unknown field "{typo}"; did you mean `text`?'
    if mistake == "unknown":
        arguments["priority"] = draw(st.integers())
        return arguments, '$.priority: unknown field "priority"'
    return arguments, None


def generated(count: int) -> list[tuple[dict[str, Any], str | None]]:
    found: list[tuple[dict[str, Any], str | None]] = []

    @settings(max_examples=count, database=None, derandomize=True, deadline=None)
    @given(calls())
    def collect(call: tuple[dict[str, Any], str | None]) -> None:
        found.append(call)

    collect()
    return found


async def test_generated_calls_are_forwarded_or_rejected_with_their_problem(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(
        '[settings]\nvalidate = "strict"\n\n' + notes_table("notes", "--record", str(record))
    )
    cases = generated(60)
    assert any(problem is None for _, problem in cases)
    assert sum(problem is not None for _, problem in cases) >= 20
    with trio.fail_after(120):
        async with clients_of_every_era(assern_env, config) as clients:
            for era, client in clients:
                for arguments, problem in cases:
                    result = await client.call_tool("notes_add_note", arguments)
                    text = text_of(result)
                    if problem is None:
                        assert not result.is_error, (era, arguments, text)
                        assert text.startswith("added ")
                    else:
                        assert result.is_error, (era, arguments)
                        assert text.startswith("Invalid arguments for notes_add_note; the call was not sent.")
                        assert f"- {problem}" in text.splitlines(), (era, arguments, text)
    forwarded = [json.loads(line)["arguments"] for line in record.read_text().splitlines()]
    assert forwarded == 2 * [arguments for arguments, problem in cases if problem is None]
