"""`[listen]`: where the HTTP front binds and how it is locked down (pure).

`http = "[HOST:]PORT"` names the address: a bare port binds the loopback address,
since a port reachable from other machines is a decision, never a default. Binding
anything but loopback without authentication is refused here, when the file is read,
so a mistyped address cannot serve the backends' tools to the network.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

import attrs

#: How HTTP clients prove who they are: "auto" asks for a bearer token when the address
#: is not loopback or once any token was created; "token" always; "none" never (loopback
#: only).
HttpAuth = Literal["auto", "token", "none"]

LOOPBACK = "127.0.0.1"
#: The default limits (each is a `[listen]` key of the same name).
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_HEADER_BYTES = 16 * 1024
MAX_SESSIONS = 1000
MAX_SESSIONS_PER_TOKEN = 100
SESSION_IDLE_TIMEOUT = 30 * 60.0
REPLAY_EVENTS = 128
RESUME_GRACE = 10.0
GRACEFUL_TIMEOUT = 5.0


class BindError(ValueError):
    """A `[HOST:]PORT` that names no address to bind."""


@attrs.frozen
class Bind:
    """An address to serve HTTP on."""

    host: str
    port: int
    #: whether only this machine can reach the address (read on every request: worked
    #: out once)
    loopback: bool = attrs.field(init=False, eq=False, repr=False)

    @loopback.default
    def _loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to anything

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_bind(text: str) -> Bind:
    """`PORT`, `HOST:PORT` or `[V6]:PORT` as a `Bind` (port 0 asks for a free port).

    Raises:
        BindError: saying what was expected.
    """
    value = text.strip()
    host, port_text = LOOPBACK, value
    if value.startswith("["):
        close = value.find("]")
        if close < 0 or not value[close + 1 :].startswith(":"):
            raise BindError(f"expected '[ADDRESS]:PORT' for an IPv6 address, got {text!r}")
        host, port_text = value[1:close], value[close + 2 :]
    elif ":" in value:
        host, _, port_text = value.rpartition(":")
        if ":" in host:
            raise BindError(f"write an IPv6 address in brackets, as '[{host}]:{port_text}'")
    if not host:
        raise BindError(f"expected '[HOST:]PORT', got {text!r} (no host before ':')")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BindError(f"expected '[HOST:]PORT' with a port from 0 to 65535, got {text!r}")
    return Bind(host=host, port=int(port_text))


@attrs.frozen(kw_only=True)
class ListenSpec:
    """The HTTP front's settings (`[listen]`).

    Attributes:
        http: Where to serve HTTP (None: no HTTP front).
        auth: When a bearer token is required (see `HttpAuth`).
        tokens_file: The token store (`assernctl token`); hashes only.
        allowed_origins: `Origin` values browsers may send besides the front's own
            address ("http://host:*" allows any port).
        allowed_hosts: `Host` values accepted besides the bound address and, on
            loopback, localhost ("name:*" allows any port).
        certfile: TLS certificate chain (PEM); with `keyfile`, HTTPS is served.
        keyfile: TLS private key (PEM).
        max_body_bytes: The largest request body.
        max_header_bytes: The largest request head.
        max_sessions: Open handshake-era sessions in all.
        max_sessions_per_token: Open sessions one token (or, without tokens, everybody)
            may hold.
        session_idle_timeout: Seconds a session may go with no request in flight.
        replay_events: Events each handshake-era session keeps so that a client whose
            stream broke resumes it with `Last-Event-ID` (0: none kept, no resumption).
        resume_grace: Seconds a call whose stream broke keeps running for its client to
            resume that stream; past them it is cancelled at its backend.
        legacy_sse: Also serve the 2024-11-05 HTTP+SSE transport at `/sse`.
        graceful_timeout: Seconds open requests get to finish when the front stops.
    """

    http: Bind | None = None
    auth: HttpAuth = "auto"
    tokens_file: Path | None = None
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    certfile: Path | None = None
    keyfile: Path | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_header_bytes: int = MAX_HEADER_BYTES
    max_sessions: int = MAX_SESSIONS
    max_sessions_per_token: int = MAX_SESSIONS_PER_TOKEN
    session_idle_timeout: float = SESSION_IDLE_TIMEOUT
    replay_events: int = REPLAY_EVENTS
    resume_grace: float = RESUME_GRACE
    legacy_sse: bool = False
    graceful_timeout: float = GRACEFUL_TIMEOUT

    @property
    def tls(self) -> bool:
        return self.certfile is not None and self.keyfile is not None

    def needs_token(self, *, tokens_exist: bool) -> bool:
        """Whether a request must carry a bearer token."""
        if self.auth == "auto":
            return tokens_exist or (self.http is not None and not self.http.loopback)
        return self.auth == "token"


def listen_problems(spec: ListenSpec) -> list[tuple[str, str]]:
    """What makes `spec` unsafe or unusable: (key, problem) pairs."""
    problems = []
    if spec.http is not None and not spec.http.loopback and spec.auth == "none":
        problems.append(
            (
                "auth",
                f"serving {spec.http} (not a loopback address) without authentication is refused: "
                "set auth = 'auto' or 'token' and create a token with `assernctl token create NAME`",
            )
        )
    if (spec.certfile is None) != (spec.keyfile is None):
        given = "certfile" if spec.certfile is not None else "keyfile"
        missing = "keyfile" if given == "certfile" else "certfile"
        problems.append((missing, f"TLS needs both certfile and keyfile; only {given} is set"))
    return problems
