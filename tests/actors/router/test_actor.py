"""The router actor: it publishes a catalog only when what the catalog is built from changed."""

from __future__ import annotations

from pathlib import Path

import attrs
import mcp_types as types

from assern.actors.config.spec import ServerSpec, Settings
from assern.actors.router.actor import RouterActor
from assern.actors.router.capabilities import CapabilityCache
from assern.actors.router.catalog import BackendListing, Catalog
from assern.supervisor.cell import Cell
from assern.supervisor.mailbox import open_mailbox


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"})


def listing(server: str, *names: str) -> BackendListing:
    return BackendListing(
        server=server,
        tools=tuple(tool(n) for n in names),
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability()),
    )


class World:
    """What the router reads: the backends' listings and the settings, as a test sets them."""

    def __init__(self) -> None:
        self.listings = [listing("github", "search"), listing("jira", "search")]
        self.settings = Settings()

    def router(
        self, cache: CapabilityCache | None = None, specs: dict[str, ServerSpec] | None = None
    ) -> RouterActor:
        _, inbox = open_mailbox(8)
        return RouterActor(
            inbox,
            Cell(Catalog()),
            lambda: self.listings,
            lambda: self.settings,
            specs=lambda: specs or {},
            capability_cache=cache,
        )


def test_unchanged_inputs_publish_nothing_new() -> None:
    world = World()
    router = world.router()
    first = router.rebuild()
    assert first.version == 1
    assert set(first.tools) == {"github_search", "jira_search"}
    version = router.catalog.version
    # a restarting backend keeps its listing: the same objects
    assert router.rebuild() is first
    # a restarted one lists the same tools again: new objects, equal content
    world.listings = [listing("github", "search"), listing("jira", "search")]
    assert router.rebuild() is first
    assert router.catalog.version == version  # nobody was woken


def test_a_changed_listing_or_setting_rebuilds() -> None:
    world = World()
    router = world.router()
    first = router.rebuild()
    world.listings = [listing("github", "search", "get_issue"), listing("jira", "search")]
    second = router.rebuild()
    assert second.version == first.version + 1
    assert "github_get_issue" in second.tools
    world.settings = attrs.evolve(world.settings, naming="hybrid")
    third = router.rebuild()
    assert third.version == second.version + 1
    assert "get_issue" in third.tools  # unique, so natural in hybrid mode
    world.listings = world.listings[:1]  # jira went away
    assert set(router.rebuild().tools) == {"search", "get_issue"}


def test_an_unchanged_catalog_still_records_capabilities_for_a_changed_start(tmp_path: Path) -> None:
    world = World()
    cache = CapabilityCache(tmp_path / "capabilities.json")
    specs = {"github": ServerSpec(name="github", transport="stdio", command="gh-mcp")}
    router = world.router(cache, specs)
    router.rebuild()
    recorded = (tmp_path / "capabilities.json").read_text()
    specs["github"] = ServerSpec(name="github", transport="stdio", command="gh-mcp", args=("--fast",))
    first = router.catalog.value
    assert router.rebuild() is first  # same listings: no new catalog ...
    assert (tmp_path / "capabilities.json").read_text() != recorded  # ... but the new start is known
