"""The HTTP clients of remote backends (streamable HTTP and HTTP+SSE), under the SDK's transports.

- **Timeouts.** A call is held to its backend's own `timeout`: nothing below it may
  give up first. The HTTP client's read timeout is therefore longer than that (and at
  least the SDK's five minutes for a quiet event stream); httpx's default of 5 s cut
  any call that answered later, as a lost connection.
- **Keep-alive.** The SDK's streamable-HTTP client closes a POST's SSE answer as soon
  as it has read the response event, before the server's end of the stream, and an
  HTTP/1.1 connection closed with its body unread cannot carry the next request: every
  call opened a new TCP connection (and the server accepted one). `KeepAlive` reads
  what is left of such a body when it is closed (the server ends the stream right after
  the response; at most `DRAIN_LIMIT` seconds, off the call's path, since the response
  has been delivered by then), which hands the connection back to the pool.
- **Quiet event streams.** A GET event stream waits for its next event without a read
  timeout: a server may stay silent for as long as nothing happens, and one that goes
  away closes the stream. (With a read timeout, the SDK's client counted each quiet
  spell as a failure and gave the stream up after two, after which the server's
  notifications, `list_changed` among them, no longer reached assern.)
- **Lost server (SSE).** The SDK's SSE client only logs a message it could not post,
  so the call waiting for its answer would wait out its whole timeout; `PostsReachIt`
  reports such a POST as the backend's exit.

Importing this module loads httpx: it is imported only when a remote backend starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

#: the SDK's timeouts for an HTTP transport: 30 s to connect, write or wait for the
#: pool, 5 minutes for a read (an event stream may stay quiet that long)
CONNECT_TIMEOUT = 30.0
READ_TIMEOUT = 300.0
#: how long the rest of a closed POST answer is read before the connection is given up
DRAIN_LIMIT = 1.0


def timeouts(call_timeout: float) -> httpx2.Timeout:
    """The HTTP client's timeouts for a backend whose calls may take `call_timeout` seconds."""
    return httpx2.Timeout(CONNECT_TIMEOUT, read=max(READ_TIMEOUT, call_timeout + CONNECT_TIMEOUT))


def quiet_allowed(request: httpx2.Request) -> httpx2.Request:
    """`request` without a read timeout when it opens an event stream (a GET)."""
    if request.method == "GET":
        timeout = dict(request.extensions.get("timeout", {}))
        timeout["read"] = None
        request.extensions = {**request.extensions, "timeout": timeout}
    return request


class Drained(httpx2.AsyncByteStream):
    """A response body that, closed before its end, is read to its end first (within
    `DRAIN_LIMIT`), so that its connection may carry the next request."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._chunks: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = self._inner.__aiter__()
        async for chunk in self._chunks:
            yield chunk

    async def aclose(self) -> None:
        chunks = self._chunks
        try:
            if chunks is not None:
                with trio.move_on_after(DRAIN_LIMIT):
                    try:
                        async for _ in chunks:
                            pass
                    except httpx2.HTTPError:
                        pass  # the connection broke: nothing to keep
        finally:
            # Also when the drain is cancelled (its call was): the body under it is
            # closed now (its connection given up), not left to the collector.
            with trio.CancelScope(shield=True):
                await self._inner.aclose()


class Wrapping(httpx2.AsyncBaseTransport):
    """A transport around httpx's own (`inner`)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def aclose(self) -> None:
        await self._inner.aclose()


class KeepAlive(Wrapping):
    """httpx's transport, each POST answer `Drained` when it is closed; it notes the
    session id the server gives (for the raw lane, http_lane.py)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(inner)
        #: the `Mcp-Session-Id` of the server's latest answer to a POST that set one
        self.session_id: str | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(quiet_allowed(request))
        if request.method != "POST" or not isinstance(response.stream, httpx2.AsyncByteStream):
            return response  # the GET event stream is closed only to end it
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=Drained(response.stream),
            extensions=response.extensions,
        )


def streamable_client(
    headers: dict[str, str], call_timeout: float, transport: KeepAlive | None = None
) -> httpx2.AsyncClient:
    """The HTTP client of a streamable-HTTP backend (over `transport`, or a new `KeepAlive`)."""
    return httpx2.AsyncClient(
        headers=headers, timeout=timeouts(call_timeout), transport=transport or KeepAlive()
    )


class PostsReachIt(Wrapping):
    """httpx's transport, a POST that cannot reach the server reported to `lost`."""

    def __init__(self, lost: Callable[[str], None], inner: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(inner)
        self._lost = lost

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(quiet_allowed(request))
        except httpx2.NetworkError as exc:  # not a timeout: the server is not there
            if request.method == "POST":
                self._lost(f"could not post to it: {type(exc).__name__}: {exc}")
            raise


def sse_client_factory(lost: Callable[[str], None], call_timeout: float) -> Callable[..., httpx2.AsyncClient]:
    """The SDK SSE transport's `httpx_client_factory` for an HTTP+SSE backend."""

    def factory(
        headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers, timeout=timeouts(call_timeout), auth=auth, transport=PostsReachIt(lost)
        )

    return factory
