"""The status page's ASGI application: the page, its sign-in, its script and its events.

- `GET /login?code=CODE`: a code minted by `assernctl web` (codes.py) is used up and
  answered with the page's cookie and a redirect to `/`, so the address that stays in
  the browser's history carries no key. A wrong, used or expired code is refused.
- `GET /` (`?level=warning` filters the log tail): the whole page, rendered on the
  server (render.py); it needs the cookie.
- `GET /events` (the same query): server-sent events, one `parts` event with every
  part at once, then one with the parts that changed, every `interval` seconds, for
  as long as the page is open. Nothing is computed while no page is open: the only
  work is this loop, one per open page (at most `MAX_STREAMS`).
- `GET /page.js`, `GET /page.css`, `GET /favicon.svg`: the live script, the style and
  the icon (static/).

Every request passes guard.py first (loopback peer, the page's own Host, no foreign
Origin, GET only); every answer carries its security headers (a strict
Content-Security-Policy among them). Refusals are logged as `page_refused` with a
reason, never with a key.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import structlog
import trio

from assern.actors.listener.http.refusal import Refusal
from assern.actors.listener.http.responses import (
    encoded,
    lifespan,
    open_stream,
    request_headers,
    send_body,
    send_more,
)
from assern.actors.listener.page import render
from assern.actors.listener.page.guard import HEADERS, check, cookie_of, set_cookie

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from assern.actors.listener.page.codes import Keys

log = structlog.get_logger()

#: Seconds between two looks at the status while a page is open.
INTERVAL = 1.0
#: Pages open at once at most (each is one loop reading the status).
MAX_STREAMS = 8
#: The log's last lines the page shows.
LOG_LINES = 40
#: Seconds of silence on the event stream before a comment keeps it open.
KEEPALIVE_EVERY = 15.0

HTML = b"text/html; charset=utf-8"
TEXT = b"text/plain; charset=utf-8"
_STATIC = Path(__file__).resolve().parent / "static"
_FILES = {
    "/page.js": ("page.js", b"text/javascript; charset=utf-8"),
    "/page.css": ("page.css", b"text/css"),
    "/favicon.svg": ("favicon.svg", b"image/svg+xml"),
}


@functools.cache
def _static(name: str) -> bytes:
    """A file of static/, read once (a few hundred bytes each)."""
    return (_STATIC / name).read_bytes()


#: The status document (what the control socket's `status` answers).
Status = Callable[[], Awaitable[Mapping[str, Any]]]
#: The log's last `count` events at `level` and above, oldest first.
LogTail = Callable[[str | None, int], Awaitable[Sequence[Mapping[str, Any]]]]


class PageApp:
    """The ASGI application the page's server runs.

    Args:
        keys: The codes and cookies.
        port: The port the page is served on (Host and Origin must name it).
        status: Reads the status document.
        logs: Reads the log's last lines.
        interval: Seconds between two updates of an open page.
    """

    def __init__(
        self, *, keys: Keys, port: int, status: Status, logs: LogTail, interval: float = INTERVAL
    ) -> None:
        self.keys = keys
        self.port = port
        self._status = status
        self._logs = logs
        self._interval = interval
        self.streams = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = request_headers(scope)
        client = scope.get("client")
        refusal = check(scope["method"], headers, client[0] if client else None, self.port)
        if refusal is not None:
            await self._refuse(send, refusal)
            return
        path = scope["path"]
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if path == "/login":
            await self._login(send, query)
        elif path in _FILES:
            name, kind = _FILES[path]
            await self._answer(send, 200, _static(name), kind)
        elif path in ("/", "/events"):
            if not self.keys.admits(cookie_of(headers.get("cookie"))):
                await self._refuse(send, Refusal(401, "not signed in: run `assernctl web`", "no_cookie"))
                return
            level = (query.get("level") or [None])[-1]
            if level is not None and level not in render.LEVELS:
                known = ", ".join(render.LEVELS)
                why = f"unknown level {level!r}; use one of {known}"
                await self._refuse(send, Refusal(400, why, "bad_level"))
            elif path == "/":
                await self._page(send, level)
            else:
                await self._events(receive, send, level)
        else:
            await self._answer(send, 404, f"nothing at {path}; the page is at /".encode(), TEXT)

    # ------------------------------------------------------------------ answers

    async def _answer(
        self, send: Send, status: int, body: bytes, kind: bytes, extra: Sequence[tuple[str, str]] = ()
    ) -> None:
        await send_body(send, status, body, content_type=kind, headers=encoded((*HEADERS, *extra)))

    async def _refuse(self, send: Send, refusal: Refusal) -> None:
        log.warning("page_refused", reason=refusal.reason, status=refusal.status)
        body = f"{refusal.status}: {refusal.message}\n".encode()
        await self._answer(send, refusal.status, body, TEXT, refusal.headers)

    async def _login(self, send: Send, query: Mapping[str, list[str]]) -> None:
        codes = query.get("code") or []
        token = self.keys.redeem(codes[-1]) if len(codes) == 1 else None
        if token is None:
            why = "this code is unknown, used or expired: run `assernctl web` for a new one"
            await self._refuse(send, Refusal(403, why, "bad_code"))
            return
        log.info("page_signed_in")
        await self._answer(send, 303, b"", TEXT, (("location", "/"), ("set-cookie", set_cookie(token))))

    async def _parts(self, level: str | None) -> tuple[dict[str, str], float]:
        doc = await self._status()
        events = await self._logs(level or "info", LOG_LINES)
        now = time.time()
        return render.sections(doc, events, now), now

    async def _page(self, send: Send, level: str | None) -> None:
        parts, now = await self._parts(level)
        page = render.document(parts, level=level, now=now, title="assern")
        await self._answer(send, 200, page.encode(), HTML)

    async def _events(self, receive: Receive, send: Send, level: str | None) -> None:
        if self.streams >= MAX_STREAMS:
            await self._refuse(send, Refusal(429, f"at most {MAX_STREAMS} pages may be open", "too_many"))
            return
        self.streams += 1
        try:
            await open_stream(send, encoded(HEADERS))
            async with trio.open_nursery() as nursery:

                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until_gone)
                await self._stream(send, level)
        finally:
            self.streams -= 1

    async def _stream(self, send: Send, level: str | None) -> None:
        shown: dict[str, str] = {}
        quiet_since = trio.current_time()
        while True:
            parts, _ = await self._parts(level)
            fresh = render.changed(shown, parts)
            if fresh:
                data = json.dumps(fresh, separators=(",", ":")).encode()
                await send_more(send, b"event: parts\ndata: " + data + b"\n\n")
                shown, quiet_since = parts, trio.current_time()
            elif trio.current_time() - quiet_since >= KEEPALIVE_EVERY:
                await send_more(send, b": ping\n\n")
                quiet_since = trio.current_time()
            await trio.sleep(self._interval)
