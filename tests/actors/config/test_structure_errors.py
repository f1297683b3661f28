"""Bad input becomes one plain ConfigError naming the file, the key path and the expectation."""

from __future__ import annotations

import pytest
from config_world import World

from assern.actors.config.keypath import format_key_path
from assern.actors.config.model import ConfigFile
from assern.actors.config.spec import ConfigError
from assern.actors.config.structure import loads_toml


def problems_of(world: World, server_toml: str) -> tuple[str, ...]:
    """The problems that a `[servers.github]` body produces, checking the file named."""
    path = world.global_config("[servers.github]\n" + server_toml)
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(path)
    return caught.value.problems


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        # integer
        (
            'command = "x"\nmax_restarts = "five"',
            "expected an integer, got 'five' @ servers.github.max_restarts",
        ),
        ('command = "x"\nmax_restarts = 2.5', "expected an integer, got 2.5"),
        ('command = "x"\nmax_restarts = true', "expected an integer, got true"),
        ('command = "x"\nmax_restarts = -1', "expected an integer >= 0, got -1"),
        # float
        ('command = "x"\ntimeout = "slow"', "expected a number, got 'slow' @ servers.github.timeout"),
        ('command = "x"\nrestart_window = 0', "expected a number > 0, got 0"),
        ('command = "x"\nbackoff_initial = -0.5', "expected a number >= 0, got -0.5"),
        # string
        ("command = 5", "expected a string, got 5 @ servers.github.command"),
        # bool
        ('command = "x"\ndisabled = "yes"', "expected true or false, got 'yes' @ servers.github.disabled"),
        # list and its items
        ('command = "x"\nargs = "-y"', "expected a list, got '-y' @ servers.github.args"),
        ('command = "x"\nargs = ["-y", 3]', "expected a string, got 3 @ servers.github.args[1]"),
        ('command = "x"\nallowed = "get_*"', "expected a list, got 'get_*' @ servers.github.allowed"),
        # table and its values (a wrong value under env or headers is described, never shown)
        (
            'command = "x"\nenv = "TOKEN=1"',
            "expected a table, got a string (value hidden) @ servers.github.env",
        ),
        ('command = "x"\nenv = { TOKEN = 1 }', "expected a string, got a number @ servers.github.env.TOKEN"),
        ('command = "x"\nheaders = { A = [] }', "expected a string, got a list @ servers.github.headers.A"),
        # Literal enums
        (
            'command = "x"\nmerge_mode = "both"',
            "expected one of 'overlay', 'replace', got 'both' @ servers.github.merge_mode",
        ),
        (
            'command = "x"\nrestart = "always"',
            "expected one of 'permanent', 'transient', 'temporary', got 'always' @ servers.github.restart",
        ),
        ('command = "x"\nstart = "now"', "expected one of 'eager', 'lazy', got 'now'"),
        ('url = "http://x"\ntransport = "http"', "expected one of 'stdio', 'streamable-http', 'sse'"),
        ('command = "x"\nprotocol = "v2"', "expected 'legacy', 'auto' or a protocol version"),
        # unknown keys
        (
            'comand = "npx"\nurl = "http://x"',
            "unknown key 'comand' (did you mean 'command'?) @ servers.github",
        ),
        # cross-field rules
        ('args = ["-y"]', "a server needs either `command` or `url` @ servers.github"),
        (
            'command = "x"\nurl = "http://x"',
            "a server takes either `command` or `url`, not both @ servers.github",
        ),
        (
            'url = "http://x"\ntransport = "stdio"',
            "transport 'stdio' needs `command`, not `url` @ servers.github.transport",
        ),
        (
            'command = "x"\ntransport = "sse"',
            "transport 'sse' needs `url`, not `command` @ servers.github.transport",
        ),
    ],
)
def test_one_bad_value_per_field_kind(world: World, body: str, problem: str) -> None:
    problems = problems_of(world, body)
    assert any(problem in p for p in problems), problems


