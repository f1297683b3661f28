"""2026-07-28 clients over HTTP: every request a self-contained POST, no session.

A stateless request says who sends it (`clientInfo` in its `_meta`), so the front keeps
one client connection per token and client name, hosted by the listener in the
2026-07-28 era (its profile matched by that name, its change events published to its
`subscriptions/listen` streams, its backends' requests relayed as `input_required`
rounds). A plain request is answered with that connection's server by the front
itself (plain_stateless.py); the `mcp` SDK's streamable-HTTP handling of that era
answers every other POST with it. A connection nobody used for the idle timeout is let go;
the next request of that client simply hosts a new one, since nothing of a stateless
client lives in it between requests but its open listen streams.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from assern.actors.listener.http import plain_stateless
from assern.actors.listener.modern_lane import ModernLane

if TYPE_CHECKING:
    from mcp_types import JSONRPCRequest
    from starlette.types import Receive, Scope, Send

    from assern.actors.listener.modern import ModernServer

log = structlog.get_logger()

Key = tuple[str | None, str | None]
#: Hosts a 2026-07-28 connection for a client name until cancelled; reports its server
#: through `task_status` (ListenerActor.host_modern).
HostModern = Callable[..., Awaitable[None]]

#: The most connections one token may have hosted at once (one per client name).
MAX_CLIENTS_PER_TOKEN = 64


@attrs.define(eq=False)
class Hosted:
    server: Server[Any]
    manager: StreamableHTTPSessionManager
    cancel: trio.CancelScope
    #: the raw lane of its tool calls (modern_lane.py)
    lane: ModernLane | None = None
    #: what the server's lifespan gives its handlers: the SDK's default, an empty dict
    lifespan_state: dict[str, Any] = attrs.field(factory=dict)
    in_flight: int = 0
    last_used: float = 0.0


class StatelessClients:
    """The 2026-07-28 connections of one HTTP front, by token and client name."""

    def __init__(
        self, host: HostModern, *, idle_timeout: Callable[[], float], max_body: Callable[[], int]
    ) -> None:
        self._host = host
        self._idle_timeout = idle_timeout
        self._max_body = max_body
        self.clients: dict[Key, Hosted] = {}
        self._starting: dict[Key, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._expire)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self.clients.clear()

    async def handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        owner: str | None,
        name: str | None,
        plain: tuple[JSONRPCRequest, dict[str, Any]] | None = None,
    ) -> None:
        """Serve one POST of client `name` (token `owner`); `plain`: the request and its
        decoded body when the front answers it itself."""
        hosted = await self._hosted((owner, name))
        hosted.in_flight += 1
        try:
            if plain is None:
                await hosted.manager.handle_request(scope, receive, send)
            else:
                request, message = plain
                await plain_stateless.answer(
                    hosted.server,
                    hosted.lifespan_state,
                    request,
                    message,
                    scope,
                    receive,
                    send,
                    lane=hosted.lane,
                )
        finally:
            hosted.in_flight -= 1
            hosted.last_used = trio.current_time()

    async def _hosted(self, key: Key) -> Hosted:
        while (hosted := self.clients.get(key)) is None:
            starting = self._starting.get(key)
            if starting is not None:  # another request of this client hosts it right now
                await starting.wait()
                continue
            if sum(1 for owner, _ in self.clients if owner == key[0]) >= MAX_CLIENTS_PER_TOKEN:
                self._drop_oldest(key[0])
            assert self._nursery is not None, "the clients' nursery runs before requests are served"
            self._starting[key] = starting = trio.Event()
            try:
                started: Hosted = await self._nursery.start(self._run_client, key)
                return started
            finally:
                del self._starting[key]
                starting.set()
        return hosted

    async def _run_client(self, key: Key, *, task_status: trio.TaskStatus[Hosted]) -> None:
        cancel = trio.CancelScope()
        with cancel:
            async with trio.open_nursery() as nursery:
                modern: ModernServer = await nursery.start(self._host, key[1])
                manager = StreamableHTTPSessionManager(
                    modern.server, stateless=True, max_request_body_size=self._max_body()
                )
                hosted = Hosted(
                    server=modern.server,
                    manager=manager,
                    cancel=cancel,
                    lane=modern.lane,
                    last_used=trio.current_time(),
                )
                try:
                    async with manager.run():
                        # Listed only now: the manager refuses requests until it runs, and
                        # a request that finds no listed client waits for this start.
                        self.clients[key] = hosted
                        task_status.started(hosted)
                        await trio.sleep_forever()
                finally:
                    if self.clients.get(key) is hosted:
                        del self.clients[key]
                    nursery.cancel_scope.cancel()

    def _drop_oldest(self, owner: str | None) -> None:
        idle = [(h.last_used, k) for k, h in self.clients.items() if k[0] == owner and not h.in_flight]
        if idle:
            _, key = min(idle)
            log.info(
                "http_stateless_client_dropped",
                client_name=key[1],
                token=key[0],
                reason=f"the token has {MAX_CLIENTS_PER_TOKEN} clients; this one was idle longest",
            )
            self.clients.pop(key).cancel.cancel()

    async def _expire(self) -> None:
        while True:
            timeout = self._idle_timeout()
            await trio.sleep(min(60.0, timeout / 4) if math.isfinite(timeout) else 60.0)
            now = trio.current_time()
            for key, hosted in list(self.clients.items()):
                if not hosted.in_flight and now - hosted.last_used > timeout:
                    log.info("http_stateless_client_idle", client_name=key[1], token=key[0])
                    self.clients.pop(key).cancel.cancel()
