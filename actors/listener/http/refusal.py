"""A request the HTTP front refuses: the status, the message the client reads, the reason logged."""

from __future__ import annotations

import attrs


@attrs.frozen
class Refusal:
    status: int
    message: str
    #: one word for the log event (never a token's value)
    reason: str
    headers: tuple[tuple[str, str], ...] = ()