def test_every_problem_of_a_file_is_reported(world: World) -> None:
    """Not just the first: every bad value of every table, in one error."""
    path = world.global_config(
        """
        bogus = 1

        [settings]
        naming = "short"

        [servers.github]
        comand = "npx"
        max_restarts = "five"
        merge_mode = "both"

        [servers.docs]
        url = "http://x"
        timeout = "slow"

        [projects.work]
        directories = "~/work/**"
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    error = caught.value
    assert not isinstance(error, BaseExceptionGroup)
    assert error.file == str(path)
    assert set(error.problems) == {
        "unknown key 'bogus' @ (top level)",
        "expected one of 'prefix', 'hybrid', got 'short' @ settings.naming",
        "unknown key 'comand' (did you mean 'command'?) @ servers.github",
        "expected an integer, got 'five' @ servers.github.max_restarts",
        "expected one of 'overlay', 'replace', got 'both' @ servers.github.merge_mode",
        "expected a number, got 'slow' @ servers.docs.timeout",
        "expected a list, got '~/work/**' @ projects.work.directories",
    }
    assert str(error).splitlines()[0].startswith(f"{path}: ")
    assert all(" @ " in line for line in str(error).splitlines())


def test_toml_syntax_error_names_file_and_line(world: World) -> None:
    path = world.global_config('[servers.github]\ncommand = "npx"\nargs = [\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(path)
    (problem,) = caught.value.problems
    assert problem.startswith("invalid TOML: ")
    assert "line 4" in problem or "end of document" in problem
    world.global_config('[servers.github]\ncommand = "npx"\nargs = = 1\n')
    with pytest.raises(ConfigError, match=r"invalid TOML: .*\(at line 3, column 8\)"):
        world.resolve()


def test_undefined_variable_names_file_key_and_variable(world: World) -> None:
    path = world.global_config(
        """
        [servers.github]
        command = "npx"
        env = { GITHUB_TOKEN = "${GITHUB_TOKEN}", API = "https://${DOMAIN:-github.com}" }
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(path)
    (problem,) = caught.value.problems
    assert problem.startswith("undefined variable 'GITHUB_TOKEN'")
    assert problem.endswith("@ servers.github.env.GITHUB_TOKEN")


def test_undefined_variables_everywhere_are_collected(world: World) -> None:
    world.global_config(
        """
        [servers.one]
        command = "${BIN}"
        args = ["ok", "--token=$TOKEN"]
        cwd = "${WORKDIR}"

        [servers.two]
        url = "https://${HOST}/mcp"
        headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    paths = [problem.rsplit(" @ ", 1)[1] for problem in caught.value.problems]
    assert paths == [
        "servers.one.command",
        "servers.one.args[1]",
        "servers.one.cwd",
        "servers.two.url",
        "servers.two.headers.Authorization",
    ]


def test_undefined_variable_in_project_env(world: World) -> None:
    path = world.global_config(
        """
        [servers.github]
        command = "npx"

        [projects.work]
        env = { GITHUB_TOKEN = "${WORK_TOKEN}" }
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve(project="work")
    assert caught.value.file == str(path)
    assert caught.value.problems[0].endswith("@ projects.work.env.GITHUB_TOKEN")
    assert "'WORK_TOKEN'" in caught.value.problems[0]


def test_project_table_errors(world: World) -> None:
    world.global_config(
        """
        [servers.github]
        command = "npx"

        [projects.work]
        directories = ["work/relative"]
        servers = ["github", "gitlab"]

        [projects.home]
        servers = 3

        [projects.lab.servers.new]
        args = ["x"]
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.problems == (
        "expected absolute paths or paths starting with '~', got 'work/relative' @ projects.work.directories",
        "expected a list of server names or a table of servers, got 3 @ projects.home.servers",
    )
    world.global_config(
        """
        [servers.github]
        command = "npx"

        [projects.work]
        servers = ["github", "gitlab"]

        [projects.lab.servers.new]
        args = ["x"]
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.problems == (
        "unknown server 'gitlab' (known servers: 'github') @ projects.work.servers[1]",
        "a server needs either `command` or `url` @ projects.lab.servers.new",
    )


def test_local_config_errors_name_the_local_file(world: World) -> None:
    world.global_config('[servers.github]\ncommand = "npx"\n')
    local = world.write("repo/.assern/config.toml", 'project = 5\n[servers.github]\ntimeout = "x"\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd="repo")
    assert caught.value.file == str(local)
    assert caught.value.problems == (
        "expected a string, got 5 @ project",
        "expected a number, got 'x' @ servers.github.timeout",
    )


def test_local_server_definition_needs_command_or_url(world: World) -> None:
    local = world.write("repo/.assern/config.toml", '[servers.mine]\nargs = ["x"]\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd="repo")
    assert caught.value.file == str(local)
    assert caught.value.problems == ("a server needs either `command` or `url` @ servers.mine",)


def test_override_adding_url_to_a_command_server(world: World) -> None:
    """Blame the higher layer and say where the other half comes from."""
    config = world.global_config('[servers.github]\ncommand = "npx"\n')
    local = world.write("repo/.assern/config.toml", '[servers.github]\nurl = "http://x"\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd="repo")
    assert caught.value.file == str(local)
    assert caught.value.problems == (
        "a server takes either `command` or `url`, not both "
        f"(`command` is set in {config} @ servers.github) @ servers.github.url",
    )


def test_bad_dotenv_names_the_env_file(world: World) -> None:
    env = world.global_env("GOOD=1\noops\n")
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(env)
    assert caught.value.problems == ("expected KEY=VALUE @ line 2",)


def test_missing_and_unreadable_files(world: World) -> None:
    with pytest.raises(ConfigError) as caught:
        world.resolve(config_path=world.home / "nope.toml")
    assert caught.value.file == str(world.home / "nope.toml")
    assert caught.value.problems == ("file not found",)

    world.folder("dir.toml")
    with pytest.raises(ConfigError, match="cannot read the file"):
        world.resolve(config_path=world.home / "dir.toml")

    binary = world.home / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        world.resolve(config_path=binary)


def test_missing_include(world: World) -> None:
    path = world.global_config('include = ["mcp.json", "~/other.json"]\n')
    world.write(world.assern_home / "mcp.json", '{"mcpServers": {}}')
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(path)
    assert caught.value.problems == (f"included file not found: {world.home / 'other.json'} @ include[1]",)


def test_bad_mcp_servers_json(world: World) -> None:
    bad = world.write("claude.json", '{"mcpServers": {"a": {"command": "x",}}}')
    with pytest.raises(ConfigError) as caught:
        world.resolve(config_path=bad)
    assert caught.value.file == str(bad)
    assert caught.value.problems[0].startswith("invalid JSON: ")
    assert "line 1, column" in caught.value.problems[0]

    world.write("claude.json", '{"mcpServers": {"a": {"args": ["x"], "env": {"K": 1}}}}')
    with pytest.raises(ConfigError) as caught:
        world.resolve(config_path=bad)
    assert caught.value.problems == ("expected a string, got a number @ mcpServers.a.env.K",)

    world.write("claude.json", '{"mcpServers": {"a": {"args": ["x"]}}}')
    with pytest.raises(ConfigError) as caught:
        world.resolve(config_path=bad)
    assert caught.value.problems == ("a server needs either `command` or `url` @ mcpServers.a",)

    world.write("claude.json", '{"servers_typo": {}}')
    with pytest.raises(ConfigError, match='"mcpServers"'):
        world.resolve(config_path=bad)


def test_unknown_project_argument(world: World) -> None:
    path = world.global_config("[projects.work]\n[projects.home]\n")
    with pytest.raises(ConfigError) as caught:
        world.resolve(project="nope")
    assert caught.value.file == str(path)
    assert caught.value.problems == ("unknown project 'nope' (known projects: 'work', 'home')",)


def test_loads_toml_directly() -> None:
    """The structuring boundary is usable on its own."""
    with pytest.raises(ConfigError) as caught:
        loads_toml("[servers.a]\nmax_restarts = 'x'\n", ConfigFile, file="inline.toml")
    assert str(caught.value) == ("inline.toml: expected an integer, got 'x' @ servers.a.max_restarts")


@pytest.mark.parametrize(
    ("path", "rendered"),
    [
        ((), "(top level)"),
        (("servers", "github", "max_restarts"), "servers.github.max_restarts"),
        (("servers", "github", "args", 1), "servers.github.args[1]"),
        (("servers", "my.server", "env", "A B"), 'servers."my.server".env."A B"'),
    ],
)
def test_key_paths(path: tuple[str | int, ...], rendered: str) -> None:
    assert format_key_path(path) == rendered


def test_a_negative_initialize_wait_is_refused(world: World) -> None:
    path = world.global_config('[settings]\ninitialize_wait = -1\n[servers.github]\ncommand = "npx"\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert caught.value.file == str(path)
    assert caught.value.problems == ("expected seconds >= 0, got -1 @ settings.initialize_wait",)
