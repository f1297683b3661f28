"""What can go wrong with a backend, as exceptions whose text says why."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class BackendExited(Exception):
    def __init__(self, server: str, description: str) -> None:
        super().__init__(f"server '{server}' {description}")
        self.description = description


class BackendStartTimeout(Exception):
    pass


class BackendTimeout(Exception):
    pass


class HandshakeFailed(Exception):
    """The backend's answer to `initialize` cannot start a connection.

    The text says why, as a predicate of the server ("chose protocol version …").
    """


class BackendHung(Exception):
    """The backend stopped answering (a call past its timeout, or no answer to a ping)."""

    def __init__(self, server: str, description: str) -> None:
        super().__init__(f"server '{server}' {description}")
        self.description = description


def describe_exit(code: int | None, stderr_tail: list[str]) -> str:
    if code is None:
        text = "lost its connection"
    elif code < 0:
        text = f"was killed by signal {-code}"
    else:
        text = f"exited with code {code}"
    if stderr_tail:
        text += "; last stderr: " + " | ".join(stderr_tail[-3:])
    return text


def describe_invalid(exc: ValidationError, limit: int = 3) -> str:
    """The first few problems of a validation error, on one line."""
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or '(top)'}: {error['msg']}"
        for error in exc.errors()[:limit]
    ]
    more = exc.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")
