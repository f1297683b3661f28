"""Safety rules and validation end to end: deny and read_only keep tools out of the list
and refuse their calls, strict validation answers bad arguments without calling the
backend, results are checked against their outputSchema, and a backend's invalid
schema is reported once and served unvalidated."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, clients_of_every_era, notes_table
from instances import (
    ctl_json,
    events,
    reap,  # noqa: F401 - autouse fixture
    text_of,
)
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e


def info(name: str) -> types.Implementation:
    return types.Implementation(name=name, version="1.0")


def recorded(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_deny_and_read_only_keep_tools_out_and_refuse_their_calls(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(
        '[settings]\ndeny = ["*_delete_*"]\n\n'
        '[profiles.careful]\nmatch = ["careful-*"]\nread_only = true\n\n'
        + notes_table("notes", "--record", str(record), extra='deny = ["tag_*"]\n')
    )
    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config) as clients:
            for _, client in clients:
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert "notes_add_note" in listed
                assert not listed & {"notes_delete_note", "notes_tag_note"}
                with pytest.raises(
                    MCPError, match=r"refused: it is denied by the rule `deny = '\*_delete_\*'`"
                ):
                    await client.call_tool("notes_delete_note", {"id": 1})
                with pytest.raises(MCPError, match="denied by the rule `deny = 'tag_\\*'`"):
                    await client.call_tool("notes_tag_note", {"id": "1", "tag": "x"})
        async with clients_of_every_era(assern_env, config, client_info=info("careful-agent")) as clients:
            for _, client in clients:
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert listed == {
                    "notes_list_notes",
                    "notes_read_note",
                    "notes_miscount",
                    "notes_reveal",
                    "notes_echo_arguments",
                }
                with pytest.raises(
                    MCPError, match=r"only read-only tools are served here \(`read_only = true`\)"
                ):
                    await client.call_tool("notes_add_note", {"text": "x"})
                assert text_of(await client.call_tool("notes_read_note", {"id": 1})) == "buy milk"
    assert [call["tool"] for call in recorded(record)] == ["read_note", "read_note"]
    refusals = events(assern_env, "call_refused")
    denied = [("notes", "notes_delete_note", "deny"), ("notes", "notes_tag_note", "deny")]
    read_only = [("notes", "notes_add_note", "read_only")]
    assert [(e["server"], e["tool"], e["rule"]) for e in refusals] == 2 * denied + 2 * read_only
    assert [e["client"] for e in refusals[-2:]] == ["careful-agent", "careful-agent"]


async def test_strict_validation_answers_bad_arguments_and_never_calls_the_backend(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(
        '[settings]\nvalidate = "strict"\n\n' + notes_table("notes", "--record", str(record))
    )
    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config) as clients:
            for _, client in clients:
                result = await client.call_tool("notes_add_note", {"txt": "milk", "tags": ["a", 3]})
                assert result.is_error
                text = text_of(result)
                assert text.startswith("Invalid arguments for notes_add_note; the call was not sent.")
                assert '- $.txt: unknown field "txt"; did you mean `text`?' in text
                assert '- $: "text" is a required property' in text
                assert '- $.tags[1]: 3 is not of type "string"' in text
                assert "Fields: text (string, required), tags (array)" in text
                # corrected on the next turn, it goes through
                fixed = await client.call_tool("notes_add_note", {"text": "milk", "tags": ["a"]})
                assert text_of(fixed) == "added 3"
                # a schema that allows any field keeps allowing them
                echoed = await client.call_tool("notes_echo_arguments", {"anything": 1})
                assert json.loads(text_of(echoed)) == {"anything": 1}
    assert [call["tool"] for call in recorded(record)] == 2 * ["add_note", "echo_arguments"]
    refused = events(assern_env, "call_refused", rule="validate")
    assert [e["tool"] for e in refused] == ["add_note", "add_note"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # legacy: the raw lane checks after sending
async def test_by_default_bad_arguments_are_logged_and_forwarded(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path, mode: str
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(notes_table("notes", "--record", str(record)))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode=mode) as client:
            result = await client.call_tool("notes_add_note", {"text": "x", "colour": "red"})
            assert text_of(result) == "added 3"
    assert recorded(record) == [{"tool": "add_note", "arguments": {"text": "x", "colour": "red"}}]
    warned = events(assern_env, "call_arguments_invalid")
    assert [(e["server"], e["tool"], e["problems"]) for e in warned] == [
        ("notes", "add_note", ['$.colour: unknown field "colour"'])
    ]


async def test_a_result_that_breaks_its_output_schema_is_the_backends_fault(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(notes_table("notes", extra='validate = "strict"\n'))
    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config) as clients:
            for _, client in clients:
                good = await client.call_tool("notes_read_note", {"id": 2})
                assert good.structured_content == {"id": 2, "text": "call the plumber"}
                bad = await client.call_tool("notes_miscount", {"text": "four"})
                assert bad.is_error
                assert text_of(bad).startswith(
                    "Server 'notes' answered miscount with structuredContent that does not match"
                )
                assert '$.count: "4" is not of type "integer"' in text_of(bad)
    mismatches = events(assern_env, "result_schema_mismatch")
    assert [(e["server"], e["tool"]) for e in mismatches] == 2 * [("notes", "miscount")]


async def test_an_invalid_backend_schema_is_reported_once_and_served_unvalidated(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(notes_table("notes", "--broken-schema", extra='validate = "strict"\n'))
    at = ("--config", str(config))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config)) as client:
            assert "notes_read_note" in {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("notes_read_note", {"id": "not a number"})
            assert text_of(result) == "no such note"  # the backend's own answer
            status = await ctl_json(assern_env, "status", *at)
    [notes] = status["backends"]
    assert [entry["tool"] for entry in notes["invalid_schemas"]] == ["notes_read_note"]
    assert "integr" in notes["invalid_schemas"][0]["problem"]
    reported = events(assern_env, "backend_schema_invalid")
    assert [(e["server"], e["tool"]) for e in reported] == [("notes", "notes_read_note")]


async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={})


async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


CONFIRMING = '[settings]\nconfirm = ["destructive"]\n\n'


async def test_confirm_asks_the_calling_client_and_only_a_yes_lets_the_call_through(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(CONFIRMING + notes_table("notes", "--record", str(record)))
    questions: list[str] = []

    async def asked(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        questions.append(params.message)  # each client says yes, then no
        return await (accept if len(questions) % 2 == 1 else decline)(context, params)

    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config, elicitation_callback=asked) as clients:
            for _, client in clients:
                done = await client.call_tool("notes_delete_note", {"id": 2})
                assert text_of(done) == "deleted 2"
                refused = await client.call_tool("notes_delete_note", {"id": 1})
                assert refused.is_error
                assert text_of(refused) == (
                    "The call of notes_delete_note was not sent: the user declined it when asked to confirm."
                )
                # read-only and non-destructive tools are not asked about
                assert text_of(await client.call_tool("notes_read_note", {"id": 1})) == "buy milk"
                assert text_of(await client.call_tool("notes_add_note", {"text": "x"})) == "added 3"
    asked_once = ['Allow notes.delete_note with {"id": 2}?', 'Allow notes.delete_note with {"id": 1}?']
    assert questions == 2 * asked_once
    assert [(c["tool"], c["arguments"]) for c in recorded(record)] == 2 * [
        ("delete_note", {"id": 2}),
        ("read_note", {"id": 1}),
        ("add_note", {"text": "x"}),
    ]
    refusals = events(assern_env, "call_refused", rule="confirm")
    assert [e["outcome"] for e in refusals] == ["decline", "decline"]


async def test_a_client_that_cannot_be_asked_is_refused(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(CONFIRMING + notes_table("notes", "--record", str(record)))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config)) as client:
            refused = await client.call_tool("notes_delete_note", {"id": 2})
            assert refused.is_error
            assert text_of(refused).startswith(
                "The call of notes_delete_note was not sent: it needs the user's confirmation "
                "and this client cannot be asked"
            )
    assert recorded(record) == []


async def test_the_question_goes_to_the_client_that_called_on_a_shared_instance(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(CONFIRMING + notes_table("notes", "--record", str(record)))
    asked: list[str] = []

    Answer = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]

    def callback(who: str, answer: Answer) -> Any:  # the SDK's callback protocol
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(who)
            return await answer(context, params)

        return elicit

    with trio.fail_after(90):
        async with (
            Client(assern_env.serve(config), elicitation_callback=callback("primary", decline)) as first,
            Client(assern_env.serve(config), elicitation_callback=callback("proxied", accept)) as second,
        ):
            assert text_of(await second.call_tool("notes_delete_note", {"id": 1})) == "deleted 1"
            assert (await first.call_tool("notes_delete_note", {"id": 2})).is_error
    assert asked == ["proxied", "primary"]
    assert [c["arguments"] for c in recorded(record)] == [{"id": 1}]
