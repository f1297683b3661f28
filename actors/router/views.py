"""Views of the catalog: what the settings show, and what each client profile shows.

A `View` is everything a catalog is built from besides the backends' listings: the
naming, the exposure and the filters of `[settings]` or of one `[profiles.NAME]` (a
profile's unset fields take the settings'). `build_view` builds the catalog a view
shows, and serves it in search exposure when its tools would pass `max_tools` or
`max_list_tokens`. `choose_profile` picks the profile a client gets by its
`clientInfo.name`. The router builds one catalog per view and publishes each in its own
cell (`CatalogViews`); a connection reads the cell of its profile.
"""

from __future__ import annotations

import fnmatch
import math
from typing import TYPE_CHECKING

import attrs

from assern.actors.config.spec import (
    CallRules,
    DescriptionFormat,
    Exposure,
    Group,
    MiddlewareSpec,
    Naming,
    Profile,
    SearchSettings,
    Settings,
)
from assern.actors.gate.rules import combine
from assern.actors.router import naming
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog
from assern.supervisor.cell import Cell

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from assern.actors.gate.chain import Middlewares
    from assern.actors.gate.validation import SchemaCache

#: Bytes of tool-list JSON per token, the usual rule of thumb for the tokenizers of the
#: common models (JSON schema text runs 3.5-4.5 bytes per token with them).
BYTES_PER_TOKEN = 4


def estimate_tokens(data: bytes | str) -> int:
    """About how many tokens a model's tokenizer makes of `data` (1 per 4 bytes)."""
    size = len(data.encode() if isinstance(data, str) else data)
    return math.ceil(size / BYTES_PER_TOKEN)


def _any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


@attrs.frozen(kw_only=True)
class View:
    """What one catalog is built from besides the listings (equal views build equal
    catalogs from equal listings).

    Attributes:
        profile: The profile's name, or None for the settings' own view.
        servers: The only servers shown (None: all); `exclude_servers` are never shown.
        tools: Globs of the only tools shown (None: all), over the exposed name or
            `SERVER_TOOL`; `exclude_tools` are never shown.
        max_tools, max_list_tokens: Past either, the view is served in search exposure.
    """

    profile: str | None = None
    naming: Naming = "prefix"
    max_name_length: int = 64
    exposure: Exposure = "all"
    pinned: tuple[str, ...] = ()
    servers: tuple[str, ...] | None = None
    exclude_servers: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    max_tools: int | None = None
    max_list_tokens: int | None = None
    #: how much a word counts in each field of a tool when searched (FieldWeights' order)
    weights: tuple[float, ...] = SearchSettings().weights
    #: deny, read_only, validate and confirm of the settings and the profile
    rules: CallRules = attrs.field(factory=CallRules)
    description_format: DescriptionFormat = "text"
    groups: tuple[Group, ...] = ()
    middleware: tuple[MiddlewareSpec, ...] = ()

    def shows_server(self, server: str) -> bool:
        return (self.servers is None or server in self.servers) and server not in self.exclude_servers

    def shows_tool(self, exposed: str, server: str, original: str) -> bool:
        if self.tools is None and not self.exclude_tools:
            return True
        names = (exposed, naming.tool_name(server, original))
        if self.tools is not None and not any(_any(name, self.tools) for name in names):
            return False
        return not any(_any(name, self.exclude_tools) for name in names)

    @property
    def filters_tools(self) -> bool:
        return self.tools is not None or bool(self.exclude_tools)


def settings_view(settings: Settings) -> View:
    """The view of a client no profile serves."""
    return View(
        naming=settings.naming,
        max_name_length=settings.max_name_length,
        exposure=settings.exposure,
        pinned=settings.pinned,
        max_tools=settings.max_tools,
        max_list_tokens=settings.max_list_tokens,
        weights=settings.search.weights,
        rules=settings.rules,
        description_format=settings.description_format,
        groups=settings.groups,
        middleware=settings.middleware,
    )


def profile_view(settings: Settings, profile: Profile) -> View:
    """A profile's view: its own fields, the settings' where it leaves one unset."""
    base = settings_view(settings)
    return View(
        profile=profile.name,
        naming=profile.naming or base.naming,
        max_name_length=profile.max_name_length or base.max_name_length,
        exposure=profile.exposure or base.exposure,
        pinned=profile.pinned if profile.pinned is not None else base.pinned,
        servers=profile.servers,
        exclude_servers=profile.exclude_servers,
        tools=profile.tools,
        exclude_tools=profile.exclude_tools,
        max_tools=profile.max_tools if profile.max_tools is not None else base.max_tools,
        max_list_tokens=(
            profile.max_list_tokens if profile.max_list_tokens is not None else base.max_list_tokens
        ),
        weights=base.weights,
        rules=combine(base.rules, profile.rules),
        description_format=profile.description_format or base.description_format,
        groups=base.groups,
        middleware=base.middleware,
    )


