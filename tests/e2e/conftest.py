"""Fixtures for the end-to-end tests (the harness itself lives in harness.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from harness import AssernEnv, make_env


@pytest.fixture
def assern_env(tmp_path: Path) -> AssernEnv:
    return make_env(tmp_path)


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "config.toml"
        path.write_text(text)
        return path

    return write
