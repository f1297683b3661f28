"""The `assern` entry point's quick path: which starts it may stand for, and what it imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from assern.app.hint import serve_arguments
from assern.app.quick import quick_proxy


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve"], []),
        (["serve", "--config", "a.toml"], ["--config", "a.toml"]),
        (["serve", "--log-level=debug", "--config=a.toml"], ["--config", "a.toml", "--log-level", "debug"]),
        (["serve", "--project", "p", "--config", "c"], ["--config", "c", "--project", "p"]),
    ],
)
def test_serve_arguments_are_put_in_one_order(argv: list[str], expected: list[str]) -> None:
    assert serve_arguments(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["daemon"],
        ["list"],
        ["serve", "--help"],
        ["serve", "--config"],  # a value is missing: the full path says so
        ["serve", "--config", "a", "--config", "b"],
        ["serve", "--fresh"],
        ["--version"],
    ],
)
def test_anything_else_takes_the_full_path(argv: list[str]) -> None:
    assert serve_arguments(argv) is None


def test_no_hint_or_no_sharing_takes_the_full_path(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "ASSERN_HOME": str(tmp_path / "assern")}
    assert quick_proxy(["serve"], environ, str(tmp_path)) is None
    assert quick_proxy(["serve"], {**environ, "ASSERN_NO_INSTANCE_SHARING": "1"}, str(tmp_path)) is None


def test_the_entry_point_imports_nothing_heavy_before_it_knows_it_must() -> None:
    """A proxy found through its hint never loads the tree, the config machinery, or even
    `pathlib` and `typing` (each costs resident memory in every proxy)."""
    heavy = ("trio", "structlog", "attrs", "cattrs", "mcp", "anyio", "pathlib", "typing", "hashlib")
    code = (
        f"import sys, assern.app.quick\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
