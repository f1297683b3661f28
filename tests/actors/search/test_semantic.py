"""Semantic ranking (the `assern[semantic]` extra): keys, vectors on disk, fusion, and the
background actor that keeps a vector of every tool."""

from __future__ import annotations

from pathlib import Path

import attrs
import mcp_types as types
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from assern.actors.config.spec import Profile, Settings
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog, search_sources
from assern.actors.search import semantic as sem
from assern.actors.search.index import SearchIndex
from assern.actors.search.semantic_actor import SemanticActor
from assern.supervisor.cell import Cell

pytest.importorskip("wordllama")
np = pytest.importorskip("numpy")


def tool(name: str, description: str, **params: str) -> types.Tool:
    properties = {key: {"type": "string", "description": text} for key, text in params.items()}
    return types.Tool(
        name=name, description=description, input_schema={"type": "object", "properties": properties}
    )


LISTINGS = [
    BackendListing(
        server="slack",
        tools=(
            tool("post_message", "Post a new message to a Slack channel.", channel_id="The channel"),
            tool("list_channels", "List public channels in the workspace."),
        ),
    ),
    BackendListing(
        server="github",
        tools=(
            tool("create_issue", "Create a new issue in a GitHub repository.", repo="Repository name"),
            tool("search_code", "Search for code across GitHub repositories.", q="Search query"),
        ),
    ),
    BackendListing(
        server="weather",
        tools=(tool("get_forecast", "Get the weather forecast for a location.", city="City name"),),
    ),
]


@pytest.fixture(scope="module")
def embedder() -> sem.Embedder:
    return sem.Embedder()


def catalog_of(listings: list[BackendListing]) -> Catalog:
    catalog = build_catalog(listings, exposure="search")
    return attrs.evolve(catalog, search=SearchIndex().updated(search_sources(listings, catalog)))


def semantic_of(embedder: sem.Embedder, catalog: Catalog) -> sem.Semantic:
    routes = list(catalog.tools.values())
    keys = [sem.tool_key(r.server, r.original, r.tool) for r in routes]
    matrix = embedder.embed([sem.tool_text(r.original, r.tool) for r in routes])
    return sem.Semantic(embedder, sem.Vectors.empty().extended(keys, matrix))


def test_the_model_loads_from_its_wheel_and_embeds_unit_vectors(embedder: sem.Embedder) -> None:
    assert sem.installed()
    matrix = embedder.embed(["send a message to the team", "weather tomorrow"])
    assert matrix.shape == (2, 256)
    assert matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)


def test_a_key_is_the_definition_not_the_exposed_name() -> None:
    listed = tool("post_message", "Post a message.")
    renamed = listed.model_copy(update={"name": "slack_post_message"})
    assert sem.tool_key("slack", "post_message", listed) == sem.tool_key("slack", "post_message", renamed)
    assert sem.tool_key("slack", "post_message", listed) != sem.tool_key("chat", "post_message", listed)
    changed = listed.model_copy(update={"description": "Post a message, now with threads."})
    assert sem.tool_key("slack", "post_message", listed) != sem.tool_key("slack", "post_message", changed)
    assert sem.tool_text("post_message", listed) == "post message Post a message."


def test_vectors_extend_keep_and_survive_a_round_trip_to_disk(tmp_path: Path) -> None:
    rows = np.eye(3, 256, dtype=np.float32)
    vectors = sem.Vectors.empty().extended(["a", "b"], rows[:2]).extended(["c"], rows[2:])
    assert vectors.keys == {"a": 0, "b": 1, "c": 2}
    kept = vectors.kept({"a", "c"})
    assert kept.keys == {"a": 0, "c": 1}
    assert np.array_equal(kept.matrix[1], rows[2])
    assert vectors.kept({"a", "b", "c"}) is vectors
    path = sem.cache_path(tmp_path)
    sem.save_vectors(path, kept)
    loaded = sem.load_vectors(path)
    assert loaded.keys == kept.keys
    assert np.array_equal(loaded.matrix, kept.matrix)
    assert list(tmp_path.iterdir()) == [path]  # no partial file left


def test_an_unreadable_cache_is_an_empty_one(tmp_path: Path) -> None:
    path = sem.cache_path(tmp_path)
    assert sem.load_vectors(path).keys == {}  # none yet
    path.write_bytes(b"not a numpy file")
    with capture_logs() as logs:
        assert sem.load_vectors(path).keys == {}
    assert logs[0]["event"] == "embedding_cache_unreadable"


def test_meaning_finds_a_tool_the_words_miss(embedder: sem.Embedder) -> None:
    catalog = catalog_of(LISTINGS)
    assert catalog.search is not None
    semantic = semantic_of(embedder, catalog)
    assert semantic.covers(catalog.search) == 1.0
    query = "will it rain in Paris tomorrow"
    assert not catalog.search.find(query).good  # no word of it names the tool
    found = sem.blended_find(catalog.search, semantic, query, limit=3)
    assert found.hits[0].doc.name == "weather_get_forecast"
    assert found.similarity is not None
    # by name: the exact tool first, whatever the meaning says
    exact = sem.blended_find(catalog.search, semantic, "slack_list_channels", limit=3)
    assert exact.hits[0].doc.name == "slack_list_channels"
    only = sem.blended_find(catalog.search, semantic, "send a chat message", limit=3, server="github")
    assert {hit.doc.server for hit in only.hits} <= {"github"}


