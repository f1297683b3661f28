"""Grouped exposure without I/O: the merged schema, the description, the annotations,
the routing of an action, and the catalog's grouped view."""

from typing import Any

import mcp_types as types

from assern.actors.config.spec import CallRules, Group
from assern.actors.router.catalog import BackendListing, build_catalog
from assern.actors.router.grouped import (
    Action,
    actions_toon,
    build_group,
    group_description,
    merged_annotations,
    merged_schema,
)

READ = types.ToolAnnotations(read_only_hint=True)


def tool(name: str, properties: dict[str, Any], required: list[str], **kw: Any) -> types.Tool:
    schema = {"type": "object", "properties": properties, "required": required}
    return types.Tool(name=name, input_schema=schema, **kw)


ISSUES = [
    tool(
        "get_issue",
        {"repo": {"type": "string", "description": "owner/name"}, "number": {"type": "integer"}},
        ["repo", "number"],
        description="Get one issue.\nWith its comments.",
        annotations=READ,
    ),
    tool(
        "create_issue",
        {"repo": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"}},
        ["repo", "title"],
        description="Create an issue.",
        annotations=types.ToolAnnotations(destructive_hint=False),
    ),
    tool(
        "close_issue",
        {"repo": {"type": "string"}, "number": {"type": "string"}},
        ["repo"],
        description="Close an issue.",
    ),
]


def actions(tools: list[types.Tool] = ISSUES, server: str = "gh") -> list[Action]:
    return [Action(key=t.name, name=f"{server}_{t.name}", server=server, tool=t) for t in tools]


def test_the_merged_schema_names_which_action_takes_each_parameter() -> None:
    schema = merged_schema(actions())
    assert schema["type"] == "object"
    assert schema["required"] == ["action", "repo"]
    props = schema["properties"]
    assert props["action"]["enum"] == ["get_issue", "create_issue", "close_issue"]
    assert props["repo"] == {"type": "string", "description": "owner/name (always required)"}
    assert props["title"]["description"] == "Required for: create_issue"
    assert props["body"]["description"] == "For: create_issue"


def test_a_parameter_typed_differently_by_actions_keeps_each_type() -> None:
    number = merged_schema(actions())["properties"]["number"]
    assert number["anyOf"] == [
        {"type": "integer", "title": "for get_issue"},
        {"type": "string", "title": "for close_issue"},
    ]
    assert number["description"] == "Required for: get_issue. For: close_issue"


def test_the_description_lists_actions_and_marks_destructive_ones() -> None:
    text = group_description("Issues of gh.", actions(), "text")
    assert text == (
        "Issues of gh.\n\nActions:\n"
        "- get_issue: Get one issue.\n"
        "- create_issue: Create an issue.\n"
        "- close_issue: Close an issue. [DESTRUCTIVE]"
    )


def test_toon_is_used_only_where_it_is_shorter() -> None:
    assert actions_toon(actions()) == (
        "actions[3]{action,does}:\n"
        "  get_issue,Get one issue.\n"
        "  create_issue,Create an issue.\n"
        '  close_issue,"Close an issue. [DESTRUCTIVE]"'
    )
    # a few actions read shorter as text; many read shorter as a table
    assert "Actions:" in group_description("h", actions(), "toon")
    many = [tool(f"tool_{i}", {}, [], description=f"Does thing {i}", annotations=READ) for i in range(30)]
    assert "actions[30]{action,does}:" in group_description("h", actions(many), "toon")
    assert "Actions:" in group_description("h", actions(many), "text")
    quoted = [tool("a", {}, [], description='Says "hi", then: bye')]
    assert actions_toon(actions(quoted)).endswith('a,"Says \\"hi\\", then: bye [DESTRUCTIVE]"')


def test_the_annotations_are_the_most_cautious_of_the_actions() -> None:
    merged = merged_annotations(actions())
    assert (merged.read_only_hint, merged.destructive_hint) == (False, True)
    assert merged.idempotent_hint is False
    assert merged.open_world_hint is True
    reading = merged_annotations(actions([ISSUES[0]]))
    assert (reading.read_only_hint, reading.destructive_hint) == (True, False)


def test_a_call_is_routed_to_its_action_without_the_action_field() -> None:
    group = build_group("gh", "head", actions(), "text")
    chosen = group.resolve({"action": "get_issue", "repo": "a/b", "number": 1})
    assert not isinstance(chosen, str)
    assert (chosen[0].name, chosen[1]) == ("gh_get_issue", {"repo": "a/b", "number": 1})
    assert group.resolve({"repo": "x"}) == (
        "gh: `action` is required; it is one of: get_issue, create_issue, close_issue."
    )
    assert group.resolve({"action": "get_isue"}) == (
        'gh: unknown action "get_isue". Did you mean `get_issue`? '
        "Actions: get_issue, create_issue, close_issue."
    )


def test_the_grouped_catalog_lists_one_tool_per_server_and_keeps_every_name_callable() -> None:
    listings = [
        BackendListing(server="gh", tools=tuple(ISSUES), instructions="GitHub for the team."),
        BackendListing(server="my-notes", tools=(tool("gh", {}, [], annotations=READ),)),
    ]
    catalog = build_catalog(listings, exposure="grouped", mode="hybrid")
    assert [t.name for t in catalog.listed] == ["gh", "my_notes"]
    assert set(catalog.groups) == {"gh", "my_notes"}
    description = catalog.groups["gh"].tool.description or ""
    assert description.startswith("GitHub for the team.\nThe 3 tools of the 'gh' server")
    # the natural name `gh` is the group's: the backend's tool of that name is prefixed
    assert "my_notes_gh" in catalog.tools
    assert catalog.groups["my_notes"].actions["gh"].name == "my_notes_gh"
    gate = catalog.tools["get_issue"].gate
    assert gate is not None
    assert gate.validate == "strict"  # grouped tools are validated strictly by default


def test_configured_groups_gather_tools_across_servers() -> None:
    listings = [
        BackendListing(server="gh", tools=tuple(ISSUES)),
        BackendListing(server="jira", tools=(tool("create_issue", {"key": {"type": "string"}}, ["key"]),)),
        BackendListing(server="time", tools=(tool("now", {}, [], annotations=READ),)),
    ]
    groups = (Group(name="issues", tools=("*_create_issue", "gh_get_*"), description="Every tracker."),)
    catalog = build_catalog(listings, exposure="grouped", groups=groups)
    # a tool no group takes is listed as itself
    assert [t.name for t in catalog.listed] == ["issues", "gh_close_issue", "time_now"]
    group = catalog.groups["issues"]
    assert list(group.actions) == ["gh.get_issue", "gh.create_issue", "jira.create_issue"]
    assert "gh:\n  - gh.get_issue" in (group.tool.description or "")
    assert (group.tool.description or "").startswith("Every tracker.")


def test_denied_tools_are_no_action() -> None:
    listings = [BackendListing(server="gh", tools=tuple(ISSUES))]
    catalog = build_catalog(listings, exposure="grouped", rules=CallRules(deny=("*close*",)))
    assert list(catalog.groups["gh"].actions) == ["get_issue", "create_issue"]
