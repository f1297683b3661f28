"""The checks every HTTP request passes before it reaches MCP (pure).

- `Host` must name the front itself (on loopback: any loopback name, any port) or a
  configured `allowed_hosts` entry, and a browser's `Origin` must be the front's own
  or a configured `allowed_origins` entry: together they stop DNS rebinding, where a
  web page re-points its own host name at 127.0.0.1 to reach local services.
- A bearer token, when the front asks for one (listen.ListenSpec.needs_token).
- The request's headers no larger than `max_header_bytes` in all (the HTTP server
  itself bounds only a head still arriving, not one read whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assern.actors.listener.http.refusal import Refusal

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from assern.actors.config.listen import Bind, ListenSpec
    from assern.actors.listener.http.tokens import TokenStore

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _matches(value: str, allowed: Iterable[str]) -> bool:
    return any(value == entry or (entry.endswith(":*") and value.startswith(entry[:-1])) for entry in allowed)


def allowed_hosts(bind: Bind, spec: ListenSpec) -> tuple[str, ...]:
    if bind.loopback:  # any loopback name, with or without a port
        own = [f"{name}{port}" for name in _LOOPBACK_NAMES for port in ("", ":*")]
    else:
        own = [str(bind)]
    return (*own, *spec.allowed_hosts)


def allowed_origins(bind: Bind, spec: ListenSpec) -> tuple[str, ...]:
    if bind.loopback:
        own = [
            f"{scheme}://{name}{port}"
            for scheme in ("http", "https")
            for name in _LOOPBACK_NAMES
            for port in ("", ":*")
        ]
    else:
        own = [f"{scheme}://{bind}" for scheme in ("http", "https")]
    return (*own, *spec.allowed_origins)


def check_host_origin(headers: Mapping[str, str], bind: Bind, spec: ListenSpec) -> Refusal | None:
    """A refusal when `Host` or `Origin` do not name this front (DNS rebinding)."""
    host = headers.get("host")
    non_loopback_open = not bind.loopback and not spec.allowed_hosts
    if not non_loopback_open and (host is None or not _matches(host, allowed_hosts(bind, spec))):
        return Refusal(421, "Invalid Host header", "bad_host")
    origin = headers.get("origin")
    if origin is not None and not _matches(origin, allowed_origins(bind, spec)):
        return Refusal(403, "Invalid Origin header", "bad_origin")
    return None


def authenticate(headers: Mapping[str, str], tokens: TokenStore, spec: ListenSpec) -> str | Refusal | None:
    """The name of the request's token (None when none is needed), or a refusal."""
    if not spec.needs_token(tokens_exist=tokens.any()):
        return None
    challenge = (("www-authenticate", 'Bearer realm="assern"'),)
    value = headers.get("authorization")
    if value is None:
        return Refusal(
            401, "Authorization required: send 'Authorization: Bearer TOKEN'", "no_token", challenge
        )
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return Refusal(401, "Authorization must be 'Bearer TOKEN'", "bad_token", challenge)
    name = tokens.check(token.strip())
    if name is None:
        return Refusal(401, "Invalid or revoked token", "bad_token", challenge)
    return name


def check_header_size(headers: Iterable[tuple[bytes, bytes]], most: int) -> Refusal | None:
    """A refusal (431) when the headers take more than `most` bytes, each counted as
    the `name: value` line it was sent as."""
    size = sum(len(name) + len(value) + 4 for name, value in headers)
    if size <= most:
        return None
    return Refusal(431, f"Request headers too large ({size} bytes; at most {most})", "headers_too_large")
