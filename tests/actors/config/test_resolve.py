"""resolve_config end to end over a fake HOME, ASSERN_HOME and project folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_world import World

from assern.actors.config.home import default_assern_home
from assern.actors.config.listen import ListenSpec
from assern.actors.config.resolve import resolve_config
from assern.actors.config.spec import (
    DEFAULT_IDLE_TIMEOUT,
    ConfigError,
    Provenance,
    ResolvedConfig,
    ServerSpec,
    Settings,
    dormancy,
)
from assern.supervisor.spec import Restart, RestartPolicy

GITHUB_VECTOR = """
[servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_TOKEN = "${DEFAULT_TOKEN}" }

[projects.work]
directories = ["~/work/**"]
env = { GITHUB_TOKEN = "${WORK_TOKEN}" }
"""


def test_github_token_vector(world: World) -> None:
    """Global ${DEFAULT_TOKEN}, project ${WORK_TOKEN}, local .env value: the local .env wins."""
    world.global_config(GITHUB_VECTOR)
    world.global_env("DEFAULT_TOKEN=default-token\nWORK_TOKEN=work-token\n")
    local_env = world.write("work/repo/.assern/.env", "GITHUB_TOKEN=repo-specific-token\n")
    world.folder("work/repo/src")

    resolved = world.resolve(cwd="work/repo/src")

    assert resolved.project == "work"
    github = resolved.servers["github"]
    assert github.env["GITHUB_TOKEN"] == "repo-specific-token"
    assert github.env_keys_from["GITHUB_TOKEN"] == Provenance(layer="local-env", file=str(local_env))
    assert github.env["PATH"] == "/usr/bin:/bin"
    assert github.env["HOME"] == str(world.home)


def test_github_token_vector_without_local_env(world: World) -> None:
    """The same config: the project's token inside the project, the default outside."""
    config = world.global_config(GITHUB_VECTOR)
    world.global_env("DEFAULT_TOKEN=default-token\nWORK_TOKEN=work-token\n")
    world.folder("work/other")

    inside = world.resolve(cwd="work/other").servers["github"]
    assert inside.env["GITHUB_TOKEN"] == "work-token"
    assert inside.env_keys_from["GITHUB_TOKEN"] == Provenance(layer="project", file=str(config))

    outside = world.resolve().servers["github"]
    assert outside.env["GITHUB_TOKEN"] == "default-token"
    assert outside.env_keys_from["GITHUB_TOKEN"] == Provenance(layer="global-config", file=str(config))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("overlay", {"TOKEN": "project", "OTHER": "value"}),
        ("replace", {"TOKEN": "project"}),
    ],
)
def test_merge_modes_through_resolve(world: World, mode: str, expected: dict[str, str]) -> None:
    """The design vector, end to end; PATH and HOME stay in both modes."""
    world.global_config(
        f"""
        [servers.s]
        command = "srv"
        merge_mode = "{mode}"
        env = {{ TOKEN = "global", OTHER = "value" }}

        [projects.p]
        env = {{ TOKEN = "project" }}
        """
    )
    spec = world.resolve(project="p").servers["s"]
    config_keys = {key: spec.env[key] for key in spec.env_keys_from}
    assert config_keys == expected
    assert spec.env["PATH"] == "/usr/bin:/bin"
    assert spec.env["HOME"] == str(world.home)


def test_replace_without_project_env_keeps_server_env(world: World) -> None:
    world.global_config(
        """
        [servers.s]
        command = "srv"
        merge_mode = "replace"
        env = { TOKEN = "global" }

        [projects.p]
        directories = ["~/p"]
        """
    )
    assert world.resolve(project="p").servers["s"].env["TOKEN"] == "global"


def test_replaced_server_env_is_not_expanded(world: World) -> None:
    """A server env that the project replaces may reference variables this machine lacks."""
    world.global_config(
        """
        [servers.s]
        command = "srv"
        merge_mode = "replace"
        env = { TOKEN = "${ONLY_AT_HOME}" }

        [projects.p]
        env = { TOKEN = "work" }
        """
    )
    assert world.resolve(project="p").servers["s"].env["TOKEN"] == "work"


