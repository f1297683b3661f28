"""Grouped exposure end to end: one tool per server with the merged schema, calls by
action on both eras, strict rejections naming the action's own fields, cross-server
groups, and `assernctl list --profile` showing the grouped view."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, clients_of_every_era, notes_table, server_table
from instances import (
    ctl_json,
    reap,  # noqa: F401 - autouse fixture
    text_of,
)
from mcp import Client

pytestmark = pytest.mark.e2e


async def test_one_tool_per_server_routes_each_action(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    config = write_config(
        '[settings]\nexposure = "grouped"\n\n'
        + notes_table("notes", "--record", str(record))
        + server_table("alpha")
    )
    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config) as clients:
            for _, client in clients:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert list(tools) == ["notes", "alpha"]
                notes = tools["notes"]
                schema = notes.input_schema
                assert schema["required"] == ["action"]
                assert schema["properties"]["action"]["enum"][:4] == [
                    "list_notes",
                    "read_note",
                    "add_note",
                    "delete_note",
                ]
                assert schema["properties"]["text"]["description"] == (
                    "What to remember. Required for: add_note, miscount"
                )
                branches = schema["properties"]["id"]["anyOf"]
                assert [branch["type"] for branch in branches] == ["integer", "string"]
                assert "- delete_note: Delete a note for good. [DESTRUCTIVE]" in (notes.description or "")
                assert notes.annotations is not None
                assert notes.annotations.destructive_hint is True
                read = await client.call_tool("notes", {"action": "read_note", "id": 1})
                assert text_of(read) == "buy milk"
                assert read.structured_content == {"id": 1, "text": "buy milk"}
                assert text_of(await client.call_tool("alpha", {"action": "echo", "text": "hi"})) == "hi"
                # strict by default: a field of another action is unknown to this one
                wrong = await client.call_tool("notes", {"action": "read_note", "id": 1, "tag": "x"})
                assert wrong.is_error
                assert '$.tag: unknown field "tag"' in text_of(wrong)
                unknown = await client.call_tool("notes", {"action": "read_notes", "id": 1})
                assert unknown.is_error
                assert 'unknown action "read_notes". Did you mean `read_note`?' in text_of(unknown)
                # the flat names stay callable
                assert text_of(await client.call_tool("alpha_echo", {"text": "flat"})) == "flat"
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls == 2 * [{"tool": "read_note", "arguments": {"id": 1}}]


async def test_groups_gather_tools_across_servers_and_ctl_lists_them(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(
        '[profiles.grouped]\nmatch = ["grouper"]\nexposure = "grouped"\n\n'
        '[groups.reading]\ntools = ["*_read_note", "*_list_notes", "alpha_echo"]\n'
        'description = "Read notes and echo."\n\n'
        + notes_table("notes")
        + server_table("alpha", "--tools", "echo,add")
    )
    at = ("--config", str(config))
    info = types.Implementation(name="grouper", version="1")
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), client_info=info) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "reading" in tools
            assert "alpha_add" in tools  # in no group: listed as itself
            reading = tools["reading"]
            assert reading.input_schema["properties"]["action"]["enum"] == [
                "notes.list_notes",
                "notes.read_note",
                "alpha.echo",
            ]
            assert (reading.description or "").startswith("Read notes and echo.")
            answer = await client.call_tool("reading", {"action": "alpha.echo", "text": "across"})
            assert text_of(answer) == "across"
            listed = await ctl_json(assern_env, "list", "--profile", "grouped", *at)
    rows = {row["name"]: row for row in listed["tools"]}
    assert rows["reading"]["server"] == "notes, alpha"
    assert rows["reading"]["description"] == "actions: notes.list_notes, notes.read_note, alpha.echo"
    assert "alpha_add" in rows
    assert "alpha_echo" not in rows
