"""One client connection: an MCP server session that routes through the catalog snapshot.

Every connected client gets its own `ClientConnection`, so server-to-client requests of
a backend go back to the client whose call caused them. Lists are served from the
router's immutable catalog; calls go straight to the owning backend's mailbox: the
router is not on the call path. A connection owns two collaborators: its request
handlers (handlers.py) and its raw tools/call lane (raw_lane.py), both handed the
shared `Routing` (routing.py) and what they need of the connection.

A connection reads newline-delimited JSON-RPC (jsonl.py, over actors/jsonrpc/framing.py)
and writes through one line writer, so the raw lane's lines and the session's stay in
order. Its first request
decides its protocol era, as the SDK's server decides it:

- a 2026-07-28 request (one carrying the `_meta` envelope; never an `initialize`) opens
  a stateless connection: the SDK's own server serves it (modern.py, imported only
  then), with that request and anything before it replayed;
- anything else is handshake-era, served by our own session (protocol.py) without the
  SDK: `initialize` answered from `capabilities()`, the handlers below, list_changed
  notifications as the catalog changes, backend log messages and resource updates,
  and server-to-client requests of the backends (`_origin`).

The stdio client of `assern serve` may have had its `initialize` answered already by
the front door (app/front_door.py), from the same facts `capabilities()` uses while the
catalog is empty: the session only records that request (the client's name and the
negotiated version) and answers everything after it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
import structlog
import trio

from assern.actors.backend.messages import Origin
from assern.actors.backend.status import BackendState
from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import (
    ASK,
    UNAVAILABLE,
    Directory,
    Events,
    Peer,
    SessionContext,
    to_rpc_error,
)
from assern.actors.listener.handlers import Handlers
from assern.actors.listener.handshake import SERVER_VERSION
from assern.actors.listener.jsonl import END, SendRaw, next_value, parse_message
from assern.actors.listener.protocol import (
    CLOSE_WRITE_LIMIT,
    PROFILE_NOTE,
    Greeting,
    Method,
    ServerSession,
    modern_client_name,
    opens_modern,
)
from assern.actors.listener.raw_lane import RawLane
from assern.actors.listener.roots import ClientRoots
from assern.actors.listener.routing import Routing, changed_lists
from assern.actors.router.views import choose_profile
from assern.supervisor.io.writer import DirectWriter

if TYPE_CHECKING:
    from assern.actors.listener.modern import ModernServer
    from assern.actors.listener.modern_lines import ModernLines
    from assern.actors.listener.roots_check import SessionFolder
    from assern.supervisor.io.reader import LineReader

__all__ = ["UNAVAILABLE", "ClientConnection", "Directory", "SessionContext", "to_rpc_error"]

log = structlog.get_logger()

#: Messages before a connection's first request kept for its session (as the SDK keeps them).
LEAD_LIMIT = 8
#: The client notifications after which a client that offers roots is asked for them.
ROOTS_ASKED_ON = ("notifications/initialized", "notifications/roots/list_changed")
#: How long the tasks of a connection whose client left may take to finish.
CLOSE_GRACE = 2.0

#: What a lost client's pipe or socket raises.
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

#: A message as decoded from its line, and as validated.
Incoming = tuple[Any, types.JSONRPCMessage]


class ClientConnection:
    """The per-client state: its id, its session, its subscriptions and calls in flight."""

    def __init__(
        self,
        client_id: str,
        shared: SessionContext,
        *,
        profile: str | None = None,
        folder: SessionFolder | None = None,
    ) -> None:
        self.client_id = client_id
        self.shared = shared
        #: the handshake-era session, while serving one
        self._protocol: ServerSession | None = None
        #: a 2026-07-28 connection's change events (its listen streams), while serving one
        self._events: Events | None = None
        self._nursery: trio.Nursery | None = None
        #: the writer of a line connection, while serving one (for `tell`)
        self._out: DirectWriter | None = None
        #: a 2026-07-28 line connection's requests, while serving one
        self._modern_lines: ModernLines | None = None
        self.routing = Routing(shared)
        self.handlers = Handlers(self.routing, self._origin)
        self.lane = RawLane(self.routing, self._initialized, self._origin)
        #: when the client connected (epoch seconds) and the name it gave at initialize
        self.connected_at = time.time()
        self.client_name: str | None = None
        #: `clientInfo.version` of a handshake-era client, once it gave one
        self.client_version: str | None = None
        #: the profile serving this client (None: the settings' view), and whether it was
        #: given (`assern serve --profile`) rather than matched by the client's name
        self.profile: str | None = None
        self._profile_given = False
        #: the roots its client reports, checked against the folder of its configuration
        self.roots = ClientRoots(folder if folder is not None else shared.folder())
        if profile is not None:
            self.use_profile(profile, given=True)
        self._seen_version = self.routing.cell.version

    # ------------------------------------------------------------------ serving

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The schema of the tool this client calls as `name`, in its view."""
        return self.routing.catalog.input_schema(name)

    def methods(self) -> dict[str, Method]:
        """The request methods this aggregate serves (besides `initialize` and `ping`)."""
        return self.handlers.methods()

    async def serve(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        *,
        answered: types.RequestId | None = None,
    ) -> None:
        """Serve this client over a byte stream pair until it disconnects.

        `answered`: the id of the `initialize` the front door answered already.
        """
        with structlog.contextvars.bound_contextvars(client=self.client_id):
            log.info("client_connected")
            out = self._out = DirectWriter(send)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(out.pump)
                    nursery.start_soon(self._follow_catalog)
                    async with trio.open_nursery() as requests:
                        self._nursery = requests
                        self.lane.attach(out, requests)
                        await self._serve_lines(framing.line_reader(receive), out, answered)
                        # What still runs for the client gets its last chance to finish.
                        requests.cancel_scope.deadline = trio.current_time() + CLOSE_GRACE
                    # Lines still queued behind a full pipe go out before the pump stops.
                    with trio.move_on_after(CLOSE_WRITE_LIMIT):
                        await out.drain()
                    nursery.cancel_scope.cancel()
            finally:
                self.lane.cancel_all(answer=False)  # the writer is done by now
                self.lane.detach()
                self._nursery = self._protocol = self._events = None
                self._out = self._modern_lines = None
                log.info("client_disconnected")

    def in_flight(self) -> int:
        """The client's requests this connection has not answered yet (what a daemon being
        superseded waits for)."""
        count = self.lane.in_flight()
        if self._protocol is not None:
            count += self._protocol.in_flight()
        if self._modern_lines is not None:
            count += self._modern_lines.in_flight()
        return count

    def cut(self, reason: str) -> None:
        """Stop what still runs for this client; each request is answered with `reason`
        (a 2026-07-28 line client's plain requests are only cancelled)."""
        if self._protocol is not None:
            self._protocol.cut(reason)
        self.lane.cancel_all(answer=True, reason=reason)
        if self._modern_lines is not None:
            self._modern_lines.cancel_all()

    async def flushed(self, limit: float) -> None:
        """Wait until what was written to the client went out (at most `limit` s)."""
        out = self._out
        if out is not None:
            with trio.move_on_after(limit):
                await out.drain()

    def tell(self, method: str, params: Mapping[str, Any]) -> bool:
        """Queue one notification of assern's own for the client's `assern serve` (the
        daemon's `assern/superseded`), whatever the client's era; False when this is not
        a line connection that is still served."""
        out = self._out
        return out is not None and out.write_nowait(framing.notification(method, params))

    async def host_modern(self, client_name: str | None, *, task_status: trio.TaskStatus[Any]) -> None:
        """Host this connection for a 2026-07-28 client whose requests come one by one
        (over HTTP) rather than as lines: report its `ModernServer` through
        `task_status`, then follow the catalog for it until cancelled."""
        from assern.actors.listener.modern import ModernServer
        from assern.actors.listener.modern_lane import ModernLane

        with structlog.contextvars.bound_contextvars(client=self.client_id):
            log.info("client_connected", client_name=client_name)
            self.client_name = client_name
            self._match_profile()
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._follow_catalog)
                    self._nursery = nursery
                    modern = ModernServer(
                        self.methods(),
                        self.shared,
                        self.handlers.set_subscription,
                        nursery,
                        self.input_schema,
                    )
                    modern.lane = ModernLane(self.routing, self._origin, modern.round_trips)
                    self._events = modern.events
                    task_status.started(modern)
                    await trio.sleep_forever()
            finally:
                self._nursery = self._events = None
                log.info("client_disconnected")

    async def _serve_lines(self, reader: LineReader, out: SendRaw, answered: types.RequestId | None) -> None:
        try:
            lead, opening = await self._opening(reader, out)
            if opening is not None and opens_modern(opening[1]):
                self.client_name = modern_client_name(opening[0])
                self._match_profile()
                await self._serve_modern([*lead, opening], reader, out)
                return
            assert self._nursery is not None
            session = self._protocol = ServerSession(
                out,
                self.methods(),
                greet=self._greet,
                on_initialize=self._record_client,
                on_notification=self._client_notified,
                nursery=self._nursery,
                answered=answered,
            )
            try:
                for raw, message in [*lead, *([opening] if opening is not None else [])]:
                    await session.receive(raw, message)
                while (incoming := await self._next(reader, out, intercept=True)) is not None:
                    await session.receive(*incoming)
            finally:
                # The client left: what still runs for it is cancelled (and answered, if
                # the session's own), here at the backends too.
                session.close()
                self.lane.cancel_all()
        except _GONE:
            pass  # the client is gone

    async def _serve_modern(self, lead: list[Incoming], reader: LineReader, out: SendRaw) -> None:
        """Serve a 2026-07-28 connection: its plain requests without the SDK, the rest
        by the SDK's server once one needs it (modern_lines.py)."""
        from assern.actors.listener.modern_lane import ModernLane
        from assern.actors.listener.modern_lines import ModernLines
        from assern.actors.listener.round_trips import RoundTrips

        nursery = self._nursery
        assert nursery is not None
        round_trips = RoundTrips(nursery)
        methods = self.methods()

        def sdk_server() -> ModernServer:
            from assern.actors.listener.modern import ModernServer

            modern = ModernServer(
                methods,
                self.shared,
                self.handlers.set_subscription,
                nursery,
                self.input_schema,
                round_trips,
            )
            self._events = modern.events
            return modern

        lines = self._modern_lines = ModernLines(
            routing=self.routing,
            lane=ModernLane(self.routing, self._origin, round_trips),
            methods=methods,
            instructions=self.shared.instructions,
            server_name=self.shared.server_name,
            server_version=SERVER_VERSION,
            sdk=sdk_server,
            nursery=nursery,
        )
        await lines.serve(lead, reader, out)

    async def _opening(self, reader: LineReader, out: SendRaw) -> tuple[list[Incoming], Incoming | None]:
        """Read up to the first request: the messages before it (a few kept), and it."""
        lead: list[Incoming] = []
        while (incoming := await self._next(reader, out, intercept=False)) is not None:
            if isinstance(incoming[1], types.JSONRPCRequest):
                return lead, incoming
            if self._take_profile_note(incoming[1]):
                continue
            if len(lead) < LEAD_LIMIT:
                lead.append(incoming)
            else:
                log.debug("message_before_first_request_dropped")
        return lead, None

    async def _next(self, reader: LineReader, out: SendRaw, *, intercept: bool) -> Incoming | None:
        """The next message for the session; None at the end. Bad lines are answered here."""
        while (raw := await next_value(reader, out)) is not END:
            if intercept and self.lane.intercept(raw):
                continue
            message = parse_message(raw)
            if isinstance(message, bytes):
                await out.write(message)
                continue
            return raw, message
        return None

    def _record_client(self, params: Mapping[str, Any]) -> None:
        capabilities = params.get("capabilities")
        if isinstance(capabilities, Mapping):
            self.routing.elicits = "elicitation" in capabilities
        self.roots.declared(capabilities)
        info = params.get("clientInfo")
        if isinstance(info, Mapping) and isinstance(info.get("name"), str):
            self.client_name = info["name"]
            version = info.get("version")
            self.client_version = version if isinstance(version, str) else None
            self._match_profile()

    def _client_notified(self, method: str) -> None:
        """A client notification: an initialized client that offers roots is asked for
        them now and whenever it says they changed (roots.py)."""
        protocol = self._initialized()
        if method not in ROOTS_ASKED_ON or protocol is None or self._nursery is None:
            return
        self.roots.refresh(self._nursery, protocol.ask)

    def _match_profile(self) -> None:
        """Serve the client the first profile whose `match` takes its name (unless one
        was given for the connection)."""
        self.routing.client = self.client_name
        if self._profile_given:
            return
        profile = choose_profile(self.shared.profiles(), self.client_name)
        if profile is not None:
            self.use_profile(profile)

    def use_profile(self, profile: str, *, given: bool = False) -> None:
        """Serve this connection the view of `profile` from now on."""
        known = any(p.name == profile for p in self.shared.profiles())
        if not known:
            names = ", ".join(p.name for p in self.shared.profiles()) or "none"
            log.warning("unknown_profile", profile=profile, profiles=names)
        self.profile, self._profile_given = profile, given
        self.routing.use(self.shared.views.cell(profile))
        log.info("client_profile", profile=profile, client_name=self.client_name, given=given)

    def _take_profile_note(self, message: types.JSONRPCMessage) -> bool:
        """Whether `message` is a proxy's note of the profile its start was given (it
        comes before the client's first message: app/bridge.py); if so, it is applied."""
        if not isinstance(message, types.JSONRPCNotification) or message.method != PROFILE_NOTE:
            return False
        name = (message.params or {}).get("name")
        if isinstance(name, str) and name:
            self.use_profile(name, given=True)
        return True

    async def _greet(self) -> Greeting:
        # Decided at the handshake from the backends known then (see `capabilities`);
        # `initialize_wait` lets it wait for backends nobody knows anything about yet.
        if self.shared.initialize_wait > 0 and self._unknown_backends():
            with trio.move_on_after(self.shared.initialize_wait):
                await self.routing.wait_settled(math.inf)
        return Greeting(
            capabilities=self.capabilities().model_dump(by_alias=True, mode="json", exclude_none=True),
            server_name=self.shared.server_name,
            server_version=SERVER_VERSION,
            instructions=self.shared.instructions,
        )

    def capabilities(self) -> types.ServerCapabilities:
        """What this aggregate can really deliver, given the backends known right now.

        Tools, prompts and resources are always served (their lists may be empty) and
        assern itself sends their list_changed whenever the catalog changes. Resource
        subscriptions, logging and completions are offered only when a backend offers them:
        a ready one, or one not ready yet whose capabilities are remembered from an earlier
        run (see actors/router/capabilities.py).
        """
        known = [*self.routing.catalog.capabilities.values(), *self._remembered().values()]
        subscribe = any(c.resources is not None and c.resources.subscribe for c in known)
        return types.ServerCapabilities(
            tools=types.ToolsCapability(list_changed=True),
            prompts=types.PromptsCapability(list_changed=True),
            resources=types.ResourcesCapability(subscribe=subscribe, list_changed=True),
            logging=types.LoggingCapability() if any(c.logging is not None for c in known) else None,
            completions=(
                types.CompletionsCapability() if any(c.completions is not None for c in known) else None
            ),
        )

    def _remembered(self) -> Mapping[str, types.ServerCapabilities]:
        """Remembered capabilities of the configured backends that are not in the catalog
        (of those this connection's view shows)."""
        catalog = self.routing.catalog
        live, shows = catalog.capabilities, catalog.shows_server
        return {
            name: caps for name, caps in self.shared.remembered().items() if name not in live and shows(name)
        }

    def _unknown_backends(self) -> list[str]:
        known = {*self.routing.catalog.capabilities, *self._remembered()}
        return [
            name
            for name, handle in self.shared.directory().items()
            if name not in known and handle.state is not BackendState.FAILED
        ]

    def _initialized(self) -> ServerSession | None:
        """The handshake-era session, once the client said it is initialized."""
        protocol = self._protocol
        return protocol if protocol is not None and protocol.initialized else None

    # ----------------------------------------------------------- notifications

    async def _follow_catalog(self) -> None:
        """Tell the client of each list that changed. A 2026-07-28 connection's streams
        hear every change; a handshake-era client only of a list that differs from the one
        it was given (routing.py, `to_announce`): a change before its first list, or while
        that list waited, is in its answer already, and a client still discovering takes a
        needless notification for a reason to register the server's features twice."""
        old = self.routing.catalog
        while True:
            self._seen_version, new = await self.routing.next_catalog(self._seen_version)
            if self._events is not None:
                for kind in changed_lists(old, new):
                    await self._events.list_changed(kind)
            old = new
            protocol = self._initialized()
            if protocol is None:
                continue
            for kind in self.routing.to_announce(new):
                await protocol.notify(f"notifications/{kind}/list_changed")
                log.debug("list_changed_sent", kind=kind)

    async def backend_notification(self, server: str, note: types.ServerNotification) -> None:
        """Forward a backend's resource update or log message to this client."""
        if isinstance(note, types.ResourceUpdatedNotification):
            for uri in self.handlers.subscribed_as(server, str(note.params.uri)):
                if self._events is not None:
                    await self._events.resource_updated(uri)
                protocol = self._initialized()
                if protocol is not None:
                    await protocol.notify("notifications/resources/updated", {"uri": uri})
        elif isinstance(note, types.LoggingMessageNotification):
            protocol = self._initialized()
            if protocol is None:
                return
            params = note.params
            logger = f"{server}.{params.logger}" if params.logger else server
            message = types.LoggingMessageNotificationParams(
                level=params.level, data=params.data, logger=logger
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
            await protocol.notify("notifications/message", message)

    # ---------------------------------------------------------------- helpers

    def _origin(self, peer: Peer) -> Origin:
        """This client as the origin of a backend call: what the backend asks goes to `peer`.

        The request and the client's result are checked against their models on the way
        (what fails that fails the backend's request, as any other refusal).
        """

        async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            try:
                request_model, result_model = ASK[method]
                body: dict[str, Any] = {"method": method}
                if params is not None:
                    body["params"] = params
                request = request_model.model_validate(body, by_name=False)
                payload = request.model_dump(by_alias=True, mode="json", exclude_none=True).get("params")
                result = await peer.ask(method, payload)
                return result_model.model_validate(result, by_name=False).model_dump(
                    by_alias=True, mode="json", exclude_none=True
                )
            except RpcError:
                raise
            except Exception as exc:  # e.g. no back-channel on a 2026-07-28 connection
                raise RpcError(types.INVALID_REQUEST, str(exc)) from exc

        return Origin(client=self.client_id, ask=ask)
