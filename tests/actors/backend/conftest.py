"""A stand-in for a backend's stdin: what the raw lane wrote, one decoded line each."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest


class Outbox:
    """Takes lines like supervisor/io/writer.py's DirectWriter; refuses past `capacity` lines."""

    def __init__(self, capacity: int = 1000) -> None:
        self.capacity = capacity
        self.lines: list[bytes] = []

    def write_nowait(self, data: bytes) -> bool:
        if len(self.lines) >= self.capacity:
            return False
        self.lines.append(data)
        return True

    async def write(self, data: bytes) -> None:
        self.lines.append(data)

    def take(self) -> list[dict[str, Any]]:
        """The lines written since the last take, decoded."""
        taken, self.lines = self.lines, []
        return [json.loads(line) for line in taken]


@pytest.fixture
def outbox() -> Callable[..., Outbox]:
    return Outbox
