"""cllm-mcp's discovery order, and when a discovered file is used at all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from assern.actors.config.discover import GlobalChoice, discover_config, global_choice

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
    found = global_choice(
        explicit, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(LOCAL, USER)
    )
    assert found == GlobalChoice(path=explicit, required=True)  # the user's own: no folder to trust


@pytest.mark.parametrize("name", ["config.toml", "config.yaml"])
def test_an_assern_config_wins_over_discovery(name: str) -> None:
    found = global_choice(
        None, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(ASSERN_HOME / name, LOCAL)
    )
    assert found == GlobalChoice(path=None)  # resolve_config then reads $ASSERN_HOME


def test_the_users_own_cllm_mcp_file_needs_no_trust() -> None:
    found = global_choice(None, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(USER))
    assert found.path == USER
    assert found.folder is None
    assert found.candidates == (LOCAL, HIDDEN, USER)


@pytest.mark.parametrize("present", [LOCAL, HIDDEN])
def test_a_file_of_the_working_folder_is_that_folders_own(present: Path) -> None:
    found = global_choice(
        None, cwd=CWD, environ=ENVIRON, assern_home=ASSERN_HOME, is_file=exists(present, USER)
    )
    assert found.path == present
    assert found.folder == CWD  # it applies once CWD is trusted
