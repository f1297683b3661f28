"""The floor of the HTTP benchmark: the least any front served by hypercorn's trio
worker adds before its backend, measured next to assern in the same run.

    python ops/bench/http/floor.py --port 0 -- python ops/bench/bench_server.py   # stdio
    python ops/bench/http/floor.py --port 0 --url http://127.0.0.1:8765/mcp         # HTTP

It is not an aggregator: one backend, no names, no checks, no logs, no metrics, no
sessions of its own, no server-to-client stream. Each POST to `/mcp` goes to the backend
as it came, and its answer back as it came:

- a stdio backend gets the body as one line on its stdin; a request's POST is answered
  with the backend's line that carries its id (JSON), a notification or a response
  with 202. Handshake-era clients initialize the backend itself through it.
- an HTTP backend gets the POST re-sent on one kept-alive connection, with the headers
  the protocol reads (session, version, the 2026-07-28 routing headers); its status,
  session and content type come back with its whole body (an SSE answer too: it ends
  with the response).
- GET (a handshake-era client's stream for server requests) is answered 405, which the
  specification allows; DELETE goes to an HTTP backend, and is 202 for a stdio one.

Whatever assern adds above this figure is its own; what this adds over a direct
connection no front under the same server can avoid on this machine. It prints
`floor at http://127.0.0.1:PORT/mcp` on stderr once it listens.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import httpx2 as httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

#: Request headers an MCP server reads, passed on to an HTTP backend (with every `mcp-*`
#: one: session, version, the 2026-07-28 routing headers).
PASSED = ("content-type", "accept", "last-event-id")
#: Response headers passed back to the client.
RETURNED = ("content-type", "mcp-session-id")


class StdioBackend:
    """One stdio backend: lines out, answers matched to their requests by id."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._waiting: dict[Any, tuple[trio.Event, list[bytes]]] = {}
        self._lock = trio.Lock()

    async def pump(self) -> None:
        """Read the backend's lines; hand each answer to the POST waiting for it."""
        buffer = b""
        while chunk := await self._stdout.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                waiter = self._waiting.pop(message.get("id"), None) if "method" not in message else None
                if waiter is not None:
                    waiter[1].append(line)
                    waiter[0].set()

    async def post(self, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        message = json.loads(body)
        request = isinstance(message, dict) and "method" in message and "id" in message
        waiter: tuple[trio.Event, list[bytes]] | None = None
        if request:
            waiter = self._waiting[message["id"]] = (trio.Event(), [])
        async with self._lock:
            await self._stdin.send_all(body.strip().replace(b"\n", b" ") + b"\n")
        if waiter is None:
            return 202, [], b""
        await waiter[0].wait()
        return 200, [(b"content-type", b"application/json")], waiter[1][0]


class HttpBackend:
    """One streamable-HTTP backend, reached on one kept-alive client."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self._client = client
        self._url = url

    async def send(
        self, method: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        named = ((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in headers)
        passed = {k: v for k, v in named if k in PASSED or k.startswith("mcp-")}
        answer = await self._client.request(method, self._url, headers=passed, content=body)
        returned = [(k.encode(), v.encode()) for k, v in answer.headers.items() if k.lower() in RETURNED]
        return answer.status_code, returned, answer.content


def make_app(stdio: StdioBackend | None, http: HttpBackend | None) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method = scope["method"]
        if method not in ("POST", "DELETE"):  # GET too: no stream for server requests
            status, extra, out = 405, [], b""
        elif http is not None:
            status, extra, out = await http.send(method, scope["headers"], body)
        elif method == "DELETE":
            status, extra, out = 202, [], b""
        else:
            assert stdio is not None
            status, extra, out = await stdio.post(body)
        raw = [*extra, (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": out})

    return app


async def main(port: int, url: str | None, command: list[str]) -> None:
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    async with trio.open_nursery() as nursery:
        if url is not None:
            async with httpx.AsyncClient(timeout=60) as client:
                binds = await nursery.start(serve, make_app(None, HttpBackend(client, url)), config)
                print(f"floor at {binds[0]}/mcp", file=sys.stderr, flush=True)
                await trio.sleep_forever()
        process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        stdio = StdioBackend(process)  # it ends with our stdin: at the floor's own end
        nursery.start_soon(stdio.pump)
        binds = await nursery.start(serve, make_app(stdio, None), config)
        print(f"floor at {binds[0]}/mcp", file=sys.stderr, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="loopback port (0: any)")
    parser.add_argument("--url", help="a streamable-HTTP backend instead of a stdio one")
    parser.add_argument("command", nargs="*", help="the stdio backend's command (after --)")
    args = parser.parse_args()
    if (args.url is None) == (not args.command):
        parser.error("give a stdio backend's command or --url, not both")
    trio.run(main, args.port, args.url, args.command)