def views(settings: Settings) -> dict[str | None, View]:
    """Every view of `settings`: its own (key None), then one per profile."""
    found: dict[str | None, View] = {None: settings_view(settings)}
    for profile in settings.profiles:
        found[profile.name] = profile_view(settings, profile)
    return found


def choose_profile(profiles: Sequence[Profile], client_name: str | None) -> str | None:
    """The first profile whose `match` globs take `client_name`, or None."""
    if client_name is None:
        return None
    for profile in profiles:
        if _any(client_name, profile.match):
            return profile.name
    return None


def over_limit(view: View, catalog: Catalog) -> str | None:
    """Why an "all" catalog of `view` must be served in search exposure, if it must."""
    count = len(catalog.tools)
    if view.max_tools is not None and count > view.max_tools:
        return f"{count} tools > max_tools {view.max_tools}"
    tokens = estimate_tokens(catalog.tools_json)
    if view.max_list_tokens is not None and tokens > view.max_list_tokens:
        return f"about {tokens} tokens > max_list_tokens {view.max_list_tokens}"
    return None


def build_view(
    listings: Iterable[BackendListing],
    view: View,
    *,
    version: int = 0,
    schemas: SchemaCache | None = None,
    middlewares: Middlewares | None = None,
) -> Catalog:
    """The catalog `view` shows of `listings`.

    Servers the view leaves out are not in it at all (so in hybrid naming a name that
    clashes only with a left-out server stays natural); tools it leaves out are refused
    when called. A view in "all" exposure whose tools pass `max_tools` or
    `max_list_tokens` is served in "search" exposure, with the reason in `switched`
    (unless only the token budget is passed and the meta-tools alone would take more).
    """
    listings = list(listings)
    shown = [listing for listing in listings if view.shows_server(listing.server)]

    def build(exposure: Exposure) -> Catalog:
        return build_catalog(
            shown,
            version=version,
            mode=view.naming,
            max_name_length=view.max_name_length,
            exposure=exposure,
            pinned=view.pinned,
            shows=view.shows_tool if view.filters_tools else None,
            profile=view.profile,
            shows_server=view.shows_server,
            rules=view.rules,
            groups=view.groups,
            description_format=view.description_format,
            schemas=schemas,
            middleware=view.middleware,
            middlewares=middlewares,
        )

    catalog = build(view.exposure)
    if view.exposure == "all":
        reason = over_limit(view, catalog)
        if reason is not None:
            searching = build("search")
            # Over the token budget only, a list shorter than the meta-tools stays whole.
            over_count = view.max_tools is not None and len(catalog.tools) > view.max_tools
            if over_count or len(searching.tools_json) < len(catalog.tools_json):
                catalog = attrs.evolve(searching, switched=reason)
    # A call of a left-out server's tool (by either of its usual names) is refused as
    # outside the profile, not as unknown.
    outside = dict(catalog.outside)
    for listing in listings:
        if not view.shows_server(listing.server):
            for tool in listing.tools:
                for name in (naming.tool_name(listing.server, tool.name), tool.name):
                    if name not in catalog.tools:
                        outside.setdefault(name, listing.server)
    return attrs.evolve(catalog, outside=outside) if len(outside) != len(catalog.outside) else catalog


class CatalogViews:
    """The published catalogs: the settings' view and one per profile, each in its own
    cell. The router is their only writer; a connection follows the cell of its profile.

    A cell is never dropped: the cell of a profile a reload removed (or of a name no
    profile has) shows the settings' view, so a connection keeps following one cell.
    """

    def __init__(self, default: Cell[Catalog]) -> None:
        self.default = default
        self._profiles: dict[str, Cell[Catalog]] = {}

    def cell(self, profile: str | None) -> Cell[Catalog]:
        """The cell of `profile` (None: the settings' view)."""
        if profile is None:
            return self.default
        cell = self._profiles.get(profile)
        if cell is None:
            cell = self._profiles[profile] = Cell(self.default.value)
        return cell

    def profiles(self) -> Iterator[tuple[str, Cell[Catalog]]]:
        yield from self._profiles.items()
