"""What can go wrong with a backend, as exceptions whose text says why."""

from __future__ import annotations


class BackendExited(Exception):
    def __init__(self, server: str, description: str) -> None:
        super().__init__(f"server '{server}' {description}")
        self.description = description


class BackendStartTimeout(Exception):
    pass


class BackendTimeout(Exception):
    pass


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
