"""Which parts of a client's request `_meta` travel on to the backend with its call."""

from __future__ import annotations

from assern.actors.listener.context import end_to_end_meta


def test_the_clients_own_keys_go_on() -> None:
    meta = {"trace": "t-1", "com.example/tenant": "acme", "nested": {"a": [1, 2]}}
    assert end_to_end_meta(meta) == meta


def test_the_progress_token_stays_behind() -> None:
    assert end_to_end_meta({"progressToken": 7, "trace": "t"}) == {"trace": "t"}
    assert end_to_end_meta({"progress_token": 7}) is None


def test_the_protocols_own_keys_stay_behind() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        "modelcontextprotocol.io/anything": 1,
        "dev.mcp/thing": 2,
        "tools.mcp.com/x": 3,
        "trace": "t",
    }
    assert end_to_end_meta(meta) == {"trace": "t"}


def test_names_that_only_look_alike_go_on() -> None:
    meta = {"mcpish.dev/x": 1, "example.com/modelcontextprotocol": 2, "mcp": 3}
    assert end_to_end_meta(meta) == meta


def test_nothing_left_is_none() -> None:
    assert end_to_end_meta(None) is None
    assert end_to_end_meta({}) is None