def test_layer_order(world: World) -> None:
    """Each layer beats every layer below it; K<n> is defined in layers 1..n."""
    world.environ.update({f"K{n}": "system" for n in range(1, 7)})
    global_env = world.global_env("".join(f"K{n}=global-env\n" for n in range(2, 7)))
    config = world.global_config(
        """
        [servers.s]
        command = "srv"
        env = { K3 = "global-config", K4 = "global-config", K5 = "global-config", K6 = "global-config" }

        [projects.p]
        env = { K4 = "project", K5 = "project", K6 = "project" }
        """
    )
    local_env = world.write("repo/.assern/.env", "K5=local-env\nK6=local-env\n")
    local_config = world.write(
        "repo/.assern/config.toml",
        'project = "p"\n[servers.s]\nenv = { K6 = "local-config" }\n',
    )

    spec = world.resolve(cwd="repo").servers["s"]

    layers = ["system", "global-env", "global-config", "project", "local-env", "local-config"]
    assert [spec.env[f"K{n}"] for n in range(1, 7)] == layers
    assert "K1" not in spec.env_keys_from
    assert [spec.env_keys_from[f"K{n}"] for n in range(2, 7)] == [
        Provenance(layer="global-env", file=str(global_env)),
        Provenance(layer="global-config", file=str(config)),
        Provenance(layer="project", file=str(config)),
        Provenance(layer="local-env", file=str(local_env)),
        Provenance(layer="local-config", file=str(local_config)),
    ]


def test_expansion_sources(world: World) -> None:
    """${VAR} sees the system env and both .env files (local over global over system)."""
    world.environ.update({"FROM_SYSTEM": "sys", "SHADOWED": "system"})
    world.global_env("FROM_GLOBAL=glob\nSHADOWED=global-env\n")
    world.write("repo/.assern/.env", "FROM_LOCAL=loc\nSHADOWED=local-env\n")
    world.global_config(
        """
        [servers.s]
        command = "${FROM_SYSTEM}-bin"
        args = ["$FROM_GLOBAL", "${FROM_LOCAL}", "${SHADOWED}", "$$literal", "${NOPE:-default}"]
        """
    )
    spec = world.resolve(cwd="repo").servers["s"]
    assert spec.command == "sys-bin"
    assert spec.args == ("glob", "loc", "local-env", "$literal", "default")


def test_env_values_may_use_lower_layers_of_the_same_server(world: World) -> None:
    world.global_config(
        """
        [servers.s]
        command = "srv"
        env = { BASE = "/opt/tool" }

        [projects.p]
        env = { TOOL_BIN = "${BASE}/bin" }

        [projects.p.servers.s]
        env = { TOOL_LIB = "${TOOL_BIN}/../lib" }
        """
    )
    world.write("repo/.assern/config.toml", 'project = "p"\n[servers.s]\nenv = { X = "${TOOL_LIB}!" }\n')
    env = world.resolve(cwd="repo").servers["s"].env
    assert env["TOOL_BIN"] == "/opt/tool/bin"
    assert env["TOOL_LIB"] == "/opt/tool/bin/../lib"
    assert env["X"] == "/opt/tool/bin/../lib!"


def test_project_subset_and_overrides(world: World) -> None:
    world.global_config(
        """
        [servers.github]
        command = "npx"
        timeout = 10

        [servers.jira]
        command = "jira-mcp"

        [servers.docs]
        url = "http://127.0.0.1:9000/mcp"

        [projects.small]
        servers = ["docs", "github"]

        [projects.tuned.servers.github]
        allowed = ["search_*"]
        timeout = 5
        start = "lazy"

        [projects.tuned.servers.jira]
        disabled = true

        [projects.tuned.servers.extra]
        command = "extra-mcp"
        """
    )
    everything = world.resolve()
    assert list(everything.servers) == ["github", "jira", "docs"]
    assert everything.project is None

    small = world.resolve(project="small")
    assert list(small.servers) == ["github", "docs"]  # declaration order, not list order

    tuned = world.resolve(project="tuned")
    assert list(tuned.servers) == ["github", "docs", "extra"]
    github = tuned.servers["github"]
    assert github.allowed == ("search_*",)
    assert github.timeout == 5.0
    assert github.start == "lazy"
    assert github.command == "npx"  # fields the override leaves out stay
    assert tuned.servers["extra"].command == "extra-mcp"


