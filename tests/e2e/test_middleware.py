"""The middleware chain end to end, with the official client in both protocol eras: the
three shipped middlewares, an asyncio middleware built on an asyncio-only client library
(through trio-asyncio), and a middleware that raises."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, clients_of_every_era, notes_table
from instances import (
    ctl,
    ctl_json,
    events,
    out,
    reap,  # noqa: F401 - autouse fixture
    text_of,
)
from mcp import Client
from sample_middlewares import approval_service

pytestmark = pytest.mark.e2e

ERAS = ["legacy", "2026-07-28"]
SUPPORT = Path(__file__).resolve().parents[1] / "support"
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"  # what notes_server's `reveal` answers


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("mode", ERAS)
async def test_shipped_middlewares_limit_redact_and_audit_calls(
    assern_env: AssernEnv, write_config: Callable[[str], Path], mode: str, tmp_path: Path
) -> None:
    record, audit = tmp_path / "calls.jsonl", tmp_path / "audit" / "calls.jsonl"
    config = write_config(
        f'[[middleware]]\nuse = "audit"\noptions = {{ path = "{audit}" }}\n\n'
        '[[middleware]]\nuse = "redact"\noptions = { keys = ["password"] }\n\n'
        '[[middleware]]\nname = "echo-limit"\nuse = "rate_limit"\ntools = ["*echo*"]\n'
        "options = { calls = 2, per = 600 }\n\n" + notes_table("notes", "--record", str(record))
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode=mode) as client:
            revealed = await client.call_tool("notes_reveal", {})
            assert text_of(revealed) == "token=[REDACTED]"
            first = await client.call_tool("notes_echo_arguments", {"password": "hunter2", "user": "ann"})
            assert json.loads(text_of(first)) == {"password": "[REDACTED]", "user": "ann"}
            await client.call_tool("notes_echo_arguments", {"n": 2})
            limited = await client.call_tool("notes_echo_arguments", {"n": 3})
            assert limited.is_error
            assert text_of(limited).startswith(
                "Rate limit reached: at most 2 calls per 600 s for notes_echo_arguments. Try again in"
            )
            missing = await client.call_tool("notes_read_note", {"id": 99})
            assert missing.is_error
            # Other tools are not limited.
            assert text_of(await client.call_tool("notes_read_note", {"id": 1})) == "buy milk"
    assert [call["tool"] for call in lines(record)] == [
        "reveal",
        "echo_arguments",
        "echo_arguments",
        "read_note",
        "read_note",
    ]
    audited = lines(audit)
    assert [(line["exposed"], line["outcome"]) for line in audited] == [
        ("notes_reveal", "ok"),
        ("notes_echo_arguments", "ok"),
        ("notes_echo_arguments", "ok"),
        ("notes_echo_arguments", "tool_error"),  # the rate limit's answer, inside the audit
        ("notes_read_note", "tool_error"),
        ("notes_read_note", "ok"),
    ]
    assert all(line["server"] == "notes" and line["client"] == "mcp" for line in audited)
    assert "hunter2" not in audit.read_text()
    assert SECRET not in "".join(json.dumps(event) for event in assern_env.log_events())
    assert len(events(assern_env, "call_refused", rule="rate_limit")) == 1
    assert {e["where"] for e in events(assern_env, "redacted")} == {"result"}
    explained = await ctl(assern_env, "config", "explain", "notes", "--config", str(config))
    assert (
        out(explained)
        .rstrip()
        .endswith(
            "middleware (outermost first):\n  audit: all tools\n  redact: all tools\n"
            "  echo-limit [rate_limit]: *echo*"
        )
    )


async def test_an_asyncio_middleware_runs_an_asyncio_only_library(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    assern_env.env["PYTHONPATH"] = str(SUPPORT)
    with approval_service() as service:
        config = write_config(
            '[[middleware]]\nname = "approval"\nuse = "sample_middlewares:approval"\nasyncio = true\n'
            f'tools = ["*echo*"]\noptions = {{ url = "{service.url}" }}\n\n'
            + notes_table("notes", "--record", str(record))
        )
        with trio.fail_after(90):
            async with clients_of_every_era(assern_env, config) as clients:
                for _, client in clients:
                    approved = await client.call_tool("notes_echo_arguments", {"text": "hello"})
                    assert json.loads(text_of(approved)) == {"text": "HELLO"}
                    refused = await client.call_tool("notes_echo_arguments", {"text": "forbidden"})
                    assert refused.is_error
                    assert text_of(refused) == "not approved: forbidden word"
                    assert text_of(await client.call_tool("notes_read_note", {"id": 1})) == "buy milk"
        assert [body["tool"] for body in service.asked] == ["notes_echo_arguments"] * 4
    assert [call["tool"] for call in lines(record)] == 2 * ["echo_arguments", "read_note"]
    assert len(events(assern_env, "asyncio_loop_started")) == 1  # one loop for every client


async def test_a_raising_middleware_answers_its_call_and_harms_nothing_else(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    assern_env.env["PYTHONPATH"] = str(SUPPORT)
    config = write_config(
        '[[middleware]]\nname = "buggy"\nuse = "sample_middlewares:raising"\ntools = ["*add*"]\n'
        'options = { message = "division by zero, again" }\n\n'
        + notes_table("notes", "--record", str(record))
    )
    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config) as clients:
            for _, client in clients:
                for _ in range(2):
                    failed = await client.call_tool("notes_add_note", {"text": "milk"})
                    assert failed.is_error
                    assert text_of(failed) == (
                        "Middleware 'buggy' failed on notes_add_note: RuntimeError: division by zero, again"
                    )
                assert text_of(await client.call_tool("notes_read_note", {"id": 1})) == "buy milk"
            status = await ctl_json(assern_env, "status", "--config", str(config))
    assert [call["tool"] for call in lines(record)] == ["read_note", "read_note"]
    (notes,) = [b for b in status["backends"] if b["name"] == "notes"]
    assert notes["state"] == "ready"
    assert notes["restarts"] == 0
    failures = events(assern_env, "middleware_failed", middleware="buggy")
    assert len(failures) == 4
    assert failures[0]["error"] == "RuntimeError: division by zero, again"


async def test_a_reload_keeps_a_middlewares_state_and_a_broken_entry_changes_nothing(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    limit = (
        '[[middleware]]\nname = "limit"\nuse = "rate_limit"\ntools = ["*echo*"]\n'
        "options = { calls = 1, per = 600 }\n\n"
    )
    config = write_config(limit + notes_table("notes"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config)) as client:
            assert not (await client.call_tool("notes_echo_arguments", {"n": 1})).is_error
            assert (await client.call_tool("notes_echo_arguments", {"n": 2})).is_error
            # A broken entry: the reload fails, naming it, and the running chain stays.
            config.write_text(
                '[[middleware]]\nuse = "no_such_module:factory"\n\n' + limit + notes_table("notes")
            )
            failed = await wait_for_event(assern_env, "config_reload_failed")
            assert "cannot import 'no_such_module'" in str(failed["error"])
            assert "@ middleware[0].use" in str(failed["error"])
            assert (await client.call_tool("notes_echo_arguments", {"n": 3})).is_error
            assert text_of(await client.call_tool("notes_reveal", {})) == f"token={SECRET}"
            # A good edit adds the redactor; the unchanged limit keeps its counts.
            config.write_text(limit + '[[middleware]]\nuse = "redact"\n\n' + notes_table("notes"))
            await wait_for_event(assern_env, "config_reloaded")
            for _ in range(200):  # the catalog follows the reload within moments
                revealed = text_of(await client.call_tool("notes_reveal", {}))
                if revealed == "token=[REDACTED]":
                    break
                await trio.sleep(0.05)
            assert revealed == "token=[REDACTED]"
            limited = await client.call_tool("notes_echo_arguments", {"n": 4})
            assert text_of(limited).startswith("Rate limit reached: at most 1 calls per 600 s")
            status = await ctl_json(assern_env, "status", "--config", str(config))
    (notes,) = [b for b in status["backends"] if b["name"] == "notes"]
    assert notes["restarts"] == 0  # a middleware change restarts no backend


async def wait_for_event(env: AssernEnv, event: str) -> dict[str, Any]:
    while True:
        found = events(env, event)
        if found:
            return found[-1]
        await trio.sleep(0.05)
