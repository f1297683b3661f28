"""assern answers a 2026-07-28 backend's input rounds for a client that cannot.

A backend of the stateless revision does not send its client requests during a call:
it answers `input_required` with the requests it needs (`inputRequests`, by key) and
an opaque `requestState`, and expects the same request again with the answers
(`inputResponses`) and that state. A handshake-era client knows nothing of this, but it
can answer the same requests as server-to-client requests. `drive` takes a first
answer, asks the calling client each input request in turn (`ask`), sends the request again
(`retry`) and repeats until the backend answers for good; a round with only a state
waits a little before it retries. Everything stays plain JSON: a terminal answer is
returned as the backend wrote it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
import trio

from assern.actors.backend.rounds import CAPABILITY_OF
from assern.actors.jsonrpc.errors import RpcError

#: rounds before assern gives up on a backend that keeps asking
MAX_ROUNDS = 10
#: the wait before retrying a round that carried only a state, doubling up to the cap
STATE_ONLY_DELAY = 0.05
STATE_ONLY_DELAY_CAP = 0.25

Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
Retry = Callable[[dict[str, Any] | None, str | None], Awaitable[dict[str, Any]]]


def input_required(answer: Mapping[str, Any]) -> bool:
    """Whether a backend's result is an `input_required` round rather than the answer."""
    return answer.get("resultType") == "input_required"


async def drive(
    first: dict[str, Any], ask: Ask, retry: Retry, *, max_rounds: int = MAX_ROUNDS
) -> dict[str, Any]:
    """The backend's terminal answer, after as many rounds as it asks (at most `max_rounds`).

    Raises:
        RpcError: an input request assern cannot relay, the client's refusal of one
            (its error, as the client gave it), or too many rounds.
    """
    answer = first
    rounds = 0
    delay = STATE_ONLY_DELAY
    while input_required(answer):
        rounds += 1
        if rounds > max_rounds:
            raise RpcError(
                types.INTERNAL_ERROR,
                f"the server asked for input {max_rounds} times without answering; gave up",
            )
        requests = answer.get("inputRequests") or {}
        state = answer.get("requestState")
        if not isinstance(requests, dict) or (state is not None and not isinstance(state, str)):
            raise RpcError(types.INTERNAL_ERROR, "the server's input_required result is malformed")
        if requests:
            delay = STATE_ONLY_DELAY
            responses: dict[str, Any] | None = await _ask_all(requests, ask)
        else:
            await trio.sleep(delay)
            delay = min(delay * 2, STATE_ONLY_DELAY_CAP)
            responses = None
        answer = await retry(responses, state)
    return answer


async def _ask_all(requests: Mapping[str, Any], ask: Ask) -> dict[str, Any]:
    """Each input request asked of the client, one after another; their answers by key."""
    responses: dict[str, Any] = {}
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        if not isinstance(method, str) or method not in CAPABILITY_OF:
            raise RpcError(
                types.INTERNAL_ERROR, f"the server asked for input assern cannot relay: {method!r}"
            )
        params = request.get("params")
        responses[key] = await ask(method, params if isinstance(params, dict) else None)
    return responses