def test_disabled_servers(world: World) -> None:
    world.global_config(
        """
        [servers.off]
        command = "off"
        disabled = true
        env = { TOKEN = "${UNDEFINED_BUT_UNUSED}" }

        [servers.on]
        command = "on"

        [servers.later]
        command = "later"
        disabled = true
        """
    )
    world.write(
        "repo/.assern/config.toml", "[servers.on]\ndisabled = true\n[servers.later]\ndisabled = false\n"
    )
    assert list(world.resolve().servers) == ["on"]
    assert list(world.resolve(cwd="repo").servers) == ["later"]


def test_local_config_adds_servers_and_settings(world: World) -> None:
    world.global_config(
        """
        [settings]
        naming = "hybrid"

        [servers.github]
        command = "npx"
        """
    )
    world.write(
        "repo/.assern/config.toml",
        """
        [settings]
        max_name_length = 40
        initialize_wait = 2.5

        [servers.mine]
        command = "./bin/mine"
        cwd = "tools"
        """,
    )
    resolved = world.resolve(cwd="repo")
    assert resolved.settings == Settings(naming="hybrid", max_name_length=40, initialize_wait=2.5)
    assert list(resolved.servers) == ["github", "mine"]
    assert resolved.servers["mine"].cwd == str(world.home / "repo" / "tools")
    assert resolved.project == "repo"  # a .assern/ that names no project: labelled by its folder
    assert world.resolve().settings == Settings(naming="hybrid", max_name_length=64)


def test_local_config_names_its_project(world: World) -> None:
    """`project = "work"` applies that project even outside its directories."""
    world.global_config(GITHUB_VECTOR)
    world.global_env("DEFAULT_TOKEN=d\nWORK_TOKEN=w\n")
    world.write("elsewhere/repo/.assern/config.toml", 'project = "work"\n')
    resolved = world.resolve(cwd="elsewhere/repo")
    assert resolved.project == "work"
    assert resolved.servers["github"].env["GITHUB_TOKEN"] == "w"
    assert resolved.warnings == ()


def test_project_argument_wins_over_local_project(world: World) -> None:
    world.global_config("[projects.work]\n[projects.home]\n")
    world.write("repo/.assern/config.toml", 'project = "work"\n')
    resolved = world.resolve(cwd="repo", project="home")
    assert resolved.project == "home"
    assert any("--project home wins" in warning for warning in resolved.warnings)


def test_local_project_unknown_to_global_config_warns(world: World) -> None:
    world.write("repo/.assern/config.toml", 'project = "colleagues"\n')
    resolved = world.resolve(cwd="repo")
    assert resolved.project == "colleagues"
    assert any("'colleagues'" in w and "not defined" in w for w in resolved.warnings)


def test_mcp_servers_json_as_config(world: World) -> None:
    config = world.write(
        "claude_desktop_config.json",
        """
        {
          "globalShortcut": "ignored",
          "mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "fs-server", "${HOME}"],
                   "env": {"LEVEL": "debug"}, "autoApprove": ["read"]},
            "remote": {"url": "https://example.com/mcp", "headers": {"X-Key": "k"}},
            "events": {"type": "sse", "url": "https://example.com/sse"},
            "claude-code": {"type": "http", "url": "https://example.com/http"},
            "off": {"command": "x", "disabled": true}
          }
        }
        """,
    )
    resolved = world.resolve(config_path=config)
    assert list(resolved.servers) == ["fs", "remote", "events", "claude-code"]
    fs = resolved.servers["fs"]
    assert (fs.transport, fs.command, fs.args) == ("stdio", "npx", ("-y", "fs-server", str(world.home)))
    assert fs.env["LEVEL"] == "debug"
    assert fs.env_keys_from["LEVEL"] == Provenance(layer="mcp-json", file=str(config))
    assert resolved.servers["remote"].transport == "streamable-http"
    assert resolved.servers["remote"].headers == {"X-Key": "k"}
    assert resolved.servers["events"].transport == "sse"
    assert resolved.servers["claude-code"].transport == "streamable-http"
    assert resolved.files == (config,)


