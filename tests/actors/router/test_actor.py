"""The router actor: it publishes a catalog only when what the catalog is built from changed."""

from __future__ import annotations

from pathlib import Path

import attrs
import mcp_types as types
from structlog.testing import capture_logs

from assern.actors.config.spec import Profile, SearchSettings, ServerSpec, Settings
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


def test_every_profile_gets_its_own_catalog_cell() -> None:
    world = World()
    world.settings = Settings(
        profiles=(
            Profile(name="jira-only", servers=("jira",)),
            Profile(name="hybrid", naming="hybrid", exclude_servers=("jira",)),
        )
    )
    router = world.router()
    default = router.rebuild()
    assert set(default.tools) == {"github_search", "jira_search"}
    assert set(router.views.cell("jira-only").value.tools) == {"jira_search"}
    hybrid = router.views.cell("hybrid")
    assert set(hybrid.value.tools) == {"search"}  # no clash once jira is left out
    assert hybrid.value.profile == "hybrid"
    # A name that is no profile reads the settings' view.
    assert router.views.cell("nope").value is default
    version = hybrid.version
    world.listings = [*world.listings, listing("time", "now")]
    router.rebuild()
    assert set(hybrid.value.tools) == {"search", "now"}
    assert hybrid.version == version + 1


def test_a_profile_a_reload_removes_shows_the_settings_view_to_its_clients() -> None:
    world = World()
    world.settings = Settings(profiles=(Profile(name="small", servers=("github",)),))
    router = world.router()
    router.rebuild()
    cell = router.views.cell("small")
    assert set(cell.value.tools) == {"github_search"}
    world.settings = Settings()
    default = router.rebuild()
    assert cell.value is default
    world.settings = Settings(profiles=(Profile(name="small", servers=("jira",)),))
    router.rebuild()
    assert set(cell.value.tools) == {"jira_search"}  # and it comes back to the same cell


def test_a_view_switched_to_search_says_so_once() -> None:
    world = World()
    world.settings = Settings(profiles=(Profile(name="small", max_tools=2),))
    router = world.router()
    with capture_logs() as logs:
        router.rebuild()
        world.listings = [*world.listings, listing("time", "now")]
        router.rebuild()  # over the limit: switched
        world.listings = [*world.listings, listing("clock", "tick")]
        router.rebuild()  # still over: nothing more said
        world.listings = world.listings[:1]
        router.rebuild()  # back under
    events = [(e["event"], e.get("profile")) for e in logs if e["event"].startswith("view_")]
    assert events == [("view_switched_to_search", "small"), ("view_lists_all_tools_again", "small")]
    switched = next(e for e in logs if e["event"] == "view_switched_to_search")
    assert switched["reason"] == "3 tools > max_tools 2"
    assert router.views.cell("small").value.exposure == "all"


def test_each_search_view_keeps_its_own_index_updated() -> None:
    world = World()
    world.settings = Settings(exposure="search", profiles=(Profile(name="hybrid", naming="hybrid"),))
    router = world.router()
    router.rebuild()
    hybrid = router.views.cell("hybrid").value
    assert hybrid.search is not None
    assert router.catalog.value.search is not None
    assert {h.doc.name for h in hybrid.search.find("search").hits} == {"github_search", "jira_search"}
    world.listings = [*world.listings, listing("time", "now")]
    router.rebuild()
    found = router.views.cell("hybrid").value.search
    assert found is not None
    assert [h.doc.name for h in found.find("now").hits] == ["now"]
    assert [h.doc.name for h in router.catalog.value.search.find("now").hits] == ["time_now"]


def test_new_field_weights_rescore_the_same_index() -> None:
    world = World()
    world.settings = Settings(exposure="search")
    router = world.router()
    first = router.rebuild().search
    assert first is not None
    world.settings = Settings(exposure="search", search=SearchSettings(name=5.0))
    second = router.rebuild().search
    assert second is not None
    assert second.weights.name == 5.0
    assert second.segments == first.segments  # nothing analysed again
