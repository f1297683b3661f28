"""`[[middleware]]` entries: read from the global file, each factory loaded and its
options checked when the file is read, every problem naming the file and the entry."""

from __future__ import annotations

import pytest
from config_world import World

from assern.actors.config.spec import ConfigError, MiddlewareSpec


def test_entries_are_read_in_order_with_their_options(world: World) -> None:
    world.global_config(
        """
        [[middleware]]
        use = "audit"
        options = { path = "~/audit.jsonl" }

        [[middleware]]
        name = "github-limit"
        use = "rate_limit"
        servers = ["github"]
        tools = ["*_issue"]
        options = { calls = 10, per = 60 }

        [[middleware]]
        use = "sample_middlewares:approval"
        asyncio = true
        options = { url = "http://127.0.0.1:9/approve" }
        """
    )
    settings = world.resolve().settings
    assert settings.middleware == (
        MiddlewareSpec(name="audit", use="audit", options={"path": "~/audit.jsonl"}),
        MiddlewareSpec(
            name="github-limit",
            use="rate_limit",
            servers=("github",),
            tools=("*_issue",),
            options={"calls": 10, "per": 60},
        ),
        MiddlewareSpec(
            name="sample_middlewares:approval",
            use="sample_middlewares:approval",
            options={"url": "http://127.0.0.1:9/approve"},
            asyncio=True,
        ),
    )


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ('use = "ratelimit"', "expected a shipped middleware ('rate_limit', 'redact', 'audit') or "),
        ('use = "no_such_module:factory"', "cannot import 'no_such_module': ModuleNotFoundError"),
        ('use = "json:nothing"', "module 'json' has no 'nothing' @ middleware[0].use"),
        ('use = "rate_limit"\noptions = { cals = 3 }', "'rate_limit' rejected its options: unknown option"),
        ('use = "audit"', "'audit' rejected its options: option 'path' is required"),
        ('use = "redact"\noptions = { patterns = ["("] }', "pattern '(' is not a regular expression"),
        ("use = 3", "middleware[0].use"),
        ('use = "audit"\nasyncio = "yes"', "middleware[0].asyncio"),
        ('use = "rate_limit"\nservers = "github"', "middleware[0].servers"),
        ('name = "x"', "middleware[0].use"),
    ],
)
def test_a_bad_entry_names_the_file_and_the_key(world: World, entry: str, problem: str) -> None:
    config = world.global_config(f"[[middleware]]\n{entry}\n")
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(config)
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_two_entries_need_two_names(world: World) -> None:
    world.global_config(
        """
        [[middleware]]
        use = "rate_limit"
        options = { calls = 1 }

        [[middleware]]
        use = "rate_limit"
        options = { concurrency = 1 }
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.problems == (
        "a second middleware named 'rate_limit': give each a distinct `name` @ middleware[1].name",
    )


def test_a_project_file_cannot_load_code_into_the_instance(world: World) -> None:
    """A repository's `.assern/config.toml` is not trusted to name Python to import."""
    world.global_config("")
    config = world.write("repo/.assern/config.toml", '[[middleware]]\nuse = "audit"\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd="repo")
    assert caught.value.file == str(config)
    assert caught.value.problems == (
        "a project's config file cannot configure middleware (it runs Python inside assern): "
        "put [[middleware]] in the global config file @ middleware",
    )
