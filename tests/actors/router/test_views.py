"""Views of the catalog: profiles chosen by client name, their filters, and the
automatic switch to search exposure."""

from __future__ import annotations

import mcp_types as types
import pytest

from assern.actors.config.spec import Profile, Settings
from assern.actors.router.catalog import BackendListing
from assern.actors.router.views import (
    View,
    build_view,
    choose_profile,
    estimate_tokens,
    profile_view,
    settings_view,
    views,
)
from assern.actors.search.meta_tools import META_TOOLS


def tool(name: str, description: str = "") -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


def listing(server: str, *names: str) -> BackendListing:
    return BackendListing(server=server, tools=tuple(tool(n, f"{n} of {server}") for n in names))


LISTINGS = [
    listing("github", "search", "create_issue", "delete_repo"),
    listing("jira", "search", "create_issue"),
    listing("time", "get_current_time"),
]


def test_the_first_profile_whose_globs_take_the_client_name_wins() -> None:
    profiles = (
        Profile(name="cursor", match=("cursor*",)),
        Profile(name="local", match=("ollama*", "lm-*")),
        Profile(name="any-cursor", match=("*cursor*",)),
    )
    assert choose_profile(profiles, "cursor-vscode") == "cursor"
    assert choose_profile(profiles, "my-cursor") == "any-cursor"
    assert choose_profile(profiles, "lm-studio") == "local"
    assert choose_profile(profiles, "claude-code") is None
    assert choose_profile(profiles, None) is None
    assert choose_profile((Profile(name="by-flag-only"),), "anything") is None  # no match globs


def test_a_profile_takes_the_settings_for_what_it_leaves_unset() -> None:
    settings = Settings(
        naming="hybrid",
        max_name_length=40,
        exposure="search",
        pinned=("time_*",),
        max_tools=50,
        profiles=(Profile(name="small", exposure="all", max_tools=20), Profile(name="same")),
    )
    found = views(settings)
    assert list(found) == [None, "small", "same"]
    assert found[None] == settings_view(settings)
    small = profile_view(settings, settings.profiles[0])
    assert (small.profile, small.naming, small.max_name_length) == ("small", "hybrid", 40)
    assert (small.exposure, small.pinned, small.max_tools) == ("all", ("time_*",), 20)
    assert found["same"] == View(
        profile="same",
        naming="hybrid",
        max_name_length=40,
        exposure="search",
        pinned=("time_*",),
        max_tools=50,
    )


def test_servers_left_out_are_absent_and_their_tools_refused_as_outside() -> None:
    catalog = build_view(LISTINGS, View(profile="p", naming="hybrid", exclude_servers=("jira",)))
    # `search` and `create_issue` clash only with the left-out server: natural names now
    assert list(catalog.tools) == ["search", "create_issue", "delete_repo", "get_current_time"]
    assert catalog.servers == {"github", "time"}
    assert not catalog.shows_server("jira")
    assert catalog.shows_server("github")
    assert catalog.outside["jira_search"] == "jira"
    assert "search" not in catalog.outside  # that name is github's here
    only = build_view(LISTINGS, View(servers=("time",)))
    assert list(only.tools) == ["time_get_current_time"]
    assert only.outside["github_delete_repo"] == "github"


def test_tool_globs_match_the_exposed_name_or_server_tool() -> None:
    view = View(
        profile="p", naming="hybrid", tools=("github_*", "get_current_time"), exclude_tools=("*delete*",)
    )
    catalog = build_view(LISTINGS, view)
    assert list(catalog.tools) == ["github_search", "github_create_issue", "get_current_time"]
    assert set(catalog.outside) == {"delete_repo", "jira_search", "jira_create_issue"}
    # names never depend on the filter: jira's tools still make github's prefixed
    assert catalog.by_base["search"] == ("github_search",)


def test_past_max_tools_the_view_is_served_in_search_exposure() -> None:
    under = build_view(LISTINGS, View(max_tools=6))
    assert (under.exposure, under.switched) == ("all", None)
    over = build_view(LISTINGS, View(profile="small", max_tools=5))
    assert over.exposure == "search"
    assert over.switched == "6 tools > max_tools 5"
    assert [t.name for t in over.listed] == list(META_TOOLS)
    assert len(over.tools) == 6  # every tool stays callable and searchable
    # a view that asks for search is not "switched"
    assert build_view(LISTINGS, View(exposure="search", max_tools=1)).switched is None


def test_past_max_list_tokens_the_view_is_served_in_search_exposure() -> None:
    many = [listing(f"s{n}", *(f"tool_{i}" for i in range(20))) for n in range(10)]
    tokens = estimate_tokens(build_view(many, View()).tools_json)
    assert build_view(many, View(max_list_tokens=tokens)).exposure == "all"
    over = build_view(many, View(max_list_tokens=tokens - 1))
    assert over.exposure == "search"
    assert over.switched == f"about {tokens} tokens > max_list_tokens {tokens - 1}"
    assert estimate_tokens(over.tools_json) < tokens / 5


def test_a_token_budget_below_the_meta_tools_own_size_keeps_the_full_list() -> None:
    """Search exposure would list more than the few tools there are: no switch."""
    tokens = estimate_tokens(build_view(LISTINGS, View()).tools_json)
    catalog = build_view(LISTINGS, View(max_list_tokens=tokens - 1))
    assert (catalog.exposure, catalog.switched) == ("all", None)


@pytest.mark.parametrize(("data", "tokens"), [(b"", 0), (b"abcd", 1), ("abcde", 2), (b"x" * 4000, 1000)])
def test_tokens_are_estimated_at_four_bytes_each(data: bytes | str, tokens: int) -> None:
    assert estimate_tokens(data) == tokens
