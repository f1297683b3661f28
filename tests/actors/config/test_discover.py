"""cllm-mcp's discovery order, and when a discovered file is used at all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from assern.actors.config.discover import config_path_for, discover_config

CWD = Path("/home/u/project")
ENVIRON = {"HOME": "/home/u"}
LOCAL = CWD / "mcp-config.json"
HIDDEN = CWD / ".mcp-config.json"
USER = Path("/home/u/.config/cllm-mcp/config.json")
ASSERN_HOME = Path("/home/u/.valksor/assern")


def exists(*paths: Path) -> Callable[[Path], bool]:
    present = set(paths)
    return lambda path: path in present


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        ((LOCAL, HIDDEN, USER), LOCAL),
        ((HIDDEN, USER), HIDDEN),
        ((USER,), USER),
        ((), None),
    ],
)
def test_discovery_order(present: tuple[Path, ...], expected: Path | None) -> None:
    assert discover_config(CWD, ENVIRON, is_file=exists(*present)) == expected


def test_home_comes_from_the_environment() -> None:
    other = Path("/elsewhere/.config/cllm-mcp/config.json")
    assert discover_config(CWD, {"HOME": "/elsewhere"}, is_file=exists(other)) == other


def test_explicit_config_wins() -> None:
    explicit = Path("mine.toml")
    found = config_path_for(
        explicit, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(LOCAL, USER)
    )
    assert found == explicit


@pytest.mark.parametrize("name", ["config.toml", "config.yaml"])
def test_an_assern_config_wins_over_discovery(name: str) -> None:
    found = config_path_for(
        None, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(ASSERN_HOME / name, LOCAL)
    )
    assert found is None  # resolve_config then reads $ASSERN_HOME


def test_discovery_applies_when_there_is_no_assern_config() -> None:
    found = config_path_for(None, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(USER))
    assert found == USER
