"""Fixtures for the end-to-end tests (the harness itself lives in harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import AssernEnv, make_env, stop_daemon


@pytest.fixture
def assern_env(tmp_path: Path) -> Iterator[AssernEnv]:
    env = make_env(tmp_path)
    yield env
    stop_daemon(env)  # the one the test's first `assern serve` started, if any


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "config.toml"
        path.write_text(text)
        return path

    return write
