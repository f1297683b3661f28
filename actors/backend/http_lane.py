"""The raw lane to a streamable-HTTP backend: a request's JSON posted in the SDK's session.

A tools/call that a client sent as JSON (the raw lanes, actors/listener/raw_lane.py
and modern_lane.py) reaches a stdio backend as that JSON and comes back as the JSON
the backend wrote. To an HTTP backend it went through the SDK's client instead: its
models built and checked on the way out and back, and its transport's task per
message, about twice the CPU of the POST itself. `PostLane.request` posts the request
straight to the backend's endpoint, with the id, session and protocol version of
the SDK session that holds the connection (its `Mcp-Session-Id` and
`MCP-Protocol-Version`), on the same HTTP client and kept-alive connections, and
returns the result as the backend wrote it, as `Forwarder.request` does over stdio.

What the answer carries besides the response (the POST's SSE stream):
- progress notifications for the request go to its progress sink;
- every other message (a log message, `list_changed`, a server-to-client request
  such as sampling or roots) is handed to the SDK session (`inject`) as if its
  transport had read it: the session's callbacks route it, and the session posts the
  answer to a request itself;
- a stream that ends before the response, after events with ids, is resumed with a
  GET carrying `Last-Event-ID` (after the server's `retry` interval), as the SDK's
  client does, the server's polling streams (2025-11-25) included;
- once the response is in, the call returns; the rest of the stream (a server closes
  it right after the response) is read by a task of its own (`_rest`), so that its
  kept-alive connection carries the next request and a late message still goes on.

Its ends:
- the client cancels: the POST is dropped and the backend is sent
  `notifications/cancelled` for the request, as the handshake era asks;
- the backend answers a JSON-RPC error (in the body of any status): `RpcError`;
- the backend no longer knows the session (HTTP 404), or cannot be reached: the
  connection is lost, `lost` is told (the backend's exit: it is restarted) and the
  call fails with `ForwardLost`;
- a redirect within the endpoint's origin that keeps the method (307/308) is
  followed, as the SDK's client follows one; any other is not;
- any other status, a 202, an answer that is not JSON, a stream that ends without
  the response or breaks a limit: `RpcError` naming it.

A 2026-07-28 session takes the lane too, for the requests assern writes raw to such a
backend (sdk_client.py): each carries the envelope in its `_meta` and the headers of
that revision, which the SDK session computes (`headers_of`: `Mcp-Method`, `Mcp-Name`,
the `Mcp-Param-*` its tool's schema asks for); it has no session, and its cancellation
is the dropped POST alone.

Importing this module loads httpx: it is imported only when a remote backend starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import attrs
import httpx2
import mcp_types as types
import structlog
import trio
from mcp.shared._httpx_utils import next_request_within_origin, redirect_note

from assern.actors.backend.forward import ForwardLost, error_of
from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable, Callable

    from assern.actors.backend.messages import ProgressSink

log = structlog.get_logger()

#: why a session's request answered 404 ends the connection (the server forgot the session)
FORGOTTEN = "the server no longer knows assern's session (HTTP 404)"
#: how long the notice of a cancelled request may take to post (the cancelled call waits)
CANCEL_NOTICE_LIMIT = 1.0
#: the largest SSE event of an answer (the SDK client's own limit)
MAX_EVENT_SIZE = 1024 * 1024
#: how long the rest of an SSE answer is read after the response (a server closes the
#: stream right after it; one that does not is left after this, its connection dropped)
DRAIN_LIMIT = 1.0
#: how many times a stream that ends before the response is resumed without progress,
#: and the wait before each when the server names none (the SDK client's own choices)
MAX_RESUMES = 2
DEFAULT_RETRY_MS = 1000


class PostLane:
    """Requests posted straight to one streamable-HTTP backend, in an SDK session's session.

    Args:
        client: The session's HTTP client (its headers, timeouts and connection pool).
        url: The backend's MCP endpoint.
        session_id: The session's `Mcp-Session-Id` (None if the server gave none).
        protocol_version: The version the session negotiated (a handshake-era one).
        inject: Hands a message of the answer that is not this request's to the SDK
            session, as if its transport had read it.
        lost: Told why, once the connection to the backend is lost.
        spawn: Starts a task that outlives the call (`nursery.start_soon` of the
            session's transport): it reads what an SSE answer carries after the response.
        headers_of: For a 2026-07-28 session, the headers a request of that revision
            carries (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), from its method and
            params; such a request is cancelled by dropping its POST alone (that
            revision has no client-to-server notification). None on a handshake-era session.
    """

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        *,
        session_id: str | None,
        protocol_version: str,
        inject: Callable[[Any], Awaitable[None]],
        lost: Callable[[str], None],
        spawn: Callable[..., object],
        headers_of: Callable[[str, dict[str, Any]], dict[str, str]] | None = None,
    ) -> None:
        self._client = client
        self._url = url
        self._inject = inject
        self._lost = lost
        self._spawn = spawn
        self._headers_of = headers_of
        self._session = bool(session_id)
        self._headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": protocol_version,
        }
        if session_id:
            self._headers["mcp-session-id"] = session_id
        self._next = 0

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """Post one request and return its result dict, as the backend wrote it.

        Raises RpcError for an error response (or an answer that is not one) and
        ForwardLost when the connection to the backend is lost. On cancellation the POST
        is dropped and, on a handshake-era session, the backend is sent
        `notifications/cancelled` for the request.
        """
        self._next += 1
        request_id = f"h{self._next}"  # never one of the SDK's integer ids
        if progress is not None:
            meta = dict((params or {}).get("_meta") or {})
            meta["progressToken"] = request_id
            params = {**(params or {}), "_meta": meta}
        body = framing.request(request_id, method, params)
        headers = self._headers
        if self._headers_of is not None:
            headers = {**headers, **self._headers_of(method, params or {})}
        post = self._client.build_request("POST", self._url, content=body, headers=headers)
        try:
            response = await self._send(post)
            try:
                message = await self._answer(response, request_id, progress)
            except BaseException:
                await response.aclose()
                raise
        except trio.Cancelled:
            if self._headers_of is None:  # the handshake era's notice (2026-07-28: the drop says it)
                with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_NOTICE_LIMIT):
                    await self._notify_cancelled(request_id)
            raise
        except httpx2.TimeoutException as exc:
            raise RpcError(types.INTERNAL_ERROR, f"the server did not answer in time: {exc}") from None
        except httpx2.SSEError as exc:  # an event past the size limit, say: this answer only
            raise RpcError(types.INTERNAL_ERROR, f"the server's event stream failed: {exc}") from None
        except httpx2.HTTPError as exc:
            raise self._gone(f"could not post to it: {type(exc).__name__}: {exc}") from None
        if "result" not in message:
            raise error_of(message)
        result = message["result"]
        if not isinstance(result, dict):
            raise RpcError(types.INTERNAL_ERROR, f"the backend's {method} result is not a JSON object")
        return result

    async def _send(self, request: httpx2.Request) -> httpx2.Response:
        """`request` sent, its answer streamed; a redirect followed as the SDK's client
        follows one (within the endpoint's origin, keeping the method: a 307/308
        trailing-slash normalisation, say), any other handed back as it is."""
        followed = 0
        while True:
            response = await self._client.send(request, stream=True, follow_redirects=False)
            following = next_request_within_origin(response)
            if following is None or followed == self._client.max_redirects:
                return response
            try:
                await response.aread()  # the redirect's body: its connection goes back to the pool
            finally:
                await response.aclose()
            request, followed = following, followed + 1

    def _gone(self, why: str) -> ForwardLost:
        self._lost(why)
        return ForwardLost(why)

    async def _answer(
        self, response: httpx2.Response, request_id: str, progress: ProgressSink | None
    ) -> dict[str, Any]:
        """The response message to `request_id` in `response` (a dict with `result` or `error`).

        `response` is closed here once read, except an SSE stream that goes on after the
        response: that is left to `_rest` (off the call's path), and closed there.
        """
        status = response.status_code
        kind = _media_type(response)
        if status == 404 and self._session:
            raise self._gone(FORGOTTEN)
        if status == 202:
            raise RpcError(types.INVALID_REQUEST, "the server answered a request with 202 Accepted")
        if kind == "application/json":
            message = _decoded(await response.aread())
            await response.aclose()
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return message
            if status == 200:
                raise RpcError(types.INTERNAL_ERROR, "the server's answer is not a JSON-RPC response")
        if status != 200:
            raise RpcError(
                types.INTERNAL_ERROR, f"the server answered HTTP {status}{redirect_note(response)}"
            )
        if kind != "text/event-stream":
            raise RpcError(types.INTERNAL_ERROR, f"the server answered an unexpected content type: {kind!r}")
        return await self._sse_answer(response, request_id, progress)

    async def _sse_answer(
        self, response: httpx2.Response, request_id: str, progress: ProgressSink | None
    ) -> dict[str, Any]:
        """The response to `request_id` in an SSE answer, resumed as often as it breaks off
        (a stream that ends before the response, after events with ids)."""
        cursor = _Cursor()
        answer = await self._read_events(response, request_id, progress, cursor)
        attempts = 0
        while answer is None:  # the stream ended first: resume it where it broke off
            if cursor.last_id is None:
                raise RpcError(
                    types.INTERNAL_ERROR, f"the server's event stream ended without an answer{cursor.broke}"
                )
            if attempts == MAX_RESUMES:
                raise RpcError(
                    types.INTERNAL_ERROR,
                    f"the server's event stream ended without an answer {attempts + 1} times{cursor.broke}",
                )
            attempts += 1
            await trio.sleep((cursor.retry_ms if cursor.retry_ms is not None else DEFAULT_RETRY_MS) / 1000)
            log.info(
                "backend_stream_resumed",
                after_event=cursor.last_id,
                attempt=attempts,
                why=cursor.broke.strip(" ()") or "it ended",
            )
            headers = {**self._headers, "accept": "text/event-stream", "last-event-id": cursor.last_id}
            resumed = await self._send(self._client.build_request("GET", self._url, headers=headers))
            try:
                kind = _media_type(resumed)
                if resumed.status_code == 404 and self._session:
                    raise self._gone(FORGOTTEN)
                if resumed.status_code != 200 or kind != "text/event-stream":
                    raise RpcError(
                        types.INTERNAL_ERROR,
                        f"the server did not resume its event stream (HTTP {resumed.status_code})",
                    )
                seen = cursor.last_id
                answer = await self._read_events(resumed, request_id, progress, cursor)
                if cursor.last_id != seen:
                    attempts = 0  # it went on: its next break gets as many tries again
            except BaseException:
                await resumed.aclose()
                raise
        return answer

    async def _read_events(
        self, response: httpx2.Response, request_id: str, progress: ProgressSink | None, cursor: _Cursor
    ) -> dict[str, Any] | None:
        """The response to `request_id` in an SSE answer, or None if the stream ended first.

        Progress goes to `progress`, any other message to `inject`; `cursor` keeps the
        last event id and the retry interval the server gave. Once the response is in,
        the rest of the stream is left to `_rest`; else the stream is closed here.
        """
        source = httpx2.EventSource(response, max_event_size=MAX_EVENT_SIZE)
        events = cast("AsyncGenerator[httpx2.ServerSentEvent, None]", aiter(source))
        try:
            async for event in events:
                if event.id:
                    cursor.last_id = event.id
                if event.retry is not None:
                    cursor.retry_ms = event.retry
                if event.event != "message" or not event.data:
                    continue  # no data: a priming event (its id only)
                message = _decoded(event.data)
                if not isinstance(message, dict):
                    await self._inject(message)
                elif message.get("id") == request_id and ("result" in message or "error" in message):
                    self._spawn(self._rest, response, events)
                    return message
                elif progress is not None and _progress_of(message, request_id):
                    params = message["params"]
                    await progress(params.get("progress", 0), params.get("total"), params.get("message"))
                else:
                    await self._inject(message)
        except httpx2.SSEError:  # an event past the size limit: not a break to resume
            await events.aclose()
            raise
        except httpx2.TransportError as exc:  # it broke off mid-body: as if it ended (resumable)
            cursor.broke = f" ({type(exc).__name__}: {exc})" if str(exc) else f" ({type(exc).__name__})"
        except BaseException:
            await events.aclose()
            raise
        await events.aclose()
        await response.aclose()
        return None

    async def _rest(
        self, response: httpx2.Response, events: AsyncGenerator[httpx2.ServerSentEvent, None]
    ) -> None:
        """What an SSE answer carries after its response, to its end (a server closes the
        stream right after the response; one that does not is left after `DRAIN_LIMIT`):
        its connection then carries the next request, and its late messages go on."""
        try:
            with trio.move_on_after(DRAIN_LIMIT):
                async for event in events:
                    if event.event == "message" and event.data:
                        await self._inject(_decoded(event.data))
        except httpx2.HTTPError:
            pass  # the connection broke: nothing to keep
        finally:
            await events.aclose()
            await response.aclose()

    async def _notify_cancelled(self, request_id: str) -> None:
        note = framing.notification(
            "notifications/cancelled", {"requestId": request_id, "reason": "cancelled by the client"}
        )
        try:
            await self._client.post(self._url, content=note, headers=self._headers)
        except httpx2.HTTPError:
            pass  # the backend is gone: nothing left to cancel


@attrs.define
class _Cursor:
    """Where an SSE answer stands: its last event id and the server's retry interval."""

    last_id: str | None = None
    retry_ms: int | None = None
    #: how the latest stream broke off, when it did not simply end (for the error)
    broke: str = ""


def _media_type(response: httpx2.Response) -> str:
    """The media type of `response`'s body, without its parameters (`text/event-stream`)."""
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


def _decoded(data: bytes | str) -> Any:
    """A JSON value of the backend, or the ValueError saying why it is none (for `inject`)."""
    try:
        return framing.loads(data, checked=False)
    except ValueError as exc:
        return exc


def _progress_of(message: dict[str, Any], request_id: str) -> bool:
    """Whether `message` is a progress notification of the request `request_id`."""
    if message.get("method") != "notifications/progress":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("progressToken") == request_id
