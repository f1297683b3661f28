"""The 2026-07-28 clients of the HTTP front (stateless.py): one hosted connection per
token and client name, shared by that client's concurrent requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing
from mcp.server.lowlevel.server import Server

from assern.actors.listener.http.stateless import StatelessClients

DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}


def scope() -> dict[str, Any]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "server/discover",
        "host": "127.0.0.1:1",
    }
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "server": ("127.0.0.1", 1),
        "client": ("127.0.0.1", 2),
    }


async def post(clients: StatelessClients) -> int:
    """One stateless request through `clients`; its HTTP status."""
    body = json.dumps(DISCOVER).encode()
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await clients.handle(scope(), receive, send, None, "agent")
    [start] = [m for m in sent if m["type"] == "http.response.start"]
    return int(start["status"])


async def test_a_request_arriving_while_its_client_is_hosted_waits_for_the_running_connection() -> None:
    """The SDK's manager refuses requests until it runs; a request that arrives while the
    first request of its client is still starting the connection must wait for it."""
    hosted: list[str | None] = []
    gate = trio.Event()

    @asynccontextmanager
    async def slow_start(server: Any) -> AsyncIterator[dict[str, Any]]:
        await gate.wait()  # the manager's start, held open
        yield {}

    async def host(name: str | None, *, task_status: trio.TaskStatus[Any]) -> None:
        hosted.append(name)
        task_status.started(SimpleNamespace(server=Server("fake", lifespan=slow_start), lane=None))
        await trio.sleep_forever()

    clients = StatelessClients(host, idle_timeout=lambda: 60.0, max_body=lambda: 1 << 20)
    statuses: list[int] = []

    async def one() -> None:
        statuses.append(await post(clients))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(clients.run)
            async with trio.open_nursery() as requests:
                requests.start_soon(one)
                await trio.testing.wait_all_tasks_blocked()  # the first is starting the manager
                requests.start_soon(one)
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            nursery.cancel_scope.cancel()
    assert hosted == ["agent"]  # one connection for the client, both requests answered
    assert statuses == [200, 200]
