"""What one real backend's lifecycle and calls log: the right keys, and never a secret."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog.testing
import trio
from content import text_in

from assern.actors.config.spec import ResolvedConfig, ServerSpec, Settings
from assern.actors.listener.inproc import inproc_client
from assern.app.tree import Tree
from assern.supervisor.spec import RestartPolicy

SERVER = Path(__file__).resolve().parents[2] / "servers" / "testing_server.py"
SECRET = "ghp_THIS-MUST-NEVER-BE-LOGGED"


def config() -> ResolvedConfig:
    spec = ServerSpec(
        name="gh",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVER), "--name", "gh", "--tools", "echo,get_env,crash"),
        env={"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": SECRET},
        policy=RestartPolicy(backoff_initial=0.05, backoff_max=0.1),
    )
    return ResolvedConfig(settings=Settings(), servers={"gh": spec}, project=None, files=())


async def test_backend_events_carry_their_keys_and_no_secret() -> None:
    resolved = config()
    capture = structlog.testing.LogCapture()
    # Bound context (actor, server) is part of what is checked, so merge it in first.
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    events = capture.entries
    try:
        await run_and_call(resolved)
    finally:
        structlog.reset_defaults()
    check(events)


async def run_and_call(resolved: ResolvedConfig) -> None:
    with trio.fail_after(60):
        tree = Tree(resolved, lambda: resolved, stdio=False, handle_signals=False)
        async with trio.open_nursery() as nursery:
            await nursery.start(tree.run)
            await tree.settled.wait()
            async with inproc_client(tree.shared, "test-client") as client:
                got = await client.call_tool("gh_get_env", {"name": "GITHUB_TOKEN"})
                assert text_in(got.content[0]) == SECRET
                await client.call_tool("gh_echo", {"text": "hi"})
                try:
                    await client.call_tool("gh_crash", {"code": 5})
                except Exception:
                    pass
                await client.call_tool("gh_echo", {"text": "after restart"})
            tree.shutdown()


def check(events: Sequence[Mapping[str, Any]]) -> None:
    by_event: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        by_event.setdefault(str(event["event"]), []).append(event)
    ready = by_event["backend_ready"][0]
    assert ready["server"] == "gh"
    assert ready["actor"] == "backend"
    assert isinstance(ready["pid"], int)
    call = next(e for e in by_event["tool_call_finished"] if e["tool"] == "echo")
    assert call["server"] == "gh"
    assert isinstance(call["duration_ms"], float)
    exited = by_event["backend_exited"][0]
    assert exited["exit"] == 5
    restart = by_event["backend_restart_scheduled"][0]
    assert restart["restarts"] == 1
    states = [(e["previous"], e["state"]) for e in by_event["backend_state"]]
    assert ("ready", "restarting") in states
    assert ("restarting", "starting") in states
    # The secret reached the backend process, and no log event ever carried it.
    assert SECRET not in json.dumps(events, default=str)
