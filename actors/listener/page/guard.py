"""What every request to the status page passes, and the headers every answer carries.

The page listens on 127.0.0.1 alone; each request must still come from a loopback
address, name the page itself in `Host` (`127.0.0.1:PORT` or `localhost:PORT`: a
web page that re-points its own name at 127.0.0.1, DNS rebinding, sends its own name),
bring no foreign `Origin`, and be a GET (the page changes nothing). Pure.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from assern.actors.listener.http.refusal import Refusal

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The cookie a signed-in browser holds.
COOKIE = "assern_page"
#: Names the page answers to (with its port).
_NAMES = ("127.0.0.1", "localhost")

#: Nothing but the page's own script, style and event stream; no frame, no form elsewhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Headers of every answer.
HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("cache-control", "no-store"),
)


def loopback(address: str | None) -> bool:
    """Whether the peer's address is a loopback one."""
    if address is None:
        return False
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check(method: str, headers: Mapping[str, str], peer: str | None, port: int) -> Refusal | None:
    """Why a request is refused, None when it may go on (the cookie is checked later)."""
    if not loopback(peer):
        return Refusal(403, "the status page answers loopback only", "not_loopback")
    if headers.get("host") not in {f"{name}:{port}" for name in _NAMES}:
        return Refusal(421, "Invalid Host header", "bad_host")
    origin = headers.get("origin")
    if origin is not None and origin not in {f"http://{name}:{port}" for name in _NAMES}:
        return Refusal(403, "Invalid Origin header", "bad_origin")
    if method != "GET":
        return Refusal(405, "the status page is read-only: GET only", "bad_method", (("allow", "GET"),))
    return None


def cookie_of(header: str | None) -> str | None:
    """The page's cookie in a `Cookie` header, if there."""
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


def set_cookie(token: str) -> str:
    """The `Set-Cookie` value that signs a browser in (until it closes, or the
    instance stops): never sent by scripts, nor with another site's requests."""
    return f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