def test_relative_config_path_is_taken_from_cwd(world: World) -> None:
    world.write("repo/mcp.json", '{"mcpServers": {"a": {"command": "a"}}}')
    resolved = resolve_config(
        config_path=Path("mcp.json"),
        project=None,
        cwd=world.home / "repo",
        environ=world.environ,
        assern_home=world.assern_home,
    )
    assert list(resolved.servers) == ["a"]


def test_included_mcp_servers_json(world: World) -> None:
    """Included servers are global servers; a TOML table for one of them overrides it."""
    included = world.write(
        world.assern_home / "clients" / "cursor.json",
        '{"mcpServers": {"fs": {"command": "npx", "args": ["fs"], "env": {"A": "1", "B": "2"}}}}',
    )
    config = world.global_config(
        """
        include = ["clients/cursor.json"]

        [servers.fs]
        allowed = ["read_*"]
        env = { B = "override" }

        [servers.own]
        command = "own"

        [projects.p]
        servers = ["fs"]
        """
    )
    resolved = world.resolve()
    assert list(resolved.servers) == ["fs", "own"]
    fs = resolved.servers["fs"]
    assert (fs.command, fs.args, fs.allowed) == ("npx", ("fs",), ("read_*",))
    assert (fs.env["A"], fs.env["B"]) == ("1", "override")
    assert fs.env_keys_from["A"] == Provenance(layer="mcp-json", file=str(included))
    assert fs.env_keys_from["B"] == Provenance(layer="global-config", file=str(config))
    assert resolved.files == (config, included)
    assert list(world.resolve(project="p").servers) == ["fs"]


def test_local_include(world: World) -> None:
    local_json = world.write("repo/.assern/mcp.json", '{"mcpServers": {"repo-tool": {"command": "rt"}}}')
    local = world.write("repo/.assern/config.toml", 'include = ["mcp.json"]\n')
    resolved = world.resolve(cwd="repo")
    assert list(resolved.servers) == ["repo-tool"]
    assert resolved.files == (local, local_json)


def test_files_lists_every_contributing_file_in_layer_order(world: World) -> None:
    global_env = world.global_env("A=1\n")
    config = world.global_config('[servers.s]\ncommand = "s"\n')
    local_env = world.write("repo/.assern/.env", "B=2\n")
    local_config = world.write("repo/.assern/config.toml", "")
    assert world.resolve(cwd="repo").files == (global_env, config, local_env, local_config)
    assert world.resolve().files == (global_env, config)


def test_nothing_configured(world: World) -> None:
    cwd = world.folder("elsewhere")
    assert world.resolve() == ResolvedConfig(
        settings=Settings(),
        servers={},
        project=None,
        files=(),
        warnings=(),
        potential_files=(
            world.assern_home / ".env",
            world.assern_home / "config.toml",
            cwd / ".assern" / ".env",
            cwd / ".assern" / "config.toml",
            # with no assern config, cllm-mcp's files would be found (discover.py)
            cwd / "mcp-config.json",
            cwd / ".mcp-config.json",
            world.home / ".config" / "cllm-mcp" / "config.json",
        ),
        listen=ListenSpec(tokens_file=world.assern_home / "tokens.toml"),
        cwd=cwd,
    )


def test_potential_files_are_the_missing_would_be_contributors(world: World) -> None:
    """Hot reload watches these: files that do not exist yet but would count if created."""
    world.global_config('[servers.s]\ncommand = "s"\n')
    world.write("repo/.assern/.env", "A=1\n")
    world.folder("repo/src")
    resolved = world.resolve(cwd="repo/src")
    assert resolved.potential_files == (
        world.assern_home / ".env",
        world.home / "repo" / ".assern" / "config.toml",
    )
    # --config replaces the global config.toml, so it is no longer a would-be file.
    other = world.write("other.toml", "")
    assert world.assern_home / "config.toml" not in world.resolve(config_path=other).potential_files


