"""The configuration's checks: config.resolves, env.unresolved, config.no_servers and
server.launcher, each over the facts it reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_world import World
from doctor_facts import HOME, config, facts, lines

from assern.actors.config.spec import ConfigError
from assern.app.ctl.doctor.checks.config import (
    config_no_servers,
    config_resolves,
    env_unresolved,
    server_launcher,
    undefined,
)
from assern.app.ctl.doctor.facts import Launcher
from assern.app.ctl.doctor.finding import Finding, Status

UNDEFINED_TOKEN = (
    "undefined variable 'TOKEN' (not set in the environment or any .env file) @ servers.github.env.T"
)
UNDEFINED_TWO = (
    "undefined variables 'A', 'B' (not set in the environment or any .env file) @ servers.jira.url"
)
WRONG = "expected a number, got 'x' @ servers.jira.timeout"


def broken(*problems: str, file: str | None = "/home/me/.valksor/assern/config.toml") -> ConfigError:
    return ConfigError(file, problems)


def test_a_configuration_that_resolves_names_its_files_project_and_servers() -> None:
    assert lines(config_resolves(facts())) == [
        ("ok", "config.resolves", f"resolves ({HOME}/config.toml; no project): 1 server(s)")
    ]
    none = facts(config=config(files=()))
    assert config_resolves(none)[0].summary == "resolves (no configuration file; no project): 0 server(s)"


def test_its_warnings_make_it_a_warning_with_the_validate_command() -> None:
    found = config_resolves(facts(config=config("a", warnings=("w1", "w2")), flags=("--project", "p")))
    assert found == [
        Finding(
            "config.resolves",
            Status.WARN,
            f"resolves ({HOME}/config.toml; no project): 1 server(s); w1 (and 1 more)",
            "assernctl config validate --project p",
        )
    ]


def test_a_broken_file_fails_naming_the_file_and_the_key() -> None:
    found = config_resolves(facts(config=None, config_error=broken(WRONG, UNDEFINED_TOKEN)))
    assert lines(found) == [("fail", "config.resolves", f"{HOME}/config.toml: {WRONG}")]
    assert found[0].fix == "assernctl config validate"


def test_undefined_variables_alone_fail_it_and_point_at_env_unresolved() -> None:
    found = config_resolves(facts(config=None, config_error=broken(UNDEFINED_TOKEN, UNDEFINED_TWO)))
    assert found[0].status is Status.FAIL
    assert found[0].summary == (
        f"{HOME}/config.toml: does not resolve: 2 undefined variable reference(s) (see env.unresolved)"
    )


def test_an_unknown_project_has_no_file_to_name() -> None:
    found = config_resolves(facts(config=None, config_error=broken("unknown project 'x'", file=None)))
    assert found[0].summary == "unknown project 'x'"


def test_each_undefined_variable_fails_with_the_line_that_defines_it() -> None:
    found = env_unresolved(facts(config=None, config_error=broken(WRONG, UNDEFINED_TOKEN, UNDEFINED_TWO)))
    assert [(f.status, f.summary, f.fix) for f in found] == [
        (Status.FAIL, f"{UNDEFINED_TOKEN} in {HOME}/config.toml", f"echo 'TOKEN=VALUE' >> {HOME}/.env"),
        (
            Status.FAIL,
            f"{UNDEFINED_TWO} in {HOME}/config.toml",
            f"printf '%s\\n' 'A=VALUE' 'B=VALUE' >> {HOME}/.env",
        ),
    ]
    only_jira = env_unresolved(
        facts(config=None, config_error=broken(UNDEFINED_TOKEN, UNDEFINED_TWO), server="jira")
    )
    assert [f.summary for f in only_jira] == [f"{UNDEFINED_TWO} in {HOME}/config.toml"]


def test_every_variable_is_defined_when_the_configuration_resolves() -> None:
    assert lines(env_unresolved(facts())) == [
        ("ok", "env.unresolved", "every ${VAR} of the configuration is defined")
    ]
    assert env_unresolved(facts(config=None, config_error=broken(WRONG))) == []


def test_a_real_resolution_error_is_told_from_the_others(world: World) -> None:
    world.global_config(
        """
        [servers.github]
        command = "npx"
        env = { TOKEN = "${GITHUB_TOKEN}" }
        """
    )
    with pytest.raises(ConfigError) as caught:
        world.resolve()
    assert [undefined(problem) for problem in caught.value.problems] == [True]
    found = env_unresolved(facts(config=None, config_error=caught.value, assern_home=world.assern_home))
    assert found[0].fix == f"echo 'GITHUB_TOKEN=VALUE' >> {world.assern_home}/.env"
    assert "@ servers.github.env.TOKEN" in found[0].summary


def test_no_configuration_found_fails_with_where_it_looked_and_the_init_command() -> None:
    empty = config(
        files=(), potential_files=(HOME / ".env", HOME / "config.toml", Path("/w/.assern/config.toml"))
    )
    found = config_no_servers(facts(config=empty))
    assert found == [
        Finding(
            "config.no_servers",
            Status.FAIL,
            f"no configuration found (looked for {HOME}/config.toml, /w/.assern/config.toml): "
            "`assernctl config init` writes a starter with one server",
            "assernctl config init",
        )
    ]


def test_a_configuration_without_servers_fails_with_the_file_to_edit() -> None:
    found = config_no_servers(facts(config=config(files=(HOME / ".env", HOME / "config.toml"))))
    assert found[0].status is Status.FAIL
    assert found[0].summary.startswith(f"{HOME}/config.toml yields no server")
    assert found[0].fix == f"${{EDITOR:-vi}} {HOME}/config.toml"


def test_servers_are_listed_when_there_are_some() -> None:
    assert lines(config_no_servers(facts(config=config("a", "b")))) == [
        ("ok", "config.no_servers", "servers: a, b")
    ]
    assert config_no_servers(facts(config=None, config_error=broken(WRONG))) == []


def launcher(**fields: object) -> Launcher:
    base: dict[str, object] = {
        "server": "github",
        "command": "npx",
        "searched": "/usr/bin:/bin",
        "origin": "this shell's PATH",
        "found": "/usr/bin/npx",
    }
    return Launcher(**{**base, **fields})  # type: ignore[arg-type]  # the test's own mix of fields


def test_every_command_found_is_one_ok_line() -> None:
    found = server_launcher(
        facts(launchers=(launcher(), launcher(server="t", command="uvx", found="/u/uvx")))
    )
    assert lines(found) == [
        ("ok", "server.launcher", "every command is found: github (/usr/bin/npx), t (/u/uvx)")
    ]
    assert lines(server_launcher(facts(launchers=()))) == [
        ("ok", "server.launcher", "no server starts a command")
    ]


def test_a_command_the_shell_finds_elsewhere_gets_its_full_path_as_the_fix() -> None:
    found = server_launcher(
        facts(
            launchers=(
                launcher(
                    found=None,
                    origin="the PATH of the running instance (pid 7)",
                    elsewhere="/home/me/.nvm/bin/npx",
                ),
            )
        )
    )
    assert found == [
        Finding(
            "server.launcher",
            Status.FAIL,
            "server 'github': npx is not on the PATH of the running instance (pid 7): /usr/bin:/bin; "
            "this shell finds it at /home/me/.nvm/bin/npx",
            'command = "/home/me/.nvm/bin/npx" in [servers.github]',
        )
    ]


def test_a_missing_launcher_gets_how_to_install_it() -> None:
    npx = server_launcher(facts(launchers=(launcher(found=None, searched=""),)))
    assert npx[0].summary == "server 'github': npx is not on this shell's PATH: (empty)"
    assert npx[0].fix == "install Node.js, which brings npx: https://nodejs.org/en/download"
    uvx = server_launcher(facts(launchers=(launcher(command="uvx", found=None),)))
    assert uvx[0].fix == "python3 -m pip install --user uv"
    other = server_launcher(facts(launchers=(launcher(command="mytool", found=None),)))
    assert (
        other[0].fix
        == 'install mytool, or give its full path: command = "/path/to/mytool" in [servers.github]'
    )


def test_a_command_given_by_path_that_is_not_there_fails() -> None:
    found = server_launcher(facts(launchers=(launcher(command="/opt/x/server", searched=None, found=None),)))
    assert lines(found) == [
        ("fail", "server.launcher", "server 'github': /opt/x/server does not exist or is not executable")
    ]
    assert found[0].fix == "ls -l /opt/x/server"


def test_a_script_whose_interpreter_is_missing_fails_with_the_interpreter_to_install() -> None:
    found = server_launcher(facts(launchers=(launcher(interpreter="node", interpreter_found=None),)))
    assert lines(found) == [
        (
            "fail",
            "server.launcher",
            "server 'github': npx (/usr/bin/npx) runs node, which is not on this shell's PATH",
        )
    ]
    assert found[0].fix == "install Node.js: https://nodejs.org/en/download"
    fine = server_launcher(
        facts(launchers=(launcher(interpreter="node", interpreter_found="/usr/bin/node"),))
    )
    assert fine[0].status is Status.OK


def test_without_a_configuration_no_launcher_is_judged() -> None:
    assert server_launcher(facts(config=None, config_error=broken(WRONG))) == []
