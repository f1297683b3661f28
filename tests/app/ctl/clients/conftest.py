"""The `clients_world` fixture: a HOME with every client's files (tests/support/clients_world.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clients_world import ClientWorld


@pytest.fixture
def clients_world(tmp_path: Path) -> ClientWorld:
    return ClientWorld(tmp_path)