def test_spec_defaults_and_policy(world: World) -> None:
    world.global_config(
        """
        [servers.plain]
        command = "p"

        [servers.tuned]
        url = "http://x"
        transport = "sse"
        restart = "transient"
        max_restarts = 3
        restart_window = 120
        backoff_initial = 1
        backoff_max = 8
        timeout = 12.5
        startup_timeout = 5
        idle_timeout = 300
        protocol = "2026-07-28"
        start = "lazy"
        allowed = ["a", "b_*"]
        """
    )
    servers = world.resolve().servers
    assert servers["plain"] == ServerSpec(
        name="plain",
        transport="stdio",
        command="p",
        env=servers["plain"].env,
        env_keys_from={},
        idle_timeout=DEFAULT_IDLE_TIMEOUT,
    )
    assert servers["plain"].policy == RestartPolicy()
    tuned = servers["tuned"]
    assert tuned.policy == RestartPolicy(
        restart=Restart.TRANSIENT,
        max_restarts=3,
        restart_window=120.0,
        backoff_initial=1.0,
        backoff_max=8.0,
    )
    assert (tuned.transport, tuned.url, tuned.command) == ("sse", "http://x", None)
    assert (tuned.timeout, tuned.startup_timeout, tuned.idle_timeout) == (12.5, 5.0, 300.0)
    assert (tuned.protocol, tuned.start, tuned.allowed) == ("2026-07-28", "lazy", ("a", "b_*"))


def test_cwd_resolution(world: World) -> None:
    world.global_config(
        """
        [servers.rel]
        command = "r"
        cwd = "servers/rel"

        [servers.tilde]
        command = "t"
        cwd = "~/code"

        [servers.abs]
        command = "a"
        cwd = "/srv/x"
        """
    )
    servers = world.resolve().servers
    assert servers["rel"].cwd == str(world.assern_home / "servers" / "rel")
    assert servers["tilde"].cwd == str(world.home / "code")
    assert servers["abs"].cwd == "/srv/x"


def test_warnings(world: World) -> None:
    world.global_config(
        """
        [servers.forever]
        command = "f"
        max_restarts = 5
        restart_window = 10
        backoff_initial = 1
        backoff_max = 30

        [servers.fine]
        command = "ok"
        max_restarts = 5
        restart_window = 60

        [servers.temporary]
        command = "t"
        restart = "temporary"
        restart_window = 1

        [servers.odd]
        command = "o"
        backoff_initial = 10
        backoff_max = 5
        restart_window = 3600

        [servers.mute]
        command = "m"
        allowed = []
        """
    )
    warnings = world.resolve().warnings
    assert len(warnings) == 3
    assert warnings[0].startswith("server 'forever': ")
    # the first restart is immediate, then 1 + 2 + 4 + 8 = 15s
    assert "at least 15s, longer than restart_window (10s)" in warnings[0]
    assert warnings[1].startswith("server 'odd': backoff_initial (10s) is larger")
    assert warnings[2] == "server 'mute': `allowed` is empty, so it exposes no tools"


def test_secrets_stay_out_of_reprs(world: World) -> None:
    world.global_env("SECRET=hunter2\n")
    world.global_config(
        """
        [servers.s]
        url = "http://x"
        headers = { Authorization = "Bearer ${SECRET}" }
        """
    )
    resolved = world.resolve()
    assert "hunter2" not in repr(resolved)
    assert resolved.servers["s"].headers == {"Authorization": "Bearer hunter2"}


def test_spec_is_hashable(world: World) -> None:
    """Specs can go in sets and dict keys (the backends supervisor diffs them)."""
    world.global_config('[servers.s]\ncommand = "s"\nenv = { A = "1" }\n')
    spec = world.resolve().servers["s"]
    assert {spec: 1}[spec] == 1


