"""Pure look-ups of what a client names: which backend owns a resource URI, a URI template
or a prompt, and what to tell the client when nothing does.

The same catalog entries that `resources/list`, `resources/templates/list` and
`prompts/list` expose are the ones looked up here, so a client can use any name it was
shown, for reading, subscribing and completing alike.

A resource URI is found, in order:

1. among the listed resources, by its exposed form;
2. among the URI templates, by the exposed template itself (a completion's `ref/resource`);
3. in its `assern://SERVER/URI` form, which reaches every backend in every naming mode;
4. in hybrid naming, for a URI no listing holds (files, rows, anything a server makes up
   as it goes): the one backend whose natural template matches it, else the only backend
   that offers resources at all.

Anything else is refused with the candidates named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from assern.actors.router import naming

if TYPE_CHECKING:
    from collections.abc import Collection

    from assern.actors.router.catalog import Catalog


@attrs.frozen
class ResourceTarget:
    """Where a client's resource URI goes.

    Attributes:
        server: The owning backend.
        original: The URI (or URI template) in the backend's own terms.
        natural: Whether the client used the backend's own form (hybrid naming), so the
            answer's URIs stay in that form.
    """

    server: str
    original: str
    natural: bool


class UnknownResource(LookupError):
    """No backend owns the URI; the text says which would have been candidates."""


def resource_servers(catalog: Catalog) -> list[str]:
    """The listed backends that offer resources, in configuration order."""
    return [s for s, caps in catalog.capabilities.items() if caps.resources is not None]


def resolve_resource(catalog: Catalog, uri: str, servers: Collection[str]) -> ResourceTarget:
    """The backend and original URI behind `uri` (see the module's docstring).

    Args:
        catalog: The current catalog.
        uri: What the client sent.
        servers: Every configured server, listed or not (an `assern://` URI of a starting
            backend is still routed to it).

    Raises:
        UnknownResource: no backend owns it.
    """
    route = catalog.resources.get(uri)
    if route is not None:
        return ResourceTarget(route.server, route.original, natural=route.uri == route.original)
    for template in catalog.templates:
        if template.uri_template == uri:
            return ResourceTarget(template.server, template.original, natural=template.natural)
    found = naming.split_resource_uri(uri, set(servers) | set(catalog.servers))
    if found is not None:
        return ResourceTarget(found[0], found[1], natural=False)
    if catalog.naming != "hybrid":
        raise UnknownResource(
            f"Unknown resource '{uri}': assern resources look like assern://SERVER/ORIGINAL-URI"
            + _closest(uri, catalog)
        )
    matching = list(
        dict.fromkeys(t.server for t in catalog.templates if t.natural and t.pattern.fullmatch(uri))
    )
    if len(matching) == 1:
        return ResourceTarget(matching[0], uri, natural=True)
    if matching:
        raise UnknownResource(
            f"Resource '{uri}' matches the templates of several servers ({', '.join(matching)}): "
            f"name one as assern://SERVER/{uri}"
        )
    offering = resource_servers(catalog)
    if len(offering) == 1:
        return ResourceTarget(offering[0], uri, natural=True)
    if not offering:
        raise UnknownResource(f"Unknown resource '{uri}': no server offers resources")
    raise UnknownResource(
        f"Unknown resource '{uri}': no listing or template holds it, and several servers offer "
        f"resources ({', '.join(offering)}); name one as assern://SERVER/{uri}" + _closest(uri, catalog)
    )


def _closest(uri: str, catalog: Catalog) -> str:
    known = [*catalog.resources, *(t.uri_template for t in catalog.templates)]
    import difflib  # only here: not loaded until needed

    close = difflib.get_close_matches(uri, known, n=3, cutoff=0.5)
    return (". Did you mean: " + ", ".join(close) + "?") if close else ""


def exposed_uri(catalog: Catalog, server: str, uri: str, *, natural: bool) -> str:
    """How a URI that `server` sent (in a read's contents, an update) is shown to a client.

    Its own form when the client uses natural forms (hybrid naming) and no other backend
    exposes that form; otherwise `assern://SERVER/URI`.
    """
    if not natural or catalog.naming != "hybrid":
        return naming.resource_uri(server, uri)
    route = catalog.resources.get(uri)
    if route is not None and route.server != server:
        return naming.resource_uri(server, uri)
    return uri


def unknown_prompt_message(catalog: Catalog, name: str) -> str:
    """`Unknown prompt 'x'.` with the closest exposed names, or every one when few."""
    import difflib  # only here: not loaded until needed

    close = difflib.get_close_matches(name, list(catalog.prompts), n=3, cutoff=0.5)
    if close:
        return f"Unknown prompt '{name}'. Did you mean: {', '.join(close)}?"
    return f"Unknown prompt '{name}'. Known prompts: " + (", ".join(catalog.prompts) or "none")
