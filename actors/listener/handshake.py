"""The handshake-era `initialize`, answered the same way by the session and the front door.

The session (session.py, protocol.py) answers a client's `initialize` with
`initialize_response` and `negotiate`; so does the front door of `assern serve`
(app/front_door.py), which may answer a stdio client's first `initialize` before the
tree is loaded, and hands the wire over as a `Wire` (the `StdioDoor` protocol is what
the listener needs of it). Both use these functions, so the two answers cannot drift
apart.

This module imports nothing heavy (no SDK, no pydantic): the front door runs before
they are loaded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import attrs
import trio

from assern.actors.identity import NAME, __version__
from assern.actors.jsonrpc import framing

#: The protocol revisions reachable with the `initialize` handshake, oldest first: the
#: SDK's `mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS` (tests/app/test_front_door.py
#: checks that they are the same).
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]

#: What assern calls itself in `serverInfo` (the session answers `initialize` with these).
SERVER_NAME = NAME
SERVER_VERSION = __version__

RequestId = int | str

# The shapes of what the door accepts in an initialize request: an object (a dict of
# sub-shapes), a boolean, or "objects" (an object whose values are objects). Anything
# it does not recognise exactly is left for the session to answer (or refuse).
_Shape = Mapping[str, Any] | type | str
_CLIENT_CAPABILITIES: dict[str, _Shape] = {
    "experimental": "objects",
    "extensions": "objects",
    "sampling": {"context": {}, "tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "roots": {"listChanged": bool},
    "tasks": {
        "list": {},
        "cancel": {},
        "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
    },
}


def negotiate(requested: str) -> str:
    """The protocol version an `initialize` for `requested` is answered with (as the SDK does)."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION


def capabilities_from(remembered: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The server capabilities to announce, from the backends' remembered ones (raw JSON).

    As `ClientConnection.capabilities()` with an empty catalog: tools, prompts and
    resources always (assern sends their list_changed itself); resource subscriptions,
    logging and completions only when a remembered backend offers them.
    """
    known = list(remembered)
    subscribe = any((c.get("resources") or {}).get("subscribe") is True for c in known)
    caps: dict[str, Any] = {
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": subscribe},
        "tools": {"listChanged": True},
    }
    if any(c.get("logging") is not None for c in known):
        caps["logging"] = {}
    if any(c.get("completions") is not None for c in known):
        caps["completions"] = {}
    return caps


def _fits(value: Any, shape: _Shape) -> bool:
    if value is None:
        return True
    if shape is bool:
        return isinstance(value, bool)
    if shape == "objects":
        return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
    assert isinstance(shape, Mapping)
    return isinstance(value, dict) and all(_fits(value.get(key), sub) for key, sub in shape.items())


def initialize_request_id(message: Any) -> RequestId | None:
    """The id of `message` if it is an `initialize` request the door may answer, else None.

    Only a well-formed request of the handshake's shape qualifies (the session would
    accept it); anything unusual is left to the session, which answers it or refuses it.
    """
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    request_id, params = message.get("id"), message.get("params")
    if message.get("method") != "initialize" or isinstance(request_id, bool):
        return None
    if not isinstance(request_id, int | str) or not isinstance(params, dict):
        return None
    info, meta = params.get("clientInfo"), params.get("_meta")
    if not isinstance(params.get("protocolVersion"), str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not _fits(params["capabilities"], _CLIENT_CAPABILITIES):
        return None
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("name", "version")):
        return None
    if not all(isinstance(info.get(k), str | None) for k in ("title", "description", "websiteUrl")):
        return None
    if info.get("icons") is not None or not isinstance(meta, dict | None):
        return None
    token = (meta or {}).get("progressToken")
    if isinstance(token, bool) or not isinstance(token, int | str | None):
        return None
    return request_id


def initialize_response(
    request_id: RequestId,
    requested: str,
    capabilities: Mapping[str, Any],
    *,
    server_name: str = SERVER_NAME,
    server_version: str = SERVER_VERSION,
    instructions: str | None = None,
) -> bytes:
    """The JSON-RPC response line to an `initialize`, encoded as the SDK encodes it.

    Both the door and the session (protocol.py) answer with it.
    """
    result: dict[str, Any] = {
        "capabilities": capabilities,
        "protocolVersion": negotiate(requested),
        "serverInfo": {"name": server_name, "version": server_version},
    }
    if instructions is not None:
        result["instructions"] = instructions
    body = json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return framing.encoded_result(request_id, body.encode())


@attrs.frozen(kw_only=True, eq=False)
class Wire:
    """The stdio wire as the listener takes it over.

    Attributes:
        receive: The client's bytes: those the door kept, then the live stream.
        send: The client's side to write to.
        answered: The id of the `initialize` the door answered (first take-over only):
            the session records it without answering it again.
    """

    receive: trio.abc.ReceiveStream
    send: trio.abc.SendStream
    answered: RequestId | None = None


class StdioDoor(Protocol):
    """What the stdio listener needs of the front door that held stdio before it started."""

    async def take(self) -> Wire:
        """Stop reading and hand the wire over, the bytes kept so far first.

        A later take (a restarted listener) gets the same wire, without `answered`.
        """
        ...

    def close(self) -> None:
        """Let go of the wire for good (idempotent): the stdio client is gone."""
        ...
