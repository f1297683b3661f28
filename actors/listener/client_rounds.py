"""A 2026-07-28 client's own input rounds, passed through to a 2026-07-28 backend.

When both ends speak 2026-07-28, a backend that needs its client's input (sampling,
elicitation, roots) answers `input_required` with its own keys and `requestState`, and
the client retries with `inputResponses`. assern passes both directions through
unchanged (actors/backend/messages.Rounds): the backend keeps its own state, assern
keeps none, and the client sees exactly what the backend asked. The one check on the
way back is the 2026-07-28 rule that a server may not ask for what the client did not
declare: the backend declared assern's capabilities, not this client's, so an input
request the request's `clientCapabilities` leave out is refused here with
MissingRequiredClientCapability (-32021), naming what is missing.

A backend of the handshake era has no rounds of its own; its requests during the call
become assern's rounds instead (round_trips.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import mcp_types as types
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from assern.actors.backend.messages import Rounds
from assern.actors.backend.rounds import CAPABILITY_OF
from assern.actors.jsonrpc.errors import RpcError

R = TypeVar("R")


def client_rounds(params: Any) -> Rounds:
    """The round fields of a 2026-07-28 request (`tools/call`, `prompts/get`, `resources/read`)."""
    meta = params.meta
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    return Rounds(
        input_responses=params.input_responses,
        request_state=params.request_state,
        client_capabilities=dict(declared) if isinstance(declared, Mapping) else None,
    )


def undeclared(result: types.InputRequiredResult, declared: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client capabilities `result`'s input requests need and `declared` lacks, as a
    ClientCapabilities object (`{"sampling": {}}`); empty when nothing is missing, or
    when the request declared nothing to check against."""
    if declared is None:
        return {}
    missing: dict[str, Any] = {}
    for ask in (result.input_requests or {}).values():
        capability = CAPABILITY_OF.get(getattr(ask, "method", ""))
        if capability is not None and capability not in declared:
            missing[capability] = {}
    return missing


def passed_back(result: R, rounds: Rounds | None, server: str) -> R:
    """`result` as the client gets it: an `input_required` one only if the client can answer it.

    Raises:
        RpcError: -32021 when the backend asks for a capability the client did not declare.
    """
    if rounds is None or not isinstance(result, types.InputRequiredResult):
        return result
    missing = undeclared(result, rounds.client_capabilities)
    if missing:
        names = ", ".join(sorted(missing))
        raise RpcError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"server '{server}' needs the client's {names} capability, which this request does not declare",
            {"requiredCapabilities": missing},
        )
    return result
