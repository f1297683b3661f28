"""What a backend does with a client's own input rounds (messages.Rounds) when it has none.

A backend of the handshake era asks its client during the call instead of answering
`input_required`; those asks become assern's rounds (actors/listener/round_trips.py).
So a `requestState` that reaches such a backend was never issued by it: the request is
refused as an unknown state would be, and answers without a state are ignored (the
backend asks again if it needs them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_types as types

from assern.actors.jsonrpc.errors import RpcError

if TYPE_CHECKING:
    from assern.actors.backend.messages import Rounds

#: the client capability each request a backend may ask of its client needs
CAPABILITY_OF = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


def unknown_state(state: str) -> RpcError:
    """The error for a `requestState` nobody here issued or still holds (-32602)."""
    return RpcError(
        types.INVALID_PARAMS,
        "requestState is unknown or expired: send the request again without it",
        {"requestState": state},
    )


def refuse_foreign_state(rounds: Rounds | None) -> None:
    """Raise the unknown-state error when `rounds` carries a `requestState`.

    Raises:
        RpcError: -32602, with the state in its data.
    """
    if rounds is not None and rounds.request_state is not None:
        raise unknown_state(rounds.request_state)