def test_tools_without_a_vector_yet_are_ranked_by_words(embedder: sem.Embedder) -> None:
    catalog = catalog_of(LISTINGS)
    assert catalog.search is not None
    partial = semantic_of(embedder, catalog_of(LISTINGS[:1]))
    assert partial.covers(catalog.search) == pytest.approx(2 / 5)
    found = sem.blended_find(catalog.search, partial, "create an issue in the repository", limit=3)
    assert found.hits[0].doc.name == "github_create_issue"


async def test_the_actor_embeds_each_tool_once_and_keeps_the_vectors_on_disk(tmp_path: Path) -> None:
    catalog: Cell[Catalog] = Cell(Catalog())
    published: Cell[sem.Semantic | None] = Cell(None)
    enabled = [True]
    actor = SemanticActor(catalog, published, lambda: enabled[0], tmp_path)

    async def vectors(count: int | None) -> sem.Semantic | None:
        """What the actor publishes once it holds `count` vectors (None: turned off)."""
        with trio.fail_after(30):
            while True:
                value = published.value
                if (value is None and count is None) or (
                    value is not None and len(value.vectors.keys) == count
                ):
                    return value
                await published.changed(published.version)

    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            catalog.set(build_catalog(LISTINGS[:2]))
            await vectors(4)
            catalog.set(build_catalog(LISTINGS))
            value = await vectors(5)
            assert value is not None
            enabled[0] = False
            catalog.set(build_catalog(LISTINGS))
            await vectors(None)
            nursery.cancel_scope.cancel()
    embedded = [e["tools"] for e in logs if e["event"] == "tools_embedded"]
    assert embedded == [4, 1]  # the second catalog's new tool only
    assert sem.load_vectors(sem.cache_path(tmp_path)).keys.keys() == value.vectors.keys.keys()

    # A reload that only turns it off changes no catalog: the configuration wakes it.
    config: Cell[str] = Cell("on")
    switched: Cell[sem.Semantic | None] = Cell(None)
    on = [True]
    follower = SemanticActor(catalog, switched, lambda: on[0], tmp_path, config=config)
    async with trio.open_nursery() as nursery:
        await nursery.start(follower.run)
        with trio.fail_after(30):
            await switched.changed(0)
        on[0] = False
        config.set("off")
        with trio.fail_after(30):
            await switched.changed(1)
        assert switched.value is None
        nursery.cancel_scope.cancel()

    # A restart finds every vector on disk: nothing is embedded again.
    again: Cell[sem.Semantic | None] = Cell(None)
    restarted = SemanticActor(catalog, again, lambda: True, tmp_path)
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            await nursery.start(restarted.run)
            with trio.fail_after(30):
                await again.changed(0)
            nursery.cancel_scope.cancel()
    assert not [e for e in logs if e["event"] == "tools_embedded"]
    loaded = next(e for e in logs if e["event"] == "semantic_model_loaded")
    assert loaded["cached"] == 5


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (Settings(), False),
        (Settings(exposure="grouped"), False),
        (Settings(exposure="search"), True),
        (Settings(max_tools=40), True),
        (Settings(max_list_tokens=5000), True),
        (Settings(profiles=(Profile(name="cursor", exposure="search"),)), True),
        (Settings(profiles=(Profile(name="small", max_tools=10),)), True),
        (Settings(profiles=(Profile(name="plain", exposure="all"),)), False),
    ],
)
def test_search_is_expected_where_the_settings_may_serve_it(settings: Settings, expected: bool) -> None:
    assert sem.search_expected(settings) is expected


def vectors_of(published: Cell[sem.Semantic | None]) -> sem.Semantic:
    value = published.value
    assert value is not None
    return value


async def test_the_model_waits_for_the_first_search_where_no_search_is_served(tmp_path: Path) -> None:
    catalog: Cell[Catalog] = Cell(Catalog())
    published: Cell[sem.Semantic | None] = Cell(None)
    searched = trio.Event()
    actor = SemanticActor(
        catalog, published, lambda: True, tmp_path, expected=lambda: False, searched=searched
    )
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            catalog.set(build_catalog(LISTINGS))
            await trio.testing.wait_all_tasks_blocked()
            assert published.value is None
            assert not [e for e in logs if e["event"] == "semantic_model_loaded"]
            searched.set()  # the first search: from now on the vectors follow the catalog
            with trio.fail_after(30):
                await published.changed(0)
            assert len(vectors_of(published).vectors.keys) == 5
            nursery.cancel_scope.cancel()
    assert [e["event"] for e in logs if e["event"] == "semantic_model_loaded"] == ["semantic_model_loaded"]
