"""What every request handler of every connection asks of the shared state: which backend
owns a name, whether the catalog lists every ready backend yet, and the call latency books.

`Routing` reads only the `SessionContext` all connections share (the catalog cell, the
backend directory, the settled event, the latency window); it holds nothing of one
connection, so the handlers (handlers.py) and the raw lane (raw_lane.py) are handed the
same one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from assern.actors.backend.messages import BackendUnavailable
from assern.actors.backend.status import BackendState
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import UNAVAILABLE, SessionContext
from assern.actors.router import naming

if TYPE_CHECKING:
    from assern.actors.backend.handle import BackendHandle
    from assern.actors.router.catalog import Catalog


class Routing:
    """Lookups over the shared catalog and backends, for one or many connections."""

    def __init__(self, shared: SessionContext) -> None:
        self.shared = shared

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
        """Whether the catalog lists every backend that is ready."""
        catalog = self.shared.catalog.value
        return all(
            name in catalog.servers
            for name, handle in self.shared.directory().items()
            if handle.state is BackendState.READY
        )

    async def wait_settled(self, limit: float) -> None:
        """Wait (at most `limit` s) until every eager backend had its first start and the
        catalog lists every ready one."""
        if self.shared.settled.is_set() and self.catalog_complete():
            return
        with trio.move_on_after(limit):
            await self.shared.settled.wait()
            cell = self.shared.catalog
            version = cell.version
            while not self.catalog_complete():
                version, _ = await cell.changed(version)

    async def settled_catalog(self) -> Catalog:
        """The catalog once the starting backends are listed (or `list_wait` passed)."""
        await self.wait_settled(self.shared.list_wait)
        return self.shared.catalog.value

    def down_owner(self, name: str) -> BackendUnavailable | None:
        """Why a name that carries a down server's prefix cannot be called, if it does."""
        owners = [
            handle
            for server, handle in self.shared.directory().items()
            if name.startswith(naming.server_prefix(server) + "_") and handle.listing is None
        ]
        if not owners:
            return None
        status = max(owners, key=lambda h: len(h.name)).status
        if status.state is BackendState.FAILED:
            reason = f"it failed after {status.restarts} restarts ({status.last_error})"
        else:
            reason = f"it is {status.state.value}" + (f" ({status.last_error})" if status.last_error else "")
        return BackendUnavailable(status.server, reason)

    def record_call(self, server: str, started: float) -> None:
        """Count one finished call (answered or failed) in the latency window."""
        self.shared.stats.record(server, (trio.current_time() - started) * 1000)
