"""Resource URIs, templates and prompts looked up as the client was shown them."""

from __future__ import annotations

import mcp_types as types
import pytest

from assern.actors.router.catalog import BackendListing, Catalog, Naming, build_catalog
from assern.actors.router.lookup import (
    ResourceTarget,
    UnknownResource,
    exposed_uri,
    resolve_resource,
    unknown_prompt_message,
)
from assern.actors.router.naming import template_pattern

RESOURCES = types.ServerCapabilities(resources=types.ResourcesCapability())
NOTHING = types.ServerCapabilities()


def backend(
    server: str,
    uris: tuple[str, ...] = (),
    templates: tuple[str, ...] = (),
    prompts: tuple[str, ...] = (),
    *,
    offers_resources: bool = True,
) -> BackendListing:
    return BackendListing(
        server=server,
        resources=tuple(types.Resource(name=u, uri=u) for u in uris),
        templates=tuple(types.ResourceTemplate(name=t, uri_template=t) for t in templates),
        prompts=tuple(types.Prompt(name=p) for p in prompts),
        capabilities=RESOURCES if offers_resources else NOTHING,
    )


def catalog(*listings: BackendListing, mode: Naming = "hybrid") -> Catalog:
    return build_catalog(listings, mode=mode)


# ----------------------------------------------------------------- exposure


def test_hybrid_exposes_unclashed_uris_and_templates_as_they_are() -> None:
    built = catalog(backend("fixture", ("test://static-text",), ("test://template/{id}/data",)))
    assert list(built.resources) == ["test://static-text"]
    assert [t.uri_template for t in built.templates] == ["test://template/{id}/data"]
    assert str(built.resources["test://static-text"].resource.uri) == "test://static-text"


def test_on_a_clash_the_first_server_in_configuration_order_keeps_the_natural_uri() -> None:
    built = catalog(
        backend("a", ("file:///x",), ("db://{table}",)),
        backend("b", ("file:///x", "file:///y"), ("db://{table}",)),
    )
    assert list(built.resources) == ["file:///x", "assern://b/file:///x", "file:///y"]
    assert [t.uri_template for t in built.templates] == ["db://{table}", "assern://b/db://{table}"]
    # The same listings in the other order: b comes first and keeps it.
    swapped = catalog(
        backend("b", ("file:///x",), ("db://{table}",)), backend("a", ("file:///x",), ("db://{table}",))
    )
    assert swapped.resources["file:///x"].server == "b"


def test_prefix_naming_keeps_the_original_rule() -> None:
    built = catalog(backend("fixture", ("test://static-text",), ("test://t/{id}",)), mode="prefix")
    assert list(built.resources) == ["assern://fixture/test://static-text"]
    assert [t.uri_template for t in built.templates] == ["assern://fixture/test://t/{id}"]


# ------------------------------------------------------------------- lookup


def test_listed_uris_resolve_in_both_forms() -> None:
    built = catalog(backend("a", ("file:///x",)), backend("b", ("file:///x",)))
    servers = {"a", "b"}
    assert resolve_resource(built, "file:///x", servers) == ResourceTarget("a", "file:///x", natural=True)
    assert resolve_resource(built, "assern://b/file:///x", servers) == ResourceTarget("b", "file:///x", False)
    assert resolve_resource(built, "assern://a/file:///x", servers) == ResourceTarget("a", "file:///x", False)


def test_a_template_itself_resolves_for_completion_refs() -> None:
    built = catalog(backend("fixture", templates=("test://template/{id}/data",)))
    target = resolve_resource(built, "test://template/{id}/data", {"fixture"})
    assert target == ResourceTarget("fixture", "test://template/{id}/data", natural=True)


def test_an_unlisted_uri_goes_to_the_one_backend_whose_template_matches() -> None:
    built = catalog(
        backend("fixture", templates=("test://template/{id}/data",)),
        backend("files", templates=("file:///{+path}",)),
    )
    assert resolve_resource(built, "test://template/123/data", set()).server == "fixture"
    assert resolve_resource(built, "file:///home/u/notes.txt", set()).server == "files"


