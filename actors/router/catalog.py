"""Pure catalog building: the merged, prefixed view of every backend's listings.

The router is the single writer: it rebuilds a `Catalog` from the latest
`BackendListing` of each backend and publishes it whole. Client sessions only read it.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import mcp_types as types

from assern.actors.config.spec import CallRules, DescriptionFormat, Group, MiddlewareSpec
from assern.actors.gate.chain import Middlewares
from assern.actors.gate.gate import Gate, build_gate
from assern.actors.gate.rules import Refusal, combine, refusal
from assern.actors.router import naming
from assern.actors.router.grouped import Action, GroupRoute, build_group, server_head
from assern.actors.search.names import META_TOOLS

if TYPE_CHECKING:
    from assern.actors.gate.validation import SchemaCache

    # The index loads when a view searches; a catalog's annotations are never resolved.
    from assern.actors.search.index import SearchIndex, SegmentInput  # noqa: TC004

Naming = Literal["prefix", "hybrid"]
Exposure = Literal["all", "search", "grouped"]
#: Whether a view shows a tool: (exposed name, server, the server's own name) -> bool
ShowsTool = Callable[[str, str, str], bool]


def _every_server(server: str) -> bool:
    return True


@attrs.frozen(kw_only=True)
class BackendListing:
    """What one ready backend offers, as its server reported it."""

    server: str
    tools: tuple[types.Tool, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    allowed: tuple[str, ...] | None = None
    #: the server's own deny, read_only, validate and confirm
    rules: CallRules = attrs.field(factory=CallRules)
    capabilities: types.ServerCapabilities | None = None
    #: what the server said about how to use it (searched with its tools)
    instructions: str | None = None


@attrs.frozen(kw_only=True)
class ToolRoute:
    name: str
    server: str
    original: str
    #: the tool as its backend listed it (its own name)
    definition: types.Tool
    #: what its calls pass through (None: forwarded untouched)
    gate: Gate | None = attrs.field(default=None, eq=False)

    @property
    def tool(self) -> types.Tool:
        """The tool as clients see it, under its exposed name: made when asked (a
        listing or a description), so a catalog holds each backend's definition once."""
        if self.definition.name == self.name:
            return self.definition
        return self.definition.model_copy(update={"name": self.name})


@attrs.frozen(kw_only=True)
class PromptRoute:
    name: str
    server: str
    original: str
    prompt: types.Prompt


@attrs.frozen(kw_only=True)
class ResourceRoute:
    uri: str
    server: str
    original: str
    resource: types.Resource


@attrs.frozen(kw_only=True)
class TemplateRoute:
    uri_template: str
    server: str
    original: str
    template: types.ResourceTemplate
    #: what the exposed template matches (naming.template_pattern)
    pattern: re.Pattern[str] = attrs.field(eq=False)

    @property
    def natural(self) -> bool:
        return self.uri_template == self.original


