"""The handshake-era session's pure parts: its results against the SDK's, ids, eras."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp_types import methods as sdk_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.protocol import (
    describe,
    failure_line,
    has_envelope,
    opens_modern,
    request_key,
    result_line,
)

TOOL = types.Tool(
    name="t",
    title="T",
    description="does t",
    input_schema={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    output_schema={"type": "object"},
    annotations=types.ToolAnnotations(read_only_hint=True),
    _meta={"k": "v"},
)

RESULTS: list[tuple[str, BaseModel]] = [
    ("tools/list", types.ListToolsResult(tools=[TOOL], next_cursor="c2")),
    ("tools/list", types.ListToolsResult(tools=[])),
    (
        "tools/call",
        types.CallToolResult(
            content=[
                types.TextContent(type="text", text="héllo"),
                types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
            ],
            structured_content={"a": [1, 2.5, None, "x"]},
            is_error=True,
            _meta={"trace": "t-1"},
        ),
    ),
    (
        "resources/list",
        types.ListResourcesResult(
            resources=[types.Resource(name="r", uri="assern://a/test://r", mime_type="text/plain", size=3)]
        ),
    ),
    (
        "resources/templates/list",
        types.ListResourceTemplatesResult(
            resource_templates=[types.ResourceTemplate(name="t", uri_template="assern://a/x/{id}")]
        ),
    ),
    (
        "resources/read",
        types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri="assern://a/x", text="hi", mime_type="text/plain"),
                types.BlobResourceContents(uri="assern://a/y", blob="aGk="),
            ]
        ),
    ),
    (
        "prompts/list",
        types.ListPromptsResult(
            prompts=[types.Prompt(name="p", arguments=[types.PromptArgument(name="who", required=True)])]
        ),
    ),
    (
        "prompts/get",
        types.GetPromptResult(
            description="d",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text="x"))],
        ),
    ),
    (
        "completion/complete",
        types.CompleteResult(completion=types.Completion(values=["a", "b"], total=2, has_more=False)),
    ),
    ("ping", types.EmptyResult()),
    ("resources/subscribe", types.EmptyResult()),
]


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
@pytest.mark.parametrize(("method", "result"), RESULTS)
def test_results_are_what_the_sdk_sends_a_handshake_era_client(
    method: str, result: BaseModel, version: str
) -> None:
    line = result_line(7, result)
    assert line.endswith(b"\n")
    assert b"\n" not in line[:-1]
    message = json.loads(line)
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == 7
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert message["result"] == sdk_methods.serialize_server_result(method, version, dumped)


def test_a_result_keeps_unicode_as_is() -> None:
    line = result_line("x", types.CallToolResult(content=[types.TextContent(type="text", text="日本")]))
    assert "日本".encode() in line


def test_an_error_line() -> None:
    line = failure_line(3, RpcError(-32602, "bad", {"why": 1}))
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "bad", "data": {"why": 1}},
    }
    assert json.loads(failure_line("a", RpcError(0, "x")))["error"] == {"code": 0, "message": "x"}


@pytest.mark.parametrize(("given", "key"), [(7, 7), ("7", 7), ("a7", "a7"), ("-3", -3), ("", "")])
def test_string_and_number_ids_are_one(given: Any, key: Any) -> None:
    assert request_key(given) == key


META = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}


@pytest.mark.parametrize(
    ("message", "modern"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": META}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": META}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": META}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}, False),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"progressToken": 1}}},
            False,
        ),
        ({"jsonrpc": "2.0", "method": "notifications/initialized", "params": META}, False),
    ],
)
def test_the_first_request_decides_the_era(message: dict[str, Any], modern: bool) -> None:
    parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    assert opens_modern(parsed) is modern


def test_only_the_version_key_marks_the_envelope() -> None:
    assert has_envelope(META)
    assert not has_envelope({"_meta": {"io.modelcontextprotocol/clientInfo": {}}})
    assert not has_envelope({"_meta": "no"})
    assert not has_envelope(None)


def test_what_is_wrong_is_said_in_one_line() -> None:
    with pytest.raises(ValidationError) as invalid:
        types.CallToolRequestParams.model_validate({"name": 5}, by_name=False)
    assert describe(invalid.value) == "name: Input should be a valid string"
