"""The loopback model stub of the client first-turn benchmark (ops/bench/model_stub.py):
it records each request and answers it in the provider's own format, whole or streamed,
and the benchmark reads the tools a client's first turn offers (client_first_turn.py).
No client is needed: the requests are the shapes those clients send."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops" / "bench"))
import client_first_turn
from model_stub import ModelStub, tool_names


@pytest.fixture
def stub() -> Iterator[ModelStub]:
    with ModelStub() as running:
        yield running


def post(stub: ModelStub, path: str, body: Any) -> tuple[str, bytes]:
    """The answer's content type and body."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        stub.url + path, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["Content-Type"], answer.read()


def events(payload: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """Server-sent events: (event name or None, its data)."""
    found = []
    for block in payload.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((fields.get("event"), json.loads(fields["data"])))
    return found


def test_openai_responses_whole_and_streamed(stub: ModelStub) -> None:
    body = {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "notes_add_note"}]}
    kind, whole = post(stub, "/v1/responses", body)
    assert kind == "application/json"
    answer = json.loads(whole)
    assert answer["status"] == "completed"
    assert answer["output"][0]["content"][0]["text"] == "ok"
    kind, streamed = post(stub, "/v1/responses", {**body, "stream": True})
    assert kind == "text/event-stream"
    names = [name for name, _ in events(streamed)]
    assert names[0] == "response.created"
    assert names[-1] == "response.completed"
    assert "response.output_text.delta" in names


def test_openai_chat_whole_and_streamed(stub: ModelStub) -> None:
    body = {"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "calc_add"}}]}
    answer = json.loads(post(stub, "/v1/chat/completions", body)[1])
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "ok"}
    chunks = [data for _, data in events(post(stub, "/v1/chat/completions", {**body, "stream": True})[1])]
    assert chunks[0]["choices"][0]["delta"]["content"] == "ok"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_gemini_whole_streamed_and_a_json_side_call(stub: ModelStub) -> None:
    body = {"contents": [], "tools": [{"functionDeclarations": [{"name": "mcp_assern_calc_add"}]}]}
    answer = json.loads(post(stub, "/v1beta/models/m:generateContent", body)[1])
    assert answer["candidates"][0]["content"]["parts"] == [{"text": "ok"}]
    kind, streamed = post(stub, "/v1beta/models/m:streamGenerateContent?alt=sse", body)
    assert kind == "text/event-stream"
    [(_, chunk)] = events(streamed)
    assert chunk["candidates"][0]["finishReason"] == "STOP"
    # A side call that wants JSON of a schema (a model router) gets the smallest value of it.
    schema = {
        "type": "OBJECT",
        "properties": {
            "reasoning": {"type": "STRING"},
            "model_choice": {"type": "STRING", "enum": ["flash", "pro"]},
        },
        "required": ["reasoning", "model_choice"],
    }
    routed = {
        "contents": [],
        "generationConfig": {"responseMimeType": "application/json", "responseSchema": schema},
    }
    text = json.loads(post(stub, "/v1beta/models/m:generateContent", routed)[1])["candidates"][0]["content"][
        "parts"
    ][0]["text"]
    assert json.loads(text) == {"reasoning": "ok", "model_choice": "flash"}


def test_anthropic_messages_whole_and_streamed(stub: ModelStub) -> None:
    body = {"model": "m", "messages": [], "tools": [{"name": "mcp__assern__time_get_current_time"}]}
    answer = json.loads(post(stub, "/v1/messages?beta=true", body)[1])
    assert answer["content"] == [{"type": "text", "text": "ok"}]
    assert answer["stop_reason"] == "end_turn"
    names = [name for name, _ in events(post(stub, "/v1/messages?beta=true", {**body, "stream": True})[1])]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert json.loads(post(stub, "/v1/messages/count_tokens", body)[1]) == {"input_tokens": 1}


def test_each_request_is_recorded_once_and_taken(stub: ModelStub) -> None:
    post(stub, "/v1/responses", {"input": "one"})
    post(stub, "/v1beta/models/m:generateContent", {"contents": "two"})
    taken = stub.taken()
    assert [(r["path"], r["body"]) for r in taken] == [
        ("/v1/responses", {"input": "one"}),
        ("/v1beta/models/m:generateContent", {"contents": "two"}),
    ]
    assert stub.taken() == []


def test_a_body_that_is_no_json_object_is_refused_and_not_recorded(stub: ModelStub) -> None:
    for body in (b"{not json", b"[1, 2]"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(stub, "/v1/responses", body)
        assert refused.value.code == 400
        assert "error" in json.loads(refused.value.read())
    assert stub.taken() == []


def test_tool_names_in_each_format() -> None:
    assert tool_names({"tools": [{"type": "function", "name": "a"}, {"type": "web_search"}]}) == ["a"]
    assert tool_names({"tools": [{"type": "function", "function": {"name": "b"}}]}) == ["b"]
    assert tool_names({"tools": [{"functionDeclarations": [{"name": "c"}, {"name": "d"}]}]}) == ["c", "d"]
    assert tool_names({"request": {"tools": [{"function_declarations": [{"name": "e"}]}]}}) == ["e"]
    assert tool_names({"tools": [{"name": "f", "input_schema": {}}]}) == ["f"]
    assert tool_names({"messages": []}) == []


def test_the_first_turn_is_the_first_request_with_the_prompt_and_tools() -> None:
    prompt = client_first_turn.PROMPT
    side = {"path": "/route", "body": {"contents": [{"parts": [{"text": prompt}]}]}}
    warmup = {"path": "/w", "body": {"input": "hello", "tools": [{"name": "shell"}]}}
    turn = {
        "path": "/t",
        "body": {"input": prompt, "tools": [{"name": "shell"}, {"name": "mcp__assern__calc_add"}]},
    }
    assert client_first_turn.first_turn([side, warmup, turn, dict(turn)]) is turn
    assert client_first_turn.first_turn([side, warmup]) is None


def test_assern_tools_are_found_under_a_clients_prefix() -> None:
    expected = ["calc_add", "calc_sqrt", "notes_add_note"]
    offered = ["shell", "mcp__assern__calc_add", "mcp_assern_notes_add_note", "calc_sqrt_more"]
    assert client_first_turn.offered(expected, offered) == ["calc_add", "notes_add_note"]
