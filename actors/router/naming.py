"""Pure naming rules: how a backend's tools, prompts and resources are exposed.

- tools: `{server}_{tool}`, dashes in the server name turned into underscores
  (`my-server` + `my_tool` -> `my_server_my_tool`);
- prompts: the same, dashes in the prompt name too
  (`templates` + `generate-code` -> `templates_generate_code`);
- resources and resource templates: `assern://{server}/{original-uri}`; in hybrid naming
  the URI itself, unless another backend listed it first (catalog.py).

Names longer than the configured limit are shortened deterministically: the head of the
name plus a short hash of the whole, so the same inputs always give the same name.
"""

from __future__ import annotations

import hashlib
import re

RESOURCE_SCHEME = "assern://"

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN = 8


def server_prefix(server: str) -> str:
    """The prefix of a server's names: dashes (and any character clients reject) -> `_`."""
    return _UNSAFE.sub("_", server.replace("-", "_"))


def tool_name(server: str, tool: str) -> str:
    """`{server}_{tool}`; the tool's own name keeps its dashes."""
    return f"{server_prefix(server)}_{_UNSAFE.sub('_', tool)}"


def prompt_name(server: str, prompt: str) -> str:
    """`{server}_{prompt}` with dashes turned into underscores on both sides."""
    return f"{server_prefix(server)}_{_UNSAFE.sub('_', prompt.replace('-', '_'))}"


def resource_uri(server: str, uri: str) -> str:
    """`assern://{server}/{original-uri}`; also used for resource templates."""
    return f"{RESOURCE_SCHEME}{server}/{uri}"


def split_resource_uri(uri: str, servers: frozenset[str] | set[str]) -> tuple[str, str] | None:
    """Find the server and original URI of an exposed URI, checked against known servers.

    The longest known server name that matches wins, so `assern://a-b/x` is never taken
    for a server `a`. Returns None when no configured server owns the URI.
    """
    if not uri.startswith(RESOURCE_SCHEME):
        return None
    rest = uri[len(RESOURCE_SCHEME) :]
    best: str | None = None
    for server in servers:
        if rest.startswith(server + "/") and (best is None or len(server) > len(best)):
            best = server
    if best is None:
        return None
    return best, rest[len(best) + 1 :]


_EXPRESSION = re.compile(r"\{([^{}]*)\}")
#: What an RFC 6570 expression can expand to, by operator: simple and label/path-style
#: values stop at a delimiter; reserved and fragment expansion may hold slashes.
_EXPANSIONS = {
    "": r"[^/?#&]*",
    "+": r"[^?#]*",
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#]*)*",
    "/": r"(?:/[^/?#]*)*",
    ";": r"(?:;[^/?#]*)*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)*",
}


def template_pattern(template: str) -> re.Pattern[str]:
    """A regular expression matching the URIs an RFC 6570 URI template can expand to.

    Literal parts must match exactly; each `{...}` expression matches what its operator
    can produce (`{id}` one path segment, `{+path}` several, `{?q}` a query).
    """
    parts: list[str] = []
    position = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[position : match.start()]))
        body = match.group(1)
        operator = body[:1] if body[:1] in _EXPANSIONS and body[:1] else ""
        parts.append(_EXPANSIONS[operator])
        position = match.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts))


def shorten(name: str, limit: int) -> str:
    """Fit `name` into `limit` characters: its head, `_`, and a hash of the whole name."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_LEN]
    head = name[: max(1, limit - _HASH_LEN - 1)].rstrip("_")
    return f"{head}_{digest}"[:limit]


def disambiguate(name: str, owner: str, limit: int) -> str:
    """A distinct, stable name for the second claimant of an already-taken name."""
    digest = hashlib.sha256(f"{owner}\0{name}".encode()).hexdigest()[:4]
    return shorten(f"{name}_{digest}", limit) if len(name) + 5 > limit else f"{name}_{digest}"
