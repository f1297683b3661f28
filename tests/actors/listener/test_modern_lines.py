"""Which 2026-07-28 requests are plain (answered without the SDK's server), and the
`server/discover` result derived as the SDK derives it."""

from __future__ import annotations

from typing import Any

import pytest

from assern.actors.listener.modern_lines import Envelopes, discover_result, plain_request

CAPS = "io.modelcontextprotocol/clientCapabilities"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(
    method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {**(params or {}), "_meta": {**ENVELOPE, **(meta or {})}},
    }


@pytest.mark.parametrize(
    "raw",
    [
        request("server/discover"),
        request("tools/list"),
        request("tools/call", {"name": "a_b", "arguments": {"x": 1}}),
        request("tools/call", {"name": "a_b"}),
        request(
            "tools/call",
            {"name": "a_b", "arguments": None},
            meta={CAPS: {"sampling": {}, "roots": {"listChanged": True}}},
        ),
    ],
)
def test_plain_requests(raw: dict[str, Any]) -> None:
    assert plain_request(raw, Envelopes()) == (7, raw["method"], raw["params"])


@pytest.mark.parametrize(
    "raw",
    [
        request("ping"),  # the SDK's server answers it (Method not found in this era)
        request("resources/list"),
        request("tools/list", {"cursor": "2"}),
        request("tools/call", {"name": 3}),
        request("tools/call", {"name": "a_b", "arguments": []}),
        request("tools/call", {"name": "a_b", "inputResponses": {}}),
        request("tools/call", {"name": "a_b"}, meta={"progressToken": 1}),
        request("tools/list", meta={"io.modelcontextprotocol/logLevel": "debug"}),
        request("tools/list", meta={"io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
        request("tools/list", meta={"io.modelcontextprotocol/clientInfo": {"name": "c"}}),
        request("tools/list", meta={CAPS: {"roots": {"listChanged": 3}}}),
        {**request("tools/list"), "id": True},
        {**request("tools/list"), "id": None},
        {**request("tools/list"), "jsonrpc": "1.0"},
        {**request("tools/list"), "extra": 1},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        [request("tools/list")],
    ],
)
def test_anything_else_is_the_sdk_servers(raw: Any) -> None:
    assert plain_request(raw, Envelopes()) is None


def test_an_envelope_is_validated_once_and_remembered() -> None:
    envelopes = Envelopes()
    assert envelopes.plain(dict(ENVELOPE))
    assert envelopes.plain(dict(ENVELOPE))
    assert not envelopes.plain({**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"version": "1"}})


def test_discover_announces_what_the_methods_serve() -> None:
    everything = discover_result(
        ["tools/list", "resources/list", "prompts/list", "completion/complete", "logging/setLevel"], "Hi."
    )
    assert everything == {
        "cacheScope": "private",
        "ttlMs": 0,
        "capabilities": {
            "completions": {},
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "tools": {"listChanged": True},
        },
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "instructions": "Hi.",
    }
    assert discover_result(["tools/list"], None)["capabilities"] == {"tools": {"listChanged": True}}
