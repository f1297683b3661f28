"""The backend pool: one process per backend key for every view, stopped when unused."""

from __future__ import annotations

import os
import sys

import attrs
import pytest
import structlog.testing
import trio

from assern.actors.backend.pool import BackendPool, ViewLink, pool_name
from assern.actors.backend.status import BackendState
from assern.actors.config.spec import Provenance, ServerSpec
from assern.actors.router.actor import RouterMsg
from assern.supervisor.mailbox import open_mailbox


def test_a_pool_name_is_the_first_name_unless_another_backend_has_it() -> None:
    assert pool_name("github", "k1" * 32, {}) == "github"
    assert pool_name("github", "k1" * 32, {"github": "k1" * 32}) == "github"
    assert pool_name("github", "k2" * 32, {"github": "k1" * 32}) == "github~k2k2k2k2"


#: Answers initialize and tools/list (one tool, `pid`) and tools/call with its pid.
BACKEND = """
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        info = {"name": "x", "version": "0"}
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": [{"name": "pid", "inputSchema": {"type": "object"}}]}
    elif "id" in msg:
        result = {}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def spec(name: str, token: str = "one") -> ServerSpec:
    return ServerSpec(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=("-c", BACKEND),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TOKEN": token},
        env_keys_from={"TOKEN": Provenance(layer="global-config", file="config.toml")},
        startup_timeout=20,
    )


def view(pool: BackendPool, label: str) -> tuple[ViewLink, trio.MemoryReceiveChannel[RouterMsg]]:
    send, receive = open_mailbox[RouterMsg](64)
    return pool.join(label, send, lambda _server, _note: None), receive


async def ready(pool: BackendPool, name: str, pokes: trio.MemoryReceiveChannel[RouterMsg]) -> None:
    """Wait for the backend to be ready: each of its changes pokes the view's router."""
    while pool.directory.value[name].state is not BackendState.READY:
        await pokes.receive()


@pytest.mark.e2e
async def test_two_views_share_one_backend_under_their_own_names_until_neither_uses_it() -> None:
    pool = BackendPool()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(pool.run)
            a, pokes = view(pool, "a")
            b, _ = view(pool, "b")
            handles_a = await pool.apply(a, {"gh": spec("gh")})
            handles_b = await pool.apply(b, {"github": attrs.evolve(spec("github"), allowed=("pid",))})
            assert list(pool.directory.value) == ["gh"]  # one backend, the first view's name
            await ready(pool, "gh", pokes)
            assert handles_a["gh"].status.pid == handles_b["github"].status.pid
            assert handles_b["github"].status.server == "github"
            listing = handles_b["github"].listing
            assert listing is not None
            assert (listing.server, listing.allowed) == ("github", ("pid",))
            [shared] = pool.shared()
            assert dict(shared.users) == {"a": "gh", "b": "github"}
            # Another token is another backend.
            await pool.apply(b, {"github": spec("github", token="two")})
            assert sorted(pool.directory.value) == ["gh", "github"]
            assert pool.users("gh") == ["a"]
            with structlog.testing.capture_logs() as logs:
                await pool.leave(a)
                assert list(pool.directory.value) == ["github"]
                await pool.leave(b)
                assert list(pool.directory.value) == []
            nursery.cancel_scope.cancel()
    unused = [entry for entry in logs if entry["event"] == "backend_unused"]
    assert [(e["server"], e["reason"], e["views"]) for e in unused] == [
        ("gh", "view a stopped", []),
        ("github", "view b stopped", []),
    ]
    # gh was ready and idle (never called) when it went; github may still be starting.
    assert unused[0]["state"] == "ready"
    assert unused[0]["idle_s"] >= 0
