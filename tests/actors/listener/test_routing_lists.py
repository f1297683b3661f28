"""Which lists a client is told changed: only one it was given, and only when it differs."""

from __future__ import annotations

import mcp_types as types
from fake_backend import setup, tool

from assern.actors.listener.routing import Routing, changed_lists
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog


def listed(
    tools: tuple[str, ...] = ("echo",),
    prompts: tuple[str, ...] = (),
    resources: tuple[str, ...] = (),
    templates: tuple[str, ...] = (),
) -> Catalog:
    listing = BackendListing(
        server="a",
        tools=tuple(tool(name) for name in tools),
        prompts=tuple(types.Prompt(name=name) for name in prompts),
        resources=tuple(types.Resource(name=uri, uri=uri) for uri in resources),
        templates=tuple(types.ResourceTemplate(name=uri, uri_template=uri) for uri in templates),
    )
    return build_catalog([listing])


def test_no_change_in_an_equal_catalog() -> None:
    assert changed_lists(listed(prompts=("p",)), listed(prompts=("p",))) == []


def test_each_kind_of_list_is_told_apart() -> None:
    base = listed()
    assert changed_lists(base, listed(tools=("echo", "late"))) == ["tools"]
    assert changed_lists(base, listed(prompts=("p",))) == ["prompts"]
    assert changed_lists(base, listed(resources=("note://1",))) == ["resources"]
    assert changed_lists(base, listed(templates=("note://{id}",))) == ["resources"]


def test_nothing_is_announced_before_a_list_of_its_kind_was_given() -> None:
    routing = Routing(setup("echo").shared)
    assert routing.to_announce(listed(tools=("echo", "late"), prompts=("p",))) == []


def test_the_catalog_a_list_was_answered_from_is_not_announced() -> None:
    """The catalog moved while the list waited, and the answer carried it: nothing to tell."""
    routing = Routing(setup("echo").shared)
    answered = listed(prompts=("p",))
    routing.given["prompts"] = answered
    assert routing.to_announce(answered) == []
    assert routing.to_announce(listed(prompts=("p",))) == []  # rebuilt, the same prompts


def test_a_change_of_a_given_list_is_announced_once() -> None:
    routing = Routing(setup("echo").shared)
    routing.given["prompts"] = listed(prompts=("p",))
    changed = listed(prompts=("p", "q"))
    assert routing.to_announce(changed) == ["prompts"]
    assert routing.to_announce(changed) == []
    # The tools changed, but the client was never given them: no word of it.
    assert routing.to_announce(listed(tools=("echo", "late"), prompts=("p", "q"))) == []
