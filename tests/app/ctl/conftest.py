"""The `world` fixture: a fake user world under tmp_path (tests/support/config_world.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_world import World


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)
