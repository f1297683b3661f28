"""What a new user types first: --version (with the build id), --help, and `assern demo`
from a pipe."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from harness import AssernEnv, assern_command
from instances import assernctl_command

from assern.actors.identity import __version__
from assern.app.daemon.identity import build_id

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def run(
    argv: list[str], env: AssernEnv, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env.env, cwd=env.work, stdin=stdin, capture_output=True, text=True, timeout=60
    )


def test_both_commands_say_their_version_and_build(assern_env: AssernEnv) -> None:
    build = build_id(None)
    for command, name in ((assern_command(), "assern"), (assernctl_command(), "assernctl")):
        done = run([command, "--version"], assern_env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{name} {__version__} (build {build})"


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]  # read from actors/identity.py by the build
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_assernctl_help_lists_every_command_config_included(assern_env: AssernEnv) -> None:
    done = run([assernctl_command(), "--help"], assern_env)
    assert done.returncode == 0, done.stderr
    for command in (
        "config",
        "status",
        "list",
        "call",
        "restart",
        "stop",
        "start",
        "reload",
        "shutdown",
        "logs",
    ):
        assert re.search(rf"^\s+{command}\s", done.stdout, re.MULTILINE), f"{command} missing:\n{done.stdout}"


def test_demo_from_a_pipe_says_it_serves_mcp_and_how_to_see_the_demo(assern_env: AssernEnv) -> None:
    env = AssernEnv(
        assern_env.home,
        assern_env.assern_home,
        assern_env.work,
        {**assern_env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},
    )
    done = run([assern_command(), "demo"], env)  # stdin: /dev/null, at EOF at once
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the MCP wire: nothing but protocol on it
    first = done.stderr.splitlines()[0]
    assert "serves the demo's aggregate over MCP on stdio" in first
    assert "run `assern demo` in a terminal" in first