@attrs.frozen(kw_only=True)
class Catalog:
    """An immutable snapshot of everything the aggregate exposes, keyed by exposed name."""

    version: int = 0
    servers: frozenset[str] = frozenset()
    tools: Mapping[str, ToolRoute] = attrs.field(factory=dict)
    prompts: Mapping[str, PromptRoute] = attrs.field(factory=dict)
    resources: Mapping[str, ResourceRoute] = attrs.field(factory=dict)
    templates: tuple[TemplateRoute, ...] = ()
    #: exposed name -> server, for tools that `allowed` hides (refused on call, never listed)
    hidden: Mapping[str, str] = attrs.field(factory=dict)
    #: exposed name -> why `deny` or `read_only` keeps the tool out (refused on call)
    refused: Mapping[str, Refusal] = attrs.field(factory=dict)
    #: grouped exposure's tools by name (each routes its actions to tools of `tools`)
    groups: Mapping[str, GroupRoute] = attrs.field(factory=dict)
    #: a backend's own tool name -> the exposed names of every tool with that name
    by_base: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    capabilities: Mapping[str, types.ServerCapabilities] = attrs.field(factory=dict)
    naming: Naming = "prefix"
    #: "all": every tool is listed; "search": the meta-tools and the pinned tools
    exposure: Exposure = "all"
    #: the patterns of tools listed beside the meta-tools in search exposure
    pinned: tuple[str, ...] = ()
    #: what tools/list answers (every tool, or the meta-tools and the pinned ones): a
    #: meta-tool or grouped tool as it is, a routed tool by its route
    listing: tuple[types.Tool | ToolRoute, ...] = attrs.field(
        default=attrs.Factory(lambda self: tuple(self.tools.values()), takes_self=True)
    )
    #: the `tools` array of a tools/list result, encoded once per catalog version
    tools_json: bytes = attrs.field(
        default=attrs.Factory(lambda self: listing_json(self.listing), takes_self=True)
    )
    #: the search index of every callable tool (built in search exposure only)
    search: SearchIndex | None = attrs.field(default=None, eq=False)
    #: the client profile this catalog is the view of (None: the settings' own)
    profile: str | None = None
    #: exposed name -> server, for tools the profile leaves out (refused on call)
    outside: Mapping[str, str] = attrs.field(factory=dict)
    #: whether the view shows a configured server at all
    shows_server: Callable[[str], bool] = attrs.field(default=_every_server, eq=False)
    #: why this view is served in search exposure although it asks for "all", if it is
    switched: str | None = None

    @property
    def lists_meta_tools_only(self) -> bool:
        """Whether tools/list answers the meta-tools whatever the backends offer (search
        exposure with nothing pinned): then it need not wait for backends still starting."""
        return self.exposure == "search" and not self.pinned

    @functools.cached_property
    def listed(self) -> tuple[types.Tool, ...]:
        """The tools of tools/list as clients see them, made on the first ask (the stdio
        lanes answer from `tools_json` and never ask)."""
        return tuple(item.tool if isinstance(item, ToolRoute) else item for item in self.listing)

    @property
    def tool_list(self) -> list[types.Tool]:
        return list(self.listed)

    @property
    def listed_names(self) -> list[str]:
        return [item.name for item in self.listing]

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The inputSchema of the tool a client calls as `name` (a grouped tool, a routed
        one, or a listed meta-tool); None when no tool has that name."""
        group = self.groups.get(name)
        if group is not None:
            return group.tool.input_schema
        route = self.tools.get(name)
        if route is not None:
            return route.definition.input_schema
        for item in self.listing:
            if item.name == name:
                return item.definition.input_schema if isinstance(item, ToolRoute) else item.input_schema
        return None

    def schema_problems(self, *, since_built: bool = True) -> dict[str, tuple[str, str]]:
        """exposed name -> (server, why) of every tool whose own schemas are not valid
        JSON Schema (served unvalidated); with `since_built`, also those a first call
        found cannot be compiled."""
        found = {}
        for name, route in self.tools.items():
            gate = route.gate
            why = None if gate is None else gate.broken if since_built else gate.schema_problem
            if why is not None:
                found[name] = (route.server, why)
        return found


def search_sources(listings: Iterable[BackendListing], catalog: Catalog) -> list[SegmentInput]:
    """What the search index takes of each listing: its callable tools as the backend
    listed them (the same objects while the backend does not list again), by exposed name."""
    from assern.actors.search.index import SegmentInput

    exposed = {(route.server, route.original): name for name, route in catalog.tools.items()}
    sources = []
    for listing in listings:
        tools = tuple(
            (exposed[listing.server, tool.name], tool.name, tool)
            for tool in listing.tools
            if (listing.server, tool.name) in exposed
        )
        sources.append(SegmentInput(server=listing.server, tools=tools, instructions=listing.instructions))
    return sources


def is_allowed(tool: str, allowed: Sequence[str] | None) -> bool:
    """Whether a backend's tool passes the server's `allowed` globs (None allows all)."""
    return allowed is None or any(fnmatch.fnmatchcase(tool, pattern) for pattern in allowed)


def _claim(taken: dict[str, str], wanted: str, owner: str, limit: int) -> str:
    name = naming.shorten(wanted, limit)
    if name in taken and taken[name] != owner:
        name = naming.disambiguate(name, owner, limit)
    taken[name] = owner
    return name


def build_catalog(
    listings: Iterable[BackendListing],
    *,
    version: int = 0,
    mode: Naming = "prefix",
    max_name_length: int = 64,
    exposure: Exposure = "all",
    pinned: Sequence[str] = (),
    shows: ShowsTool | None = None,
    profile: str | None = None,
    shows_server: Callable[[str], bool] = _every_server,
    rules: CallRules | None = None,
    groups: Sequence[Group] = (),
    description_format: DescriptionFormat = "text",
    schemas: SchemaCache | None = None,
    middleware: Sequence[MiddlewareSpec] = (),
    middlewares: Middlewares | None = None,
) -> Catalog:
    """Merge listings (in configuration order) into one prefixed catalog.

    Collisions are never fatal: a name already taken by another server gets a stable
    hash suffix. In `hybrid` mode a tool or prompt keeps its natural name when no other
    backend offers the same name; a resource URI or URI template keeps its own form for
    the first backend (in configuration order) that lists it, and every later backend
    listing the same one exposes it as `assern://SERVER/URI`.

    `rules` (the view's) and each listing's own rules keep denied and (under
    `read_only`) changing tools out, and give every other tool its `Gate` (its
    validators taken from `schemas` when they were compiled already, and the chain of
    the `middleware` entries that take it, their instances kept in `middlewares`).

    In grouped exposure the listed tools are one per server (or one per `groups` entry,
    beside the tools no group takes); every tool stays callable by its own exposed name.
    """
    listings = list(listings)
    view_rules = rules or CallRules()
    if middleware and middlewares is None:
        middlewares = Middlewares()
    tool_owners: dict[str, set[str]] = {}
    prompt_owners: dict[str, set[str]] = {}
    for listing in listings:
        for tool in listing.tools:
            tool_owners.setdefault(tool.name, set()).add(listing.server)
        for prompt in listing.prompts:
            prompt_owners.setdefault(prompt.name, set()).add(listing.server)

    # In search exposure the meta-tools' names are assern's: a backend's tool of the same
    # name is exposed with its server's prefix (as a clash between two backends would be).
    reserved = frozenset(META_TOOLS) if exposure == "search" else frozenset()
    taken_tools: dict[str, str] = dict.fromkeys(reserved, "")
    # Grouped tools' names are claimed first: a backend's tool of the same name yields.
    group_names: dict[str, str] = {}
    if exposure == "grouped":
        wanted_groups = [g.name for g in groups] or [naming.server_prefix(x.server) for x in listings]
        owners = [g.name for g in groups] or [x.server for x in listings]
        for wanted_group, owner in zip(wanted_groups, owners, strict=True):
            group_names[owner] = _claim(taken_tools, wanted_group, f"\0group\0{owner}", max_name_length)
        reserved = frozenset(group_names.values())
    taken_prompts: dict[str, str] = {}
    tools: dict[str, ToolRoute] = {}
    hidden: dict[str, str] = {}
    refused: dict[str, Refusal] = {}
    outside: dict[str, str] = {}
    by_base: dict[str, list[str]] = {}
    prompts: dict[str, PromptRoute] = {}
    resources: dict[str, ResourceRoute] = {}
    templates: list[TemplateRoute] = []
    natural_templates: set[str] = set()

    for listing in listings:
        server = listing.server
        tool_rules = combine(view_rules, listing.rules)
        for tool in listing.tools:
            natural = mode == "hybrid" and len(tool_owners[tool.name]) == 1
            natural = natural and tool.name not in reserved
            wanted = tool.name if natural else naming.tool_name(server, tool.name)
            if not is_allowed(tool.name, listing.allowed):
                hidden[naming.shorten(wanted, max_name_length)] = server
                continue
            names = (naming.shorten(wanted, max_name_length), naming.tool_name(server, tool.name), tool.name)
            refused_by = refusal(tool_rules, names, server, tool)
            if refused_by is not None:
                refused[names[0]] = refused_by
                continue
            exposed = _claim(taken_tools, wanted, f"{server}\0{tool.name}", max_name_length)
            if shows is not None and not shows(exposed, server, tool.name):
                outside[exposed] = server
                continue
            known_as = (exposed, *names[1:])
            chain = middlewares.chain(middleware, server, known_as) if middlewares is not None else None
            tools[exposed] = ToolRoute(
                name=exposed,
                server=server,
                original=tool.name,
                definition=tool,
                gate=build_gate(
                    tool, tool_rules, known_as, grouped=exposure == "grouped", schemas=schemas, chain=chain
                ),
            )
            by_base.setdefault(tool.name, []).append(exposed)
        for prompt in listing.prompts:
            natural = mode == "hybrid" and len(prompt_owners[prompt.name]) == 1
            wanted = prompt.name if natural else naming.prompt_name(server, prompt.name)
            exposed = _claim(taken_prompts, wanted, f"{server}\0{prompt.name}", max_name_length)
            prompts[exposed] = PromptRoute(
                name=exposed,
                server=server,
                original=prompt.name,
                prompt=prompt.model_copy(update={"name": exposed}),
            )
        for resource in listing.resources:
            uri = str(resource.uri)
            if mode != "hybrid" or uri in resources or uri.startswith(naming.RESOURCE_SCHEME):
                uri = naming.resource_uri(server, uri)
            resources[uri] = ResourceRoute(
                uri=uri,
                server=server,
                original=str(resource.uri),
                resource=resource.model_copy(update={"uri": uri}),
            )
        for template in listing.templates:
            uri_template = template.uri_template
            natural = mode == "hybrid" and not uri_template.startswith(naming.RESOURCE_SCHEME)
            if not natural or uri_template in natural_templates:
                uri_template = naming.resource_uri(server, uri_template)
            else:
                natural_templates.add(uri_template)
            templates.append(
                TemplateRoute(
                    uri_template=uri_template,
                    server=server,
                    original=template.uri_template,
                    template=template.model_copy(update={"uri_template": uri_template}),
                    pattern=naming.template_pattern(uri_template),
                )
            )

    grouped: dict[str, GroupRoute] = {}
    shown: tuple[types.Tool | ToolRoute, ...]
    if exposure == "grouped":
        grouped = _groups(listings, tools, groups, group_names, description_format)
        in_groups = {action.name for group in grouped.values() for action in group.actions.values()}
        shown = (
            *(group.tool for group in grouped.values()),
            *(
                route
                for name, route in tools.items()
                if name not in in_groups or any(fnmatch.fnmatchcase(name, pattern) for pattern in pinned)
            ),
        )
    elif exposure == "search":
        from assern.actors.search.meta_tools import DEFINITIONS

        shown = (
            *DEFINITIONS,
            *(
                route
                for name, route in tools.items()
                if any(fnmatch.fnmatchcase(name, pattern) for pattern in pinned)
            ),
        )
    else:
        shown = tuple(tools.values())
    return Catalog(
        version=version,
        naming=mode,
        exposure=exposure,
        pinned=tuple(pinned),
        listing=shown,
        servers=frozenset(listing.server for listing in listings),
        tools=tools,
        prompts=prompts,
        resources=resources,
        templates=tuple(templates),
        hidden={name: server for name, server in hidden.items() if name not in tools},
        refused={name: why for name, why in refused.items() if name not in tools},
        groups=grouped,
        outside=outside,
        profile=profile,
        shows_server=shows_server,
        by_base={base: tuple(names) for base, names in by_base.items()},
        capabilities={
            listing.server: listing.capabilities for listing in listings if listing.capabilities is not None
        },
    )


def _groups(
    listings: Sequence[BackendListing],
    tools: Mapping[str, ToolRoute],
    groups: Sequence[Group],
    names: Mapping[str, str],
    fmt: DescriptionFormat,
) -> dict[str, GroupRoute]:
    """The grouped tools: one per `groups` entry that takes any tool, else one per
    server with tools (`names`: each group's or server's claimed tool name)."""
    found: dict[str, GroupRoute] = {}
    if groups:
        for group in groups:
            members = [
                route
                for route in tools.values()
                if any(
                    fnmatch.fnmatchcase(name, pattern)
                    for name in (route.name, naming.tool_name(route.server, route.original))
                    for pattern in group.tools
                )
            ]
            if not members:
                continue
            actions = [_action(f"{r.server}.{r.original}", r) for r in members]
            servers = ", ".join(dict.fromkeys(r.server for r in members))
            head = group.description or f"{len(members)} tools of {servers}"
            head += "\nSet `action` to one of them."
            name = names[group.name]
            found[name] = build_group(name, head, actions, fmt)
        return found
    for listing in listings:
        members = [route for route in tools.values() if route.server == listing.server]
        if members:
            name = names[listing.server]
            head = server_head(listing.server, listing.instructions, len(members))
            found[name] = build_group(name, head, [_action(r.original, r) for r in members], fmt)
    return found


def _action(key: str, route: ToolRoute) -> Action:
    return Action(key=key, name=route.name, server=route.server, tool=route.definition)


def listing_json(listing: Iterable[types.Tool | ToolRoute]) -> bytes:
    """The `tools` array of a tools/list result, encoded."""
    return json.dumps([_listed_json(item) for item in listing], separators=(",", ":")).encode()


def _listed_json(item: types.Tool | ToolRoute) -> dict[str, Any]:
    """One tool of a tools/list result as JSON, under its exposed name."""
    tool = item.definition if isinstance(item, ToolRoute) else item
    encoded = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    encoded["name"] = item.name
    return encoded


@attrs.frozen(kw_only=True)
class Suggestions:
    close: tuple[str, ...]
    #: servers that have a tool of the called name's base name, with its exposed name
    same_base: tuple[tuple[str, str], ...]


def suggest_tools(catalog: Catalog, called: str, *, limit: int = 3) -> Suggestions:
    """The closest existing names and the servers owning a tool of the same base name.

    The base name is the called name itself, or what remains after a known server
    prefix (`github_search` -> `search`).
    """
    bases = {called}
    for server in catalog.servers:
        prefix = naming.server_prefix(server) + "_"
        if called.startswith(prefix):
            bases.add(called[len(prefix) :])
    same_base = [
        (catalog.tools[exposed].server, exposed)
        for base in sorted(bases)
        for exposed in catalog.by_base.get(base, ())
    ]
    import difflib  # only here: not loaded until needed

    close = difflib.get_close_matches(called, list(catalog.tools), n=limit, cutoff=0.5)
    return Suggestions(close=tuple(close), same_base=tuple(same_base))


def unknown_tool_message(called: str, suggestions: Suggestions) -> str:
    parts = [f"Unknown tool '{called}'."]
    if suggestions.same_base:
        owners = ", ".join(f"{server} ({name})" for server, name in suggestions.same_base)
        parts.append(f"Servers with a tool of that name: {owners}.")
    candidates = [n for n in suggestions.close if n not in {n for _, n in suggestions.same_base}]
    if candidates:
        parts.append("Did you mean: " + ", ".join(candidates) + "?")
    if not suggestions.same_base and not candidates:
        parts.append("Call tools/list for the available tools.")
    return " ".join(parts)
