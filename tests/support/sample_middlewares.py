"""Middlewares the tests configure with `use = "sample_middlewares:NAME"` (the end-to-end
tests put this folder on the assern process's PYTHONPATH, as a user would their own)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import aiohttp
import mcp_types as types

from assern.actors.gate.middleware import Call, Next


def raising(options: Mapping[str, Any]) -> Any:
    """A middleware that fails on every call (`message` in its options)."""
    message = str(options.get("message", "middleware bug"))

    async def middleware(call: Call, next_: Next) -> types.CallToolResult:
        raise RuntimeError(message)

    return middleware


def approval(options: Mapping[str, Any]) -> Any:
    """An asyncio middleware: asks an HTTP approval service (aiohttp, asyncio-only) about
    each call. The service answers {"allow": bool, "reason": str, "arguments": {...}?}."""
    url = options["url"]

    async def middleware(call: Call, next_: Any) -> types.CallToolResult:
        loop = asyncio.get_running_loop()  # raises unless this runs on an asyncio loop
        assert asyncio.current_task(loop) is not None
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, json={"tool": call.exposed, "arguments": dict(call.arguments)}) as reply,
        ):
            verdict = await reply.json()
        if not verdict["allow"]:
            text = f"not approved: {verdict['reason']}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        if "arguments" in verdict:
            call = call.with_arguments(verdict["arguments"])
        result: types.CallToolResult = await next_(call)  # awaited on asyncio, run on trio
        return result

    return middleware


class ApprovalService:
    """A small HTTP approval service in a thread: refuses calls whose arguments hold
    "forbidden", upper-cases a "text" argument, and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                service.asked.append(body)
                arguments = body["arguments"]
                if "forbidden" in json.dumps(arguments):
                    verdict: dict[str, Any] = {"allow": False, "reason": "forbidden word"}
                else:
                    verdict = {"allow": True, "reason": "ok"}
                    if isinstance(arguments.get("text"), str):
                        verdict["arguments"] = {**arguments, "text": arguments["text"].upper()}
                data = json.dumps(verdict).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/approve"


@contextmanager
def approval_service() -> Iterator[ApprovalService]:
    service = ApprovalService()
    thread = threading.Thread(target=service.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        service.server.shutdown()
        service.server.server_close()
