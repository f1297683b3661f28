"""The semantic actor: keeps a vector of every tool of the catalog, in the background.

With the `assern[semantic]` extra installed and `[settings.search] semantic` not "off",
it loads the model in a worker thread, reads the vectors saved by earlier runs, and
after every new catalog embeds the tools it has no vector for (in a worker thread, so
the trio thread never waits on it), publishes the new `Semantic` snapshot and saves
the vectors. A search never waits for it: until a tool has its vector, it is ranked by
its words alone. Without the extra, or turned off, it publishes None and idles.
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
    """

    def __init__(
        self,
        catalog: Cell[Catalog],
        published: Cell[sem.Semantic | None],
        enabled: Callable[[], bool],
        cache_folder: Path | None,
        config: Cell[Any] | None = None,
    ) -> None:
        self.catalog = catalog
        self.config = config
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
            seen = (-1, -1)
            while True:
                seen = await self._changed(seen)
                catalog = self.catalog.value
                if not self._enabled():
                    if self.published.value is not None:
                        self.published.set(None)
                    continue
                if not await self._ready():
                    return
                await self._follow(catalog)

    async def _changed(self, seen: tuple[int, int]) -> tuple[int, int]:
        """Wait until the catalog or the configuration is newer than the `seen` versions."""
        config = self.config
        if config is None:
            version, _ = await self.catalog.changed(seen[0])
            return version, seen[1]
        if self.catalog.version > seen[0] or config.version > seen[1]:
            return self.catalog.version, config.version
        async with trio.open_nursery() as nursery:

            async def wake(cell: Cell[Any], version: int) -> None:
                await cell.changed(version)
                nursery.cancel_scope.cancel()

            nursery.start_soon(wake, self.catalog, seen[0])
            nursery.start_soon(wake, config, seen[1])
        return self.catalog.version, config.version

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
            sem.tool_key(route.server, route.original, route.tool): route for route in catalog.tools.values()
        }
        missing = [key for key in wanted if key not in self._vectors.keys]
        vectors = self._vectors
        if missing:
            started = trio.current_time()
            texts = [sem.tool_text(wanted[key].original, wanted[key].tool) for key in missing]
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
