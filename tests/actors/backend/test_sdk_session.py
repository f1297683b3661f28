"""The SDK's `Client` as a backend session (sdk_client.py): what it asks of the SDK."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import mcp_types as types

from assern.actors.backend.hooks import SessionHooks
from assern.actors.backend.sdk_client import SdkSession, routing_headers


class Session:
    def __init__(self) -> None:
        self.pings = 0

    async def send_ping(self) -> types.EmptyResult:
        self.pings += 1
        return types.EmptyResult()


async def test_a_ping_goes_through_the_session_without_a_deprecation_warning() -> None:
    """The SDK's `Client.send_ping` is marked deprecated (2026-07-28 has no ping) and
    warned on assern's stderr at every idle backend's ping; the session's is not."""
    session = Session()
    client = SimpleNamespace(session=session, protocol_version="2025-11-25")

    async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise AssertionError("nothing is asked")

    hooks = SessionHooks(
        list_changed=lambda: None, notify=lambda _n: None, bad_message=lambda _m: None, ask=ask
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await SdkSession(client, hooks).send_ping()  # type: ignore[arg-type]  # a stand-in client
    assert session.pings == 1


def test_routing_headers_come_from_the_session_s_stamp_run_on_a_scratch_copy() -> None:
    seen: list[dict[str, Any]] = []

    def stamp(data: dict[str, Any], opts: dict[str, Any]) -> None:
        seen.append(data)
        data["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
        opts.setdefault("headers", {}).update(
            {"mcp-method": data["method"], "mcp-name": data["params"]["name"]}
        )

    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "h1"}}
    headers = routing_headers(SimpleNamespace(_stamp=stamp))("tools/call", params)
    assert headers == {"mcp-method": "tools/call", "mcp-name": "echo"}
    assert params["_meta"] == {"progressToken": "h1"}  # the request's own envelope, untouched
    assert seen[0]["params"]["arguments"] == {"text": "hi"}
