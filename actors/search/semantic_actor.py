"""The semantic actor: keeps a vector of every tool of the catalog, in the background.

With the `assern[semantic]` extra installed and `[settings.search] semantic` not "off",
once search can be served (the settings or a profile serve search exposure, or may
switch to it past `max_tools` or `max_list_tokens`) or a first search was made (an
`assernctl find`, say), it loads the model in a worker thread, reads the vectors saved by earlier runs, and
after every new catalog embeds the tools it has no vector for (in a worker thread, so
the trio thread never waits on it), publishes the new `Semantic` snapshot and saves
the vectors. A search never waits for it: until a tool has its vector, it is ranked by
its words alone. Without the extra, or turned off, it publishes None and idles; until
search is wanted it loads nothing, so an instance that never searches spends neither
the model's start-up time nor its memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog
import trio

from assern.actors.search import semantic as sem

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from assern.actors.router.catalog import Catalog
    from assern.supervisor.cell import Cell

log = structlog.get_logger()


class SemanticActor:
    """Args:
    catalog: The settings' view of the catalog (every server's tools).
    published: Where the snapshot goes (None: ranking by words only).
    enabled: Whether the settings ask for semantic ranking now.
    cache_folder: Where the vectors are saved between runs (None: not saved).
    config: The configuration's cell: a reload that only turns semantic ranking on or off
        changes no catalog, so its change wakes the actor too.
    expected: Whether the settings may serve search (None: always; see `search_expected`).
    searched: Set by the first search: the model is wanted from then on, and its setting
        wakes the actor.
    """

    def __init__(
        self,
        catalog: Cell[Catalog],
        published: Cell[sem.Semantic | None],
        enabled: Callable[[], bool],
        cache_folder: Path | None,
        config: Cell[Any] | None = None,
        expected: Callable[[], bool] | None = None,
        searched: trio.Event | None = None,
    ) -> None:
        self.catalog = catalog
        self.config = config
        self._expected = expected
        self._searched = searched
        self.published = published
        self._enabled = enabled
        self._cache = sem.cache_path(cache_folder) if cache_folder is not None else None
        self._embedder: sem.Embedder | None = None
        self._vectors: sem.Vectors | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="semantic"):
            task_status.started()
            if not sem.installed():
                log.debug("semantic_ranking_not_installed")
                return
            seen = (-1, -1, False)
            while True:
                seen = await self._changed(seen)
                catalog = self.catalog.value
                if not self._enabled():
                    if self.published.value is not None:
                        self.published.set(None)
                    continue
                if not self._wanted():
                    continue
                if not await self._ready():
                    return
                await self._follow(catalog)

    def _wanted(self) -> bool:
        """Whether the model is wanted: loaded already, a search was made, or the
        settings may serve search."""
        if self._embedder is not None or self._expected is None or self._expected():
            return True
        return self._searched is not None and self._searched.is_set()

    def _now(self) -> tuple[int, int, bool]:
        config = self.config.version if self.config is not None else -1
        searched = self._searched is not None and self._searched.is_set()
        return self.catalog.version, config, searched

    async def _changed(self, seen: tuple[int, int, bool]) -> tuple[int, int, bool]:
        """Wait until the catalog or the configuration is newer than `seen`, or the
        first search was made."""
        if self._now() != seen:
            return self._now()
        async with trio.open_nursery() as nursery:

            async def wake(cell: Cell[Any], version: int) -> None:
                await cell.changed(version)
                nursery.cancel_scope.cancel()

            async def searched(event: trio.Event) -> None:
                await event.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(wake, self.catalog, seen[0])
            if self.config is not None:
                nursery.start_soon(wake, self.config, seen[1])
            if self._searched is not None and not seen[2]:
                nursery.start_soon(searched, self._searched)
        return self._now()

    async def _ready(self) -> bool:
        """Load the model and the saved vectors once; False when the model cannot load."""
        if self._embedder is not None:
            return True
        started = trio.current_time()
        try:
            self._embedder = await trio.to_thread.run_sync(sem.Embedder)
        except (ImportError, OSError) as exc:
            log.warning("semantic_ranking_unavailable", error=str(exc))
            return False
        cache = self._cache
        self._vectors = (
            await trio.to_thread.run_sync(sem.load_vectors, cache)
            if cache is not None
            else sem.Vectors.empty()
        )
        log.info(
            "semantic_model_loaded",
            model=sem.MODEL,
            cached=len(self._vectors.keys),
            duration_ms=round((trio.current_time() - started) * 1000, 1),
        )
        return True

    async def _follow(self, catalog: Catalog) -> None:
        """Embed what `catalog` has that the vectors do not, and publish."""
        assert self._embedder is not None
        assert self._vectors is not None
        wanted = {
            sem.tool_key(route.server, route.original, route.definition): route
            for route in catalog.tools.values()
        }
        missing = [key for key in wanted if key not in self._vectors.keys]
        vectors = self._vectors
        if missing:
            started = trio.current_time()
            texts = [sem.tool_text(wanted[key].original, wanted[key].definition) for key in missing]
            matrix = await trio.to_thread.run_sync(self._embedder.embed, texts)
            vectors = vectors.extended(missing, matrix)
            log.info(
                "tools_embedded",
                tools=len(missing),
                duration_ms=round((trio.current_time() - started) * 1000, 1),
            )
        vectors = vectors.kept(set(wanted))
        changed = vectors is not self._vectors
        self._vectors = vectors
        current = self.published.value
        if current is None or current.vectors is not vectors:
            self.published.set(sem.Semantic(self._embedder, vectors))
        if changed and self._cache is not None:
            await trio.to_thread.run_sync(sem.save_vectors, self._cache, vectors)
