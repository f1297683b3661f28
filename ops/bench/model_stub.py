"""A loopback model server for the client benchmarks: it records each request and answers "ok".

It speaks just enough of three providers' wire formats for a client to finish one turn:
OpenAI Responses and Chat Completions (Codex CLI), Gemini `generateContent` and
`streamGenerateContent` (Gemini CLI) and Anthropic Messages (Claude Code), each streamed
(server-sent events) when the request asks for it. Every request body that parses as
JSON is appended to `requests` with its path; `tool_names` reads the tools a request
offers the model, in any of the three formats.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT = "ok"


def tool_names(body: dict[str, Any]) -> list[str]:
    """Every tool name a request offers: OpenAI `tools[].name` (or `function.name`), Gemini
    `tools[].functionDeclarations[].name`, Anthropic `tools[].name`; nested groups included."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            name = node.get("name")
            if isinstance(name, str):
                found.append(name)
            for key in ("function", "functionDeclarations", "function_declarations", "tools"):
                if key in node:
                    walk(node[key])

    walk(body.get("tools", []))
    if not found and isinstance(body.get("request"), dict):  # Gemini's Code Assist envelope
        walk(body["request"].get("tools", []))
    return found


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> Iterator[bytes]:
    for event, data in events:
        head = f"event: {event}\n" if event else ""
        yield f"{head}data: {json.dumps(data)}\n\n".encode()


def openai_responses(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str | None, dict[str, Any]]]]:
    usage = {
        "input_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2,
    }
    item = {
        "type": "message",
        "id": "msg_stub",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
    }
    response = {
        "id": "resp_stub",
        "object": "response",
        "status": "completed",
        "model": body.get("model", "stub"),
        "output": [item],
        "usage": usage,
    }
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            "response.created",
            {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
        ),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_stub",
                "output_index": 0,
                "content_index": 0,
                "delta": TEXT,
            },
        ),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    return response, events


def openai_chat(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str | None, dict[str, Any]]]]:
    model = body.get("model", "stub")
    whole = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    chunk = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": model}
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            None,
            {
                **chunk,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": TEXT}, "finish_reason": None}
                ],
            },
        ),
        (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]
    return whole, events


def from_schema(schema: Any) -> Any:
    """The smallest value a JSON schema (OpenAPI-style types, either case) accepts."""
    if not isinstance(schema, dict):
        return TEXT
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "string")).lower()
    if kind == "object":
        properties = schema.get("properties", {})
        return {key: from_schema(properties.get(key)) for key in schema.get("required", list(properties))}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return TEXT


def gemini(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str | None, dict[str, Any]]]]:
    config = body.get("generationConfig") or {}
    text = TEXT
    if config.get("responseMimeType") == "application/json":  # a side call wanting JSON (routing)
        text = json.dumps(from_schema(config.get("responseJsonSchema") or config.get("responseSchema")))
    whole = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "stub",
    }
    return whole, [(None, whole)]


def anthropic(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str | None, dict[str, Any]]]]:
    model = body.get("model", "stub")
    usage = {"input_tokens": 1, "output_tokens": 1}
    whole = {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": TEXT}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            "message_start",
            {"type": "message_start", "message": {**whole, "content": [], "stop_reason": None}},
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return whole, events


def answer_for(
    path: str, body: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str | None, dict[str, Any]]], bool]:
    """The whole answer, its stream of events, and whether the request asked for a stream."""
    route = path.split("?", 1)[0]
    if route.endswith("/responses"):
        whole, events = openai_responses(body)
        return whole, events, bool(body.get("stream"))
    if route.endswith("/chat/completions"):
        whole, events = openai_chat(body)
        return whole, events, bool(body.get("stream"))
    if ":generateContent" in route or ":streamGenerateContent" in route:
        whole, events = gemini(body)
        return whole, events, ":streamGenerateContent" in route
    if route.endswith("/messages/count_tokens"):
        return {"input_tokens": 1}, [], False
    if route.endswith("/messages"):
        whole, events = anthropic(body)
        return whole, events, bool(body.get("stream"))
    if ":countTokens" in route:
        return {"totalTokens": 1}, [], False
    return {}, [], False


class ModelStub:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) that records and answers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
                return

            def do_GET(self) -> None:
                self._send(200, {"data": [], "models": []})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else self._chunked()
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "the body is not JSON"}})
                    return
                if not isinstance(body, dict):
                    self._send(400, {"error": {"message": "the body is not a JSON object"}})
                    return
                with stub._lock:
                    stub.requests.append({"path": self.path, "body": body})
                whole, events, stream = answer_for(self.path, body)
                if not stream:
                    self._send(200, whole)
                    return
                payload = b"".join(_sse(events))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _chunked(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return b""
                parts: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()

            def _send(self, status: int, data: dict[str, Any]) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ModelStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def taken(self) -> list[dict[str, Any]]:
        """The requests recorded so far, and forget them."""
        with self._lock:
            done, self.requests = self.requests, []
        return done