def test_default_assern_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert default_assern_home({"HOME": str(home)}) == home / ".valksor" / "assern"
    assert default_assern_home({"HOME": str(home), "ASSERN_HOME": "~/cfg"}) == home / "cfg"
    assert default_assern_home({"HOME": str(home), "ASSERN_HOME": "/etc/a"}) == Path("/etc/a")


def test_dotenv_files_reach_every_server(world: World) -> None:
    """Like the system environment, both .env files go into every child's env whole."""
    world.global_env("FROM_GLOBAL=g\n")
    world.write("repo/.assern/.env", "FROM_LOCAL=l\n")
    world.global_config('[servers.a]\ncommand = "a"\n[servers.b]\nurl = "http://b"\n')
    for spec in world.resolve(cwd="repo").servers.values():
        assert (spec.env["FROM_GLOBAL"], spec.env["FROM_LOCAL"]) == ("g", "l")
        assert spec.env_keys_from["FROM_LOCAL"].layer == "local-env"


def test_problems_are_raised_for_the_lowest_layer_file_first(world: World) -> None:
    """With bad values in several files, the lowest layer's file is reported."""
    config = world.global_config('[servers.a]\ncommand = "a"\n[servers.z]\ncommand = "${NOPE_GLOBAL}"\n')
    # Server a (resolved first) is bad in the local file, z in the global one.
    world.write("repo/.assern/config.toml", '[servers.a]\nenv = { X = "${NOPE_LOCAL}" }\n')
    with pytest.raises(ConfigError) as caught:
        world.resolve(cwd="repo")
    assert caught.value.file == str(config)


def test_idle_timeout_comes_from_the_server_else_the_settings(world: World) -> None:
    world.global_config(
        """
        [settings]
        idle_timeout = 120

        [servers.plain]
        command = "p"

        [servers.own]
        command = "o"
        idle_timeout = 30

        [servers.never]
        command = "n"
        idle_timeout = 0

        [servers.browser]
        command = "b"
        keep_alive = true
        idle_timeout = 30
        """
    )
    servers = world.resolve().servers
    assert {name: spec.idle_timeout for name, spec in servers.items()} == {
        "plain": 120.0,
        "own": 30.0,
        "never": None,
        "browser": None,
    }
    assert servers["browser"].keep_alive
    assert world.resolve().settings.idle_timeout == 120.0


def test_settings_idle_timeout_zero_keeps_every_backend_running(world: World) -> None:
    world.global_config('[settings]\nidle_timeout = 0\n\n[servers.plain]\ncommand = "p"\n')
    assert world.resolve().servers["plain"].idle_timeout is None


def test_a_negative_idle_timeout_names_the_key(world: World) -> None:
    world.global_config('[servers.plain]\ncommand = "p"\nidle_timeout = -1\n')
    with pytest.raises(ConfigError, match="idle_timeout"):
        world.resolve()


@pytest.mark.parametrize(
    ("own", "keep_alive", "default", "expected"),
    [
        (None, False, 600.0, 600.0),
        (30.0, False, 600.0, 30.0),
        (0.0, False, 600.0, None),
        (None, False, 0.0, None),
        (30.0, True, 600.0, None),
        (None, True, 600.0, None),
    ],
)
def test_dormancy(own: float | None, keep_alive: bool, default: float, expected: float | None) -> None:
    assert dormancy(own, keep_alive, default) == expected


def test_a_server_can_run_in_the_project_root_and_the_variable_reaches_no_process(world: World) -> None:
    world.global_config(
        """
        [servers.files]
        command = "f"
        cwd = "${ASSERN_PROJECT_ROOT}"
        args = ["--root", "${ASSERN_PROJECT_ROOT}/src"]

        [servers.plain]
        command = "p"
        """
    )
    folder = world.folder("work/repo")
    servers = world.resolve(cwd=folder).servers
    assert servers["files"].cwd == str(folder)
    assert servers["files"].args == ("--root", f"{folder}/src")
    assert servers["plain"].cwd is None  # no cwd: shared by every project (docs/configuration.md)
    assert "ASSERN_PROJECT_ROOT" not in servers["files"].env
