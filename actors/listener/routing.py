"""What every request handler of a connection asks of the shared state: the catalog of
the connection's view, which backend owns a name, whether the catalog lists every ready
backend yet, and the call latency books.

`Routing` reads the `SessionContext` all connections share (the catalog cells, the
backend directory, the settled event, the latency window) and holds one thing of its
connection: which view's cell it reads (the settings' view, or its client's profile;
actors/router/views.py). The handlers (handlers.py) and the raw lane (raw_lane.py) of a
connection are handed the same one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from assern.actors.backend.messages import BackendUnavailable
from assern.actors.backend.status import BackendState
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import UNAVAILABLE, SessionContext
from assern.actors.router import naming

if TYPE_CHECKING:
    from collections.abc import Callable

    from assern.actors.backend.handle import BackendHandle
    from assern.actors.router.catalog import Catalog
    from assern.supervisor.cell import Cell


class Routing:
    """Lookups over one view's catalog and the shared backends."""

    def __init__(self, shared: SessionContext) -> None:
        self.shared = shared
        #: the cell of the view this connection reads
        self.cell: Cell[Catalog] = shared.catalog
        #: the `clientInfo.name` of the connection's client, once it gave one
        self.client: str | None = None
        #: whether the client declared the elicitation capability at initialize (None:
        #: not known, e.g. a 2026-07-28 client, which says so in each request)
        self.elicits: bool | None = None
        self._moved = trio.Event()
        #: the tools (server, its own name) the connection's last search answered, while
        #: searches learn from use (None otherwise: a call then does no more work)
        self.answered: frozenset[tuple[str, str]] | None = None
        #: the server of the last call the connection made that was answered: its tools
        #: come first among like matches in the connection's next search (session.py)
        self.last_server: str | None = None
        #: the catalog each kind of list ("tools", "prompts", "resources") was last given
        #: to the client from (answered, or announced as changed): it gets list_changed
        #: for a kind only when the list differs from that one (none before its first list)
        self.given: dict[str, Catalog] = {}

    @property
    def catalog(self) -> Catalog:
        """The current catalog of this connection's view."""
        return self.cell.value

    def use(self, cell: Cell[Catalog]) -> None:
        """Read another view's cell from now on (wakes `next_catalog`)."""
        if cell is not self.cell:
            self.cell = cell
            moved, self._moved = self._moved, trio.Event()
            moved.set()

    async def next_catalog(self, seen: int) -> tuple[int, Catalog]:
        """Wait for a catalog newer than version `seen` of the view's cell, or for the
        connection to move to another view; returns (its cell's version, the catalog)."""
        cell, moved = self.cell, self._moved
        found: tuple[int, Catalog] | None = None
        async with trio.open_nursery() as nursery:

            async def newer() -> None:
                nonlocal found
                found = await cell.changed(seen)
                nursery.cancel_scope.cancel()

            async def move() -> None:
                await moved.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(newer)
            nursery.start_soon(move)
        return found if found is not None else (self.cell.version, self.cell.value)

    def handle(self, server: str) -> BackendHandle:
        """The handle of a configured backend.

        Raises:
            RpcError: no such server is configured.
        """
        handle = self.shared.directory().get(server)
        if handle is None:
            raise RpcError(UNAVAILABLE, f"server '{server}' is not configured")
        return handle

    def catalog_complete(self) -> bool:
        """Whether the catalog lists every backend that is ready (the settings' view
        lists every backend, and every view is published with it)."""
        catalog = self.shared.catalog.value
        return all(
            name in catalog.servers
            for name, handle in self.shared.directory().items()
            if handle.state is BackendState.READY
        )

    def warm(self) -> bool:
        """Whether the catalog lists every backend that is not failed or stopped: live, or
        from the listing an earlier run saved (actors/backend/saved_catalog.py), so lists
        need not wait for backends that are starting or dormant."""
        directory = self.shared.directory()
        if not directory:
            return False
        servers = self.shared.catalog.value.servers
        return all(
            name in servers
            for name, handle in directory.items()
            if handle.state not in (BackendState.FAILED, BackendState.STOPPED)
        )

    def lists_ready(self) -> bool:
        """Whether a list may be answered now: the catalog is warm, or every eager backend
        had its first start and the catalog lists every ready one."""
        return (self.shared.settled.is_set() and self.catalog_complete()) or self.warm()

    async def wait_settled(self, limit: float) -> None:
        """Wait (at most `limit` s) until lists may be answered (`lists_ready`)."""
        if self.lists_ready():
            return
        cell = self.shared.catalog
        with trio.move_on_after(limit):
            async with trio.open_nursery() as nursery:

                async def settled() -> None:
                    await self.shared.settled.wait()
                    version = cell.version
                    while not self.catalog_complete():
                        version, _ = await cell.changed(version)
                    nursery.cancel_scope.cancel()

                async def warmed() -> None:
                    version = cell.version
                    while not self.warm():
                        version, _ = await cell.changed(version)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(settled)
                nursery.start_soon(warmed)

    async def catalog_to_list(self, kind: str) -> Catalog:
        """The catalog to answer a list of `kind` from (as `settled_catalog`), noted as
        the one the client was given."""
        catalog = await self.settled_catalog()
        self.given[kind] = catalog
        return catalog

    def to_announce(self, catalog: Catalog) -> list[str]:
        """The kinds of list the client was given that `catalog` changes; each is noted as
        given from `catalog` (the client is told, and lists it anew). A change the client
        got in its answer already (the catalog moved while its list waited) is none."""
        kinds = [
            kind
            for kind, given in self.given.items()
            if given is not catalog and kind in changed_lists(given, catalog)
        ]
        for kind in kinds:
            self.given[kind] = catalog
        return kinds

    async def settled_catalog(self) -> Catalog:
        """The catalog once the starting backends are listed (or `list_wait` passed)."""
        await self.wait_settled(self.shared.list_wait)
        return self.cell.value

    async def catalog_having(self, has: Callable[[Catalog], bool]) -> Catalog:
        """The catalog as soon as `has` holds for it (a name a request uses is listed);
        else, as `settled_catalog`, once the starting backends are listed or `list_wait`
        passed. A call to a tool of a backend that just became ready does not wait for
        the others still starting."""
        if has(self.cell.value):
            return self.cell.value
        with trio.move_on_after(self.shared.list_wait):
            async with trio.open_nursery() as nursery:

                async def settled() -> None:
                    await self.wait_settled(math.inf)
                    nursery.cancel_scope.cancel()

                async def listed() -> None:
                    version = self.cell.version
                    while not has(self.cell.value):
                        version, _ = await self.next_catalog(version)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(settled)
                nursery.start_soon(listed)
        return self.cell.value

    def down_owner(self, name: str) -> BackendUnavailable | None:
        """Why a name that carries a down server's prefix cannot be called, if it does."""
        shows = self.cell.value.shows_server
        owners = [
            handle
            for server, handle in self.shared.directory().items()
            if name.startswith(naming.server_prefix(server) + "_")
            and handle.listing is None
            and shows(server)
        ]
        if not owners:
            return None
        status = max(owners, key=lambda h: len(h.name)).status
        if status.state is BackendState.FAILED:
            reason = f"it failed after {status.restarts} restarts ({status.last_error})"
        else:
            reason = f"it is {status.state.value}" + (f" ({status.last_error})" if status.last_error else "")
        return BackendUnavailable(status.server, reason)

    def record_call(self, server: str, started: float, tool: str = "", outcome: str = "ok") -> None:
        """Count one finished call of `tool` (answered or failed) and how it ended."""
        self.shared.stats.record(server, (trio.current_time() - started) * 1000, tool, outcome, self.client)
        if outcome == "ok":
            self.last_server = server
        answered = self.answered
        if answered is not None and outcome == "ok" and (server, tool) in answered:
            self.shared.use.called(server, tool)  # O(1), in memory (actors/search/learned.py)


def changed_lists(old: Catalog, new: Catalog) -> list[str]:
    """The kinds of list ("tools", "prompts", "resources") that differ from `old` to `new`:
    the tools as encoded, the prompts' and resources' exposed names, the templates."""
    kinds = []
    if old.tools_json != new.tools_json:
        kinds.append("tools")
    if list(old.prompts) != list(new.prompts):
        kinds.append("prompts")
    if list(old.resources) != list(new.resources) or old.templates != new.templates:
        kinds.append("resources")
    return kinds
