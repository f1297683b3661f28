"""deny, read_only, validate and confirm in `[settings]`, `[profiles.NAME]` and
`[servers.NAME]`; `[groups.NAME]` tables; each checked."""

from __future__ import annotations

import pytest
from config_world import World

from assern.actors.config.spec import CallRules, ConfigError, Group


def test_rules_and_groups_are_read_from_both_files(world: World) -> None:
    world.global_config(
        """
        [settings]
        deny = ["*_delete_*"]
        validate = "strict"
        confirm = ["destructive"]
        description_format = "toon"

        [servers.github]
        command = "npx"
        read_only = true
        validate = "off"
        deny = ["*_admin_*"]

        [profiles.small]
        read_only = true
        confirm = ["*_push_*"]

        [groups.issues]
        tools = ["github_*_issue", "jira_*"]
        description = "Issues everywhere"
        """
    )
    world.write(
        "repo/.assern/config.toml",
        """
        [settings]
        validate = "warn"

        [profiles.small]
        validate = "off"

        [groups.issues]
        tools = ["*_issue"]
        """,
    )
    resolved = world.resolve(cwd="repo")
    settings = resolved.settings
    assert settings.rules == CallRules(deny=("*_delete_*",), validate="warn", confirm=("destructive",))
    assert settings.description_format == "toon"
    profile = settings.profile("small")
    assert profile is not None
    assert profile.rules == CallRules(read_only=True, validate="off", confirm=("*_push_*",))
    assert resolved.servers["github"].rules == CallRules(deny=("*_admin_*",), read_only=True, validate="off")
    assert settings.groups == (Group(name="issues", tools=("*_issue",)),)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[settings]\nvalidate = "loose"', "settings.validate"),
        ("[settings]\nread_only = 1", "settings.read_only"),
        ('[settings]\ndeny = "x"', "settings.deny"),
        ('[settings]\ndescription_format = "xml"', "settings.description_format"),
        ('[profiles.p]\nvalidate = "hard"', "profiles.p.validate"),
        ('[servers.s]\ncommand = "x"\nconfirm = 3', "servers.s.confirm"),
        ("[groups.g]\ndescription = 'no tools'", "groups.g.tools"),
    ],
)
def test_bad_values_name_the_file_and_the_key(world: World, table: str, problem: str) -> None:
    config = world.global_config(table + "\n")
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(config)
    assert any(problem in line for line in caught.value.problems), caught.value.problems
