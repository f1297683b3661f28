"""Confirmation by the calling client: before a call that a `confirm` rule names leaves
assern, its own client is asked through MCP elicitation (a server-to-client request on a
handshake-era connection, an `input_required` round on a 2026-07-28 one).

Only an `accept` lets the call through. A decline, a cancel, or a client that cannot be
asked (no elicitation capability, or an error) refuses it with a tool error the model
reads; the refusal is logged once as `call_refused` with rule "confirm".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from assern.actors.gate.middleware import error_result

if TYPE_CHECKING:
    import mcp_types as types

log = structlog.get_logger()

#: the longest argument text shown in the question
ARGUMENTS_SHOWN = 400

Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]


def question(server: str, tool: str, arguments: Any) -> str:
    """What the user is asked: `Allow notes.delete_note with {"id": 1}?`"""
    shown = json.dumps(arguments or {}, ensure_ascii=False, sort_keys=True)
    if len(shown) > ARGUMENTS_SHOWN:
        shown = shown[: ARGUMENTS_SHOWN - 1] + "…"
    return f"Allow {server}.{tool} with {shown}?"


def _refused(exposed: str, why: str) -> types.CallToolResult:
    return error_result(f"The call of {exposed} was not sent: {why}.")


async def confirm(
    ask: Ask,
    *,
    exposed: str,
    server: str,
    tool: str,
    arguments: Any,
    client: str | None,
    elicits: bool | None = None,
) -> types.CallToolResult | None:
    """Ask the calling client; None when it accepted, else the refusal to answer with.

    `elicits`: whether the client declared the elicitation capability (None: unknown,
    so it is asked and its error, if any, refuses the call).
    """
    if elicits is False:
        log.info("call_refused", server=server, tool=tool, rule="confirm", client=client, outcome="not asked")
        return _refused(
            exposed,
            "it needs the user's confirmation and this client cannot be asked (it does not "
            "declare the elicitation capability)",
        )
    params: dict[str, Any] = {
        "mode": "form",
        "message": question(server, tool, arguments),
        "requestedSchema": {"type": "object", "properties": {}},
    }
    try:
        answer = await ask("elicitation/create", params)
    except Exception as exc:
        why = str(exc) or type(exc).__name__
        log.info("call_refused", server=server, tool=tool, rule="confirm", client=client, outcome="not asked")
        return _refused(exposed, f"it needs the user's confirmation and this client cannot be asked ({why})")
    action = answer.get("action")
    if action == "accept":
        log.info("call_confirmed", server=server, tool=tool, client=client)
        return None
    log.info("call_refused", server=server, tool=tool, rule="confirm", client=client, outcome=action)
    said = "declined" if action == "decline" else "cancelled"
    return _refused(exposed, f"the user {said} it when asked to confirm")
