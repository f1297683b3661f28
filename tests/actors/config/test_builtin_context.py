"""`builtin = "context"`: the context server as a stdio backend, its keys and their errors."""

from __future__ import annotations

import sys

import pytest
from config_world import World

from assern.actors.config.merge import database_path
from assern.actors.config.spec import ConfigError
from assern.context import store


def _problems(world: World, body: str, *, cwd: str | None = None) -> tuple[str | None, tuple[str, ...]]:
    world.global_config(body)
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd=cwd)
    return caught.value.file, caught.value.problems


def test_a_context_server_runs_our_module_with_this_python(world: World) -> None:
    project = world.folder("work/app")
    world.write("work/app/.assern/config.toml", "")
    world.global_config(
        """
        [servers.code]
        builtin = "context"
        exclude = ["*.min.js", "dist/"]
        secrets = ["*.vault"]
        max_file_size = 2000
        """
    )
    world.folder("work/app/src")
    spec = world.resolve(cwd="work/app/src").servers["code"]
    assert spec.transport == "stdio"
    assert spec.command == sys.executable
    db = database_path(world.assern_home, project)
    assert spec.args == (
        "-I",
        "-m",
        "assern.context",
        "--root",
        str(project),
        "--exclude",
        "*.min.js",
        "--exclude",
        "dist/",
        "--secret",
        "*.vault",
        "--max-file-size",
        "2000",
        "--db",
        str(db),
    )
    # the instance and the process compute the same database for the same root
    assert db == store.database_path(world.assern_home, project)


def test_the_default_root_is_the_current_folder_without_a_project(world: World) -> None:
    world.global_config('[servers.code]\nbuiltin = "context"\n')
    here = world.folder("somewhere/deep")
    args = world.resolve(cwd="somewhere/deep").servers["code"].args
    assert args[args.index("--root") + 1] == str(here)


def test_a_relative_root_is_taken_from_the_file_that_names_it(world: World) -> None:
    world.folder("work/app/lib")
    world.write("work/app/.assern/config.toml", '[servers.code]\nbuiltin = "context"\nroot = "lib"\n')
    args = world.resolve(cwd="work/app").servers["code"].args
    assert args[args.index("--root") + 1] == str(world.home / "work/app/lib")


def test_an_override_keeps_the_builtin_and_changes_its_keys(world: World) -> None:
    world.folder("work/app")
    world.global_config('[servers.code]\nbuiltin = "context"\n')
    world.write("work/app/.assern/config.toml", '[servers.code]\nexclude = ["vendor/"]\n')
    args = world.resolve(cwd="work/app").servers["code"].args
    assert args[args.index("--exclude") + 1] == "vendor/"


@pytest.mark.parametrize(
    ("body", "problem", "key"),
    [
        (
            'builtin = "context"\nroot = "no/such/folder"',
            "expected the folder to index, got 'no/such/folder', which does not exist",
            "root",
        ),
        ('builtin = "context"\nroot = "file.txt"', "got 'file.txt', which is not a folder", "root"),
        ('builtin = "search"', "expected one of 'context', got 'search'", "builtin"),
        ('builtin = "context"\ncommand = "x"', "a builtin server takes no `command`", "command"),
        ('builtin = "context"\nurl = "http://x"', "a builtin server takes no `url`", "url"),
        ('builtin = "context"\nargs = ["-v"]', "a builtin server takes no `args`", "args"),
        ('builtin = "context"\nmax_file_size = 0', "expected a byte count >= 1, got 0", "max_file_size"),
        ('builtin = "context"\nexclude = "*.js"', "expected a list, got '*.js'", "exclude"),
        (
            'command = "x"\nroot = "."',
            '`root` is a key of the context server only (`builtin = "context"`)',
            "root",
        ),
        (
            'builtin = "context"\ntransport = "sse"',
            "a builtin server runs over stdio, not 'sse'",
            "transport",
        ),
    ],
)
def test_bad_context_tables_name_the_file_and_the_key(
    world: World, body: str, problem: str, key: str
) -> None:
    world.write(world.assern_home / "file.txt", "not a folder")
    file, problems = _problems(world, f"[servers.code]\n{body}\n")
    assert file == str(world.assern_home / "config.toml")
    assert len(problems) == 1, problems
    assert problem in problems[0]
    assert problems[0].endswith(f"@ servers.code.{key}")


def test_a_builtin_in_a_lower_layer_refuses_a_command_above(world: World) -> None:
    world.folder("work/app")
    world.global_config('[servers.code]\nbuiltin = "context"\n')
    local = world.write("work/app/.assern/config.toml", '[servers.code]\ncommand = "x"\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd="work/app")
    assert caught.value.file == str(local)
    assert caught.value.problems[0].startswith("a builtin server takes no `command`")
    assert caught.value.problems[0].endswith("@ servers.code.command")
