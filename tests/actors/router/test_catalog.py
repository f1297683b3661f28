"""Catalog building and routing, without I/O."""

import json

import mcp_types as types

from assern.actors.router.catalog import (
    BackendListing,
    build_catalog,
    is_allowed,
    suggest_tools,
    unknown_tool_message,
)


def tool(name: str, description: str = "") -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


def listing(server: str, *tools: str, **kw: object) -> BackendListing:
    # `kw` holds the other fields a test sets, each of its own type.
    return BackendListing(server=server, tools=tuple(tool(t) for t in tools), **kw)  # type: ignore[arg-type]


def test_tools_are_prefixed_and_routed_to_their_owner() -> None:
    catalog = build_catalog([listing("github", "search", "get_issue"), listing("jira", "search")])
    assert list(catalog.tools) == ["github_search", "github_get_issue", "jira_search"]
    route = catalog.tools["jira_search"]
    assert (route.server, route.original, route.tool.name) == ("jira", "search", "jira_search")
    assert catalog.by_base["search"] == ("github_search", "jira_search")


def test_a_catalog_holds_the_backends_definitions_and_lists_them_under_exposed_names() -> None:
    gh = listing("gh", "search", "get_issue")
    catalog = build_catalog([gh])
    # One object per backend tool: the route keeps the backend's own definition, not a copy.
    assert [route.definition for route in catalog.tools.values()] == list(gh.tools)
    assert all(r.definition is t for r, t in zip(catalog.tools.values(), gh.tools, strict=True))
    assert [tool["name"] for tool in json.loads(catalog.tools_json)] == ["gh_search", "gh_get_issue"]
    assert [tool.name for tool in catalog.listed] == ["gh_search", "gh_get_issue"]
    assert catalog.listed_names == ["gh_search", "gh_get_issue"]
    assert catalog.listed[0].input_schema == gh.tools[0].input_schema
    assert catalog.listed is catalog.listed  # made once, on the first ask


def test_allowed_hides_from_the_list_and_is_remembered_for_refusal() -> None:
    catalog = build_catalog(
        [listing("gh", "search_repos", "get_a", "delete_repo", allowed=("search_*", "get_*"))]
    )
    assert list(catalog.tools) == ["gh_search_repos", "gh_get_a"]
    assert catalog.hidden == {"gh_delete_repo": "gh"}
    assert is_allowed("x", None)
    assert not is_allowed("delete_repo", ("get_*",))


def test_prompts_resources_and_templates_are_namespaced() -> None:
    catalog = build_catalog(
        [
            BackendListing(
                server="templates",
                prompts=(
                    types.Prompt(
                        name="generate-code", arguments=[types.PromptArgument(name="lang", required=True)]
                    ),
                ),
                resources=(types.Resource(name="doc", uri="file:///home/user/doc.txt"),),
                templates=(types.ResourceTemplate(name="item", uri_template="test://items/{id}"),),
            )
        ]
    )
    prompt = catalog.prompts["templates_generate_code"]
    assert prompt.original == "generate-code"
    assert prompt.prompt.arguments is not None
    assert prompt.prompt.arguments[0].name == "lang"
    resource = catalog.resources["assern://templates/file:///home/user/doc.txt"]
    assert resource.original == "file:///home/user/doc.txt"
    assert str(resource.resource.uri) == "assern://templates/file:///home/user/doc.txt"
    assert catalog.templates[0].template.uri_template == "assern://templates/test://items/{id}"


def test_collisions_are_never_fatal() -> None:
    # `a-b` and `a_b` both want the prefix `a_b`.
    catalog = build_catalog([listing("a-b", "x"), listing("a_b", "x")])
    assert len(catalog.tools) == 2
    assert "a_b_x" in catalog.tools
    other = next(name for name in catalog.tools if name != "a_b_x")
    assert catalog.tools[other].server == "a_b"
    # The same inputs always give the same names.
    assert list(build_catalog([listing("a-b", "x"), listing("a_b", "x")]).tools) == list(catalog.tools)


def test_hybrid_naming_keeps_unique_names() -> None:
    catalog = build_catalog(
        [listing("github", "search", "get_issue"), listing("jira", "search")], mode="hybrid"
    )
    assert set(catalog.tools) == {"github_search", "jira_search", "get_issue"}


def test_long_names_fit_the_limit() -> None:
    catalog = build_catalog(
        [listing("a-really-long-server-name", "an_extremely_long_tool_name_" * 3)], max_name_length=64
    )
    (name,) = catalog.tools
    assert len(name) <= 64
    assert catalog.tools[name].original == "an_extremely_long_tool_name_" * 3


def test_unknown_tool_suggestions_name_close_names_and_owners() -> None:
    catalog = build_catalog([listing("github", "search", "get_issue"), listing("jira", "search")])
    suggestions = suggest_tools(catalog, "search")
    assert suggestions.same_base == (("github", "github_search"), ("jira", "jira_search"))
    message = unknown_tool_message("search", suggestions)
    assert "github (github_search)" in message
    assert "jira (jira_search)" in message

    typo = suggest_tools(catalog, "github_get_isue")
    assert "github_get_issue" in typo.close
    assert "Did you mean: github_get_issue" in unknown_tool_message("github_get_isue", typo)

    prefixed = suggest_tools(catalog, "jira_get_issue")
    assert ("github", "github_get_issue") in prefixed.same_base

    nothing = suggest_tools(catalog, "zzz")
    assert nothing.close == ()
    assert nothing.same_base == ()
    assert "tools/list" in unknown_tool_message("zzz", nothing)


def test_schema_problems_known_at_build_and_found_by_a_first_call() -> None:
    not_schema = types.Tool(name="a", input_schema={"type": "object", "properties": {"x": {"type": 5}}})
    uncompilable = types.Tool(
        name="b", input_schema={"type": "object", "properties": {"x": {"pattern": "(["}}}
    )
    catalog = build_catalog([BackendListing(server="s", tools=(not_schema, uncompilable))])
    assert set(catalog.schema_problems()) == {"s_a"}
    gate = catalog.tools["s_b"].gate
    assert gate is not None
    assert gate.input_problems({"x": "y"}) == []  # the first call compiles: it fails
    assert set(catalog.schema_problems()) == {"s_a", "s_b"}  # assernctl status lists both
    assert set(catalog.schema_problems(since_built=False)) == {"s_a"}  # the router logged that one


def test_a_tool_s_input_schema_is_found_by_the_name_a_client_calls() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    typed = types.Tool(name="search", input_schema=schema)
    catalog = build_catalog([BackendListing(server="gh", tools=(typed,)), listing("jira", "get")])
    assert catalog.input_schema("gh_search") == schema
    assert catalog.input_schema("jira_get") == {"type": "object"}
    assert catalog.input_schema("search") is None  # not a name any client is given
    grouped = build_catalog([BackendListing(server="gh", tools=(typed,))], exposure="grouped")
    assert grouped.input_schema("gh") == grouped.groups["gh"].tool.input_schema
    searched = build_catalog([BackendListing(server="gh", tools=(typed,))], exposure="search")
    [meta, *_] = searched.listed
    assert searched.input_schema(meta.name) == meta.input_schema
    assert searched.input_schema("gh_search") == schema  # found by search, callable by name
