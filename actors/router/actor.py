"""The router: single writer of the catalogs. Rebuilds them when a backend's listing changes.

There is one catalog per view (views.py): the settings' own, which every client gets
unless a profile serves it, and one per `[profiles.NAME]`.

Backends poke the router's mailbox with the name of the server whose listing changed;
pokes are coalesced (one pending poke means "re-read everything"), so a burst of
list_changed from many backends costs one rebuild. A poke that finds the catalog's
inputs as they were (a restarting backend keeps its listing, and a restarted one lists
the same tools again) rebuilds nothing: a rebuild of 1,000 tools takes about 8 ms of the
one trio thread, and a restart pokes three times, the first two before the new process
is spawned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import structlog
import trio

from assern.actors.gate.chain import Middlewares
from assern.actors.gate.validation import SchemaCache
from assern.actors.router.catalog import BackendListing, Catalog, search_sources
from assern.actors.router.views import CatalogViews, View, build_view, views

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from assern.actors.config.spec import ServerSpec, Settings
    from assern.actors.gate.asyncio_host import AsyncioHost
    from assern.actors.router.capabilities import CapabilityCache
    from assern.actors.search.index import SearchIndex
    from assern.supervisor.cell import Cell

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class ListingChanged:
    server: str


RouterMsg = ListingChanged


def poke(mailbox: trio.MemorySendChannel[RouterMsg], server: str) -> None:
    """Tell the router a listing changed; never blocks (a full mailbox already means rebuild)."""
    try:
        mailbox.send_nowait(ListingChanged(server=server))
    except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
        pass


@attrs.frozen
class CatalogInputs:
    """Everything a catalog is built from; equal inputs build an equal catalog."""

    listings: tuple[BackendListing, ...]
    view: View


class RouterActor:
    """Builds the catalog of every view (the settings' and each profile's) and publishes
    each in its cell of `views`."""

    def __init__(
        self,
        inbox: trio.MemoryReceiveChannel[RouterMsg],
        catalog: Cell[Catalog],
        listings: Callable[[], Sequence[BackendListing]],
        settings: Callable[[], Settings],
        *,
        specs: Callable[[], Mapping[str, ServerSpec]] = dict,
        capability_cache: CapabilityCache | None = None,
        views: CatalogViews | None = None,
        asyncio_host: AsyncioHost | None = None,
    ) -> None:
        self.inbox = inbox
        self.catalog = catalog
        self.views = views if views is not None else CatalogViews(catalog)
        self._listings = listings
        self._settings = settings
        self._specs = specs
        self._cache = capability_cache
        #: what each view's current catalog was built from (absent: nothing built yet)
        self._built_from: dict[str | None, CatalogInputs] = {}
        #: each view's last search index (search exposure), the base of its next one
        self._indexes: dict[str | None, SearchIndex] = {}
        #: the invalid backend schemas already reported: (server, exposed name, problem)
        self._reported_schemas: set[tuple[str, str, str]] = set()
        #: every view's validators, compiled once per schema (not per view and rebuild)
        self._schemas = SchemaCache()
        #: the configured middlewares' instances, kept while their entries stay as they are
        self._middlewares = Middlewares(asyncio_host)

    def rebuild(self) -> Catalog:
        """Publish each view's catalog of the current listings, unless they built it."""
        wanted = views(self._settings())
        listings = tuple(self._listings())
        for name in wanted:
            if name is not None:
                self.views.cell(name)  # every profile's cell exists before a client asks
        changed = self._publish(None, self.catalog, CatalogInputs(listings, wanted[None]))
        default = self.catalog.value
        for name, cell in self.views.profiles():
            view = wanted.get(name)
            if view is not None:
                self._publish(name, cell, CatalogInputs(listings, view))
            elif cell.value is not default:  # no such profile (any more): the settings' view
                self._built_from.pop(name, None)
                cell.set(default)
        self._schemas.sweep()
        self._middlewares.retain(self._settings().middleware)
        if self._cache is not None:  # even unchanged: a restarted backend may start another way
            self._cache.remember(self._specs(), default.capabilities)
        if changed:
            log.info(
                "catalog_rebuilt",
                version=default.version,
                tools=len(default.tools),
                resources=len(default.resources),
                prompts=len(default.prompts),
                servers=sorted(default.servers),
            )
        return default

    def _publish(self, name: str | None, cell: Cell[Catalog], inputs: CatalogInputs) -> bool:
        """Build and publish one view's catalog; False when its inputs built the current one."""
        if self._built_from.get(name) == inputs:
            return False
        before = cell.value
        catalog = build_view(
            inputs.listings,
            inputs.view,
            version=before.version + 1,
            schemas=self._schemas,
            middlewares=self._middlewares,
        )
        if catalog.exposure == "search":
            from assern.actors.search.index import FieldWeights, SearchIndex  # loaded when searched

            # Updated from the last index: only the servers whose tools changed are analysed.
            weights = FieldWeights(*inputs.view.weights)
            index = self._indexes.get(name) or SearchIndex(weights=weights)
            if index.weights != weights:
                index = index.reweighted(weights)
            index = index.updated(search_sources(inputs.listings, catalog))
            self._indexes[name] = index
            catalog = attrs.evolve(catalog, search=index)
        else:
            self._indexes.pop(name, None)
        if catalog.switched is not None and before.switched is None:
            log.info("view_switched_to_search", profile=name, reason=catalog.switched)
        elif catalog.switched is None and before.switched is not None and self._built_from.get(name):
            log.info("view_lists_all_tools_again", profile=name, tools=len(catalog.tools))
        cell.set(catalog)
        self._built_from[name] = inputs
        self._report_schemas(catalog)
        return True

    def _report_schemas(self, catalog: Catalog) -> None:
        """Log each backend schema that is not valid JSON Schema once (its tool is served
        unvalidated; `assernctl status` lists them too)."""
        for tool, (server, problem) in catalog.schema_problems(since_built=False).items():
            key = (server, tool, problem)
            if key not in self._reported_schemas:
                self._reported_schemas.add(key)
                log.warning("backend_schema_invalid", server=server, tool=tool, problem=problem)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="router"):
            self.rebuild()
            task_status.started()
            async for _ in self.inbox:
                # Coalesce: everything already queued is covered by one rebuild.
                while True:
                    try:
                        self.inbox.receive_nowait()
                    except trio.WouldBlock:
                        break
                self.rebuild()