def test_an_unlisted_uri_goes_to_the_only_backend_offering_resources() -> None:
    built = catalog(backend("files"), backend("calc", offers_resources=False))
    assert resolve_resource(built, "file:///anything", set()) == ResourceTarget(
        "files", "file:///anything", natural=True
    )


def test_ambiguous_or_unowned_uris_are_refused_with_the_candidates_named() -> None:
    two = catalog(backend("a", templates=("x://{id}",)), backend("b", templates=("x://{name}",)))
    with pytest.raises(UnknownResource, match=r"several servers \(a, b\).*assern://SERVER/x://1"):
        resolve_resource(two, "x://1", set())
    offering = catalog(backend("a"), backend("b"))
    with pytest.raises(UnknownResource, match=r"several servers offer resources \(a, b\)"):
        resolve_resource(offering, "mem://1", set())
    with pytest.raises(UnknownResource, match="no server offers resources"):
        resolve_resource(catalog(backend("calc", offers_resources=False)), "mem://1", set())


def test_prefix_naming_refuses_natural_uris_as_before() -> None:
    built = catalog(backend("fixture", ("test://static-text",)), mode="prefix")
    with pytest.raises(
        UnknownResource, match=r"assern://SERVER/ORIGINAL-URI.*assern://fixture/test://static-text"
    ):
        resolve_resource(built, "test://static-text", {"fixture"})
    assert (
        resolve_resource(built, "assern://fixture/test://dynamic", {"fixture"}).original == "test://dynamic"
    )


def test_an_assern_uri_of_a_configured_but_unlisted_server_is_routed_to_it() -> None:
    target = resolve_resource(catalog(), "assern://starting/file:///x", {"starting"})
    assert target == ResourceTarget("starting", "file:///x", natural=False)


def test_answers_use_the_form_the_client_used() -> None:
    built = catalog(backend("a", ("file:///x",)), backend("b", ("file:///x", "file:///y")))
    assert exposed_uri(built, "a", "file:///x", natural=True) == "file:///x"
    assert exposed_uri(built, "b", "file:///x", natural=True) == "assern://b/file:///x"  # a owns that form
    assert exposed_uri(built, "b", "file:///y", natural=True) == "file:///y"
    assert exposed_uri(built, "b", "file:///z", natural=True) == "file:///z"  # dynamic
    assert exposed_uri(built, "b", "file:///y", natural=False) == "assern://b/file:///y"
    prefix = catalog(backend("a", ("file:///x",)), mode="prefix")
    assert exposed_uri(prefix, "a", "file:///x", natural=True) == "assern://a/file:///x"


def test_unknown_prompts_get_suggestions() -> None:
    built = catalog(backend("fixture", prompts=("test_prompt_with_arguments", "test_simple_prompt")))
    assert "Did you mean: test_prompt_with_arguments" in unknown_prompt_message(
        built, "test_prompt_with_argument"
    )
    assert "Known prompts: test_prompt_with_arguments, test_simple_prompt" in unknown_prompt_message(
        built, "zzz"
    )


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("test://template/{id}/data", "test://template/123/data", True),
        ("test://template/{id}/data", "test://template/1/2/data", False),
        ("file:///{+path}", "file:///a/b/c.txt", True),
        ("s://x{?q,r}", "s://x?q=1&r=2", True),
        ("s://x{?q,r}", "s://x", True),
        ("s://x{/segments}", "s://x/a/b", True),
        ("s://{a}.{b}", "s://x.y", True),
        ("s://items", "s://items/1", False),
        ("s://a.b/{id}", "s://aXb/1", False),  # literal parts are literal
    ],
)
def test_template_patterns_follow_rfc_6570_operators(template: str, uri: str, matches: bool) -> None:
    assert bool(template_pattern(template).fullmatch(uri)) is matches
