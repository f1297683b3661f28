"""Zero servers is never silent: the line a start prints, naming where it looked."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_world import World

from assern.actors.config.spec import ResolvedConfig, ServerSpec, Settings
from assern.app.no_servers import looked_at, no_servers_line, no_servers_problem


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_no_configuration_found_names_the_files_looked_for(world: World) -> None:
    work = world.folder("work")
    config = world.resolve(cwd="work")
    # assern's own files first, then the mcpServers files it would read (cllm-mcp's)
    looked = looked_at(config)
    assert looked[:2] == [world.assern_home / "config.toml", work / ".assern" / "config.toml"]
    assert all(path.name.endswith(".json") for path in looked[2:])
    line = no_servers_line(config)
    assert line is not None
    assert line.startswith(
        f"assern: no server to serve: no configuration found (looked for {world.assern_home}/config.toml, "
        f"{work}/.assern/config.toml, "
    )
    assert line.endswith("); see `assernctl doctor`")


def test_a_configuration_that_yields_no_server_names_its_files(world: World) -> None:
    world.global_env("TOKEN=x\n")
    world.global_config(
        """
        [servers.github]
        command = "npx"
        disabled = true
        """
    )
    config = world.resolve()
    assert looked_at(config) == [world.assern_home / "config.toml"]  # the .env holds no server
    assert no_servers_problem(config) == (
        f"{world.assern_home}/config.toml yields no server (none defined, or every one disabled or left out "
        "by the project)"
    )


def test_a_configuration_with_servers_says_nothing() -> None:
    spec = ServerSpec(name="a", transport="stdio", command="npx")
    config = ResolvedConfig(settings=Settings(), servers={"a": spec}, project=None, files=(Path("/c.toml"),))
    assert no_servers_line(config) is None
