"""`[profiles.NAME]` tables: read from both files, merged field by field, checked."""

from __future__ import annotations

import pytest
from config_world import World

from assern.actors.config.spec import ConfigError, Profile


def test_profiles_keep_declaration_order_and_local_tables_override_fields(world: World) -> None:
    world.global_config(
        """
        [settings]
        exposure = "search"
        max_tools = 40

        [servers.github]
        command = "npx"

        [servers.time]
        command = "uvx"

        [profiles.small]
        match = ["ollama*", "lm-studio"]
        servers = ["time"]
        max_tools = 20

        [profiles.inspector]
        match = ["mcp-inspector"]
        exposure = "all"
        """
    )
    world.write(
        "repo/.assern/config.toml",
        """
        [profiles.small]
        max_tools = 10
        exclude_tools = ["*_delete_*"]

        [profiles.agents]
        match = ["claude-code"]
        max_list_tokens = 5000
        """,
    )
    settings = world.resolve(cwd="repo").settings
    assert settings.exposure == "search"
    assert settings.max_tools == 40
    assert [p.name for p in settings.profiles] == ["small", "inspector", "agents"]
    assert settings.profile("small") == Profile(
        name="small",
        match=("ollama*", "lm-studio"),
        servers=("time",),
        max_tools=10,
        exclude_tools=("*_delete_*",),
    )
    assert settings.profile("inspector") == Profile(
        name="inspector", match=("mcp-inspector",), exposure="all"
    )
    assert settings.profile("nope") is None
    # Outside the repo only the global file's profiles apply.
    assert [p.name for p in world.resolve().settings.profiles] == ["small", "inspector"]


def test_a_profile_naming_a_server_that_does_not_run_is_a_warning(world: World) -> None:
    world.global_config(
        """
        [servers.github]
        command = "npx"

        [profiles.small]
        servers = ["githup"]
        exclude_servers = ["github"]
        """
    )
    warnings = world.resolve().warnings
    assert any("profile 'small'" in w and "'githup'" in w and "servers: github" in w for w in warnings)
    assert not any("'github'," in w for w in warnings)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("max_tools = -1", "expected an integer >= 0, got -1 @ profiles.small.max_tools"),
        ("max_list_tokens = 0", "expected an integer >= 1, got 0 @ profiles.small.max_list_tokens"),
        ('exposure = "sideways"', "profiles.small.exposure"),
        ("max_name_length = 3", "expected an integer >= 16, got 3 @ profiles.small.max_name_length"),
        ('servers = "time"', "profiles.small.servers"),
        ('colour = "red"', "unknown key 'colour' @ profiles.small"),
    ],
)
def test_bad_profile_values_name_the_file_and_the_key(world: World, table: str, problem: str) -> None:
    config = world.global_config(f"[profiles.small]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(config)
    assert any(problem in line for line in caught.value.problems), caught.value.problems
