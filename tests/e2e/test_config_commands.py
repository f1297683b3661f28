"""`assernctl config show/explain/validate/init/import`: the real command in a fake user world."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from harness import AssernEnv

pytestmark = pytest.mark.e2e

#: Secret values written into the fake world; no command output may contain them.
DEFAULT_TOKEN = "default-secret-token-111"
WORK_TOKEN = "work-secret-token-222"
REPO_TOKEN = "repo-specific-token"
LITERAL = "literal-secret-value-333"
SECRETS = (DEFAULT_TOKEN, WORK_TOKEN, REPO_TOKEN, LITERAL)

GLOBAL_CONFIG = f"""
[servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = {{ GITHUB_TOKEN = "${{DEFAULT_TOKEN}}", OTHER = "{LITERAL}" }}

[servers.docs]
url = "http://127.0.0.1:9/mcp"
headers = {{ Authorization = "Bearer ${{WORK_TOKEN}}" }}

[projects.work]
directories = ["~/work/**"]
env = {{ GITHUB_TOKEN = "${{WORK_TOKEN}}" }}
"""


def assernctl_command() -> str:
    found = shutil.which("assernctl", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("the `assernctl` console script is not installed beside this Python")
    return found


def with_python_path(env: dict[str, str]) -> dict[str, str]:
    """The command runs on the tests' Python packages (PyYAML may be on PYTHONPATH only)."""
    extra = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return {**env, **extra}


def ctl(env: AssernEnv, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [assernctl_command(), "config", *args],
        env=with_python_path(env.env),
        cwd=cwd or env.work,
        capture_output=True,
        text=True,
        timeout=60,
    )


def no_secret_in(*outputs: str) -> None:
    for output in outputs:
        for secret in SECRETS:
            assert secret not in output


@pytest.fixture
def repo(assern_env: AssernEnv) -> Path:
    """The world of the GITHUB_TOKEN vector; returns the project folder to work in."""
    (assern_env.assern_home / "config.toml").write_text(GLOBAL_CONFIG)
    (assern_env.assern_home / ".env").write_text(f"DEFAULT_TOKEN={DEFAULT_TOKEN}\nWORK_TOKEN={WORK_TOKEN}\n")
    folder = assern_env.home / "work" / "repo"
    (folder / ".assern").mkdir(parents=True)
    (folder / ".assern" / ".env").write_text(f"GITHUB_TOKEN={REPO_TOKEN}\n")
    assern_env.trust(folder)
    return folder


def test_show_prints_the_resolved_config_redacted(assern_env: AssernEnv, repo: Path) -> None:
    human = ctl(assern_env, "show", cwd=repo)
    assert human.returncode == 0, human.stderr
    assert "project: work" in human.stdout
    assert "github  [stdio]" in human.stdout
    assert "env GITHUB_TOKEN = re…(redacted)  (local-env: " in human.stdout

    result = ctl(assern_env, "show", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"project", "files", "settings", "servers", "warnings", "trust"}
    assert document["trust"]["trusted"] == [str(repo)]
    assert document["project"] == "work"
    assert document["files"] == [
        str(assern_env.assern_home / ".env"),
        str(assern_env.assern_home / "config.toml"),
        str(repo / ".assern" / ".env"),
    ]
    github = document["servers"]["github"]
    assert github["command"] == "npx"
    assert github["args"] == ["-y", "@modelcontextprotocol/server-github"]
    assert github["env"]["GITHUB_TOKEN"] == {
        "value": "re…(redacted)",
        "layer": "local-env",
        "file": str(repo / ".assern" / ".env"),
    }
    assert "PATH" not in github["env"]  # show lists the configured keys only
    assert document["servers"]["docs"]["headers"] == {"Authorization": "Be…(redacted)"}
    no_secret_in(human.stdout, human.stderr, result.stdout, result.stderr)

    # outside the project no project applies, unless --project names one
    assert json.loads(ctl(assern_env, "show", "--json").stdout)["project"] is None
    named = json.loads(ctl(assern_env, "show", "--json", "--project", "work").stdout)
    assert named["project"] == "work"
    assert named["servers"]["github"]["env"]["GITHUB_TOKEN"]["layer"] == "project"


def test_explain_gives_every_env_key_with_its_layer_and_file(assern_env: AssernEnv, repo: Path) -> None:
    result = ctl(assern_env, "explain", "github", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["server"] == "github"
    assert document["project"] == "work"
    assert document["revealed"] is False
    assert (document["command"], document["args"], document["cwd"]) == (
        "npx",
        ["-y", "@modelcontextprotocol/server-github"],
        None,
    )
    env = document["env"]
    config = str(assern_env.assern_home / "config.toml")
    assert env["GITHUB_TOKEN"] == {
        "value": "re…(redacted)",
        "layer": "local-env",
        "file": str(repo / ".assern/.env"),
    }
    assert env["OTHER"] == {"value": "li…(redacted)", "layer": "global-config", "file": config}
    assert env["DEFAULT_TOKEN"]["layer"] == "global-env"
    assert env["PATH"] == {"value": env["PATH"]["value"], "layer": "system-env", "file": None}
    assert env["PATH"]["value"].endswith("…(redacted)")
    assert env["HOME"]["layer"] == "system-env"

    human = ctl(assern_env, "explain", "github", cwd=repo)
    assert human.returncode == 0
    assert "GITHUB_TOKEN" in human.stdout
    assert "local-env" in human.stdout
    assert "system-env" in human.stdout
    assert "calls (per view):" in human.stdout
    assert "settings: exposure all; validate warn" in human.stdout
    assert document["calls"]["settings"]["validate"] == "warn"

    # --reveal into a pipe is refused: the values stay redacted
    piped = ctl(assern_env, "explain", "github", "--reveal", "--json", cwd=repo)
    assert piped.returncode == 0
    assert "--reveal is ignored" in piped.stderr
    assert json.loads(piped.stdout)["revealed"] is False
    no_secret_in(result.stdout, result.stderr, human.stdout, piped.stdout, piped.stderr)


def test_explain_reveal_in_a_terminal_shows_the_values(assern_env: AssernEnv, repo: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [assernctl_command(), "config", "explain", "github", "--reveal", "--json"],
            env=assern_env.env,
            cwd=repo,
            stdout=terminal,
            stderr=subprocess.DEVNULL,
        )
        os.close(terminal)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 0
    finally:
        os.close(controller)
    document = json.loads(b"".join(chunks).decode().replace("\r\n", "\n"))
    assert document["revealed"] is True
    assert document["env"]["GITHUB_TOKEN"]["value"] == REPO_TOKEN
    assert document["env"]["OTHER"]["value"] == LITERAL


def test_explain_an_unknown_server(assern_env: AssernEnv, repo: Path) -> None:
    result = ctl(assern_env, "explain", "nope", cwd=repo)
    assert result.returncode == 2
    assert "no server 'nope'" in result.stderr
    assert "github, docs" in result.stderr


def test_validate_lists_every_problem_of_every_file(assern_env: AssernEnv, repo: Path) -> None:
    assert ctl(assern_env, "validate", cwd=repo).returncode == 0

    (assern_env.assern_home / "config.toml").write_text(
        GLOBAL_CONFIG.replace('command = "npx"', 'command = "npx"\nmax_restarts = "five"\ntimeot = 3')
    )
    (repo / ".assern" / "config.toml").write_text('[servers.github]\nrestart = "always"\n')
    result = ctl(assern_env, "validate", cwd=repo)
    assert result.returncode == 1
    config, local = assern_env.assern_home / "config.toml", repo / ".assern" / "config.toml"
    assert f"{config}:\n" in result.stdout
    assert "expected an integer, got 'five' @ servers.github.max_restarts" in result.stdout
    assert "unknown key 'timeot' (did you mean 'timeout'?) @ servers.github" in result.stdout
    assert f"{local}:\n" in result.stdout
    assert "got 'always' @ servers.github.restart" in result.stdout
    assert "3 problem(s) in 2 file(s)" in result.stderr

    as_json = json.loads(ctl(assern_env, "validate", "--json", cwd=repo).stdout)
    assert as_json["ok"] is False
    assert {f["file"]: len(f["problems"]) for f in as_json["files"] if not f["ok"]} == {
        str(config): 2,
        str(local): 1,
    }
    no_secret_in(result.stdout, result.stderr)


def test_validate_named_files(assern_env: AssernEnv) -> None:
    good = assern_env.work / "good.toml"
    good.write_text('[servers.a]\ncommand = "a"\nenv = { T = "${HOME}" }\n')
    undefined = assern_env.work / "undefined.toml"
    undefined.write_text('[servers.a]\ncommand = "a"\nenv = { T = "${NOT_DEFINED_ANYWHERE}" }\n')
    dotenv = assern_env.work / "bad.env"
    dotenv.write_text("GOOD=1\nthis is not an assignment\n")
    mcp = assern_env.work / "mcp.json"
    mcp.write_text('{"mcpServers": {"a": {"command": "a"}}}')

    assert ctl(assern_env, "validate", "good.toml", "mcp.json").returncode == 0
    result = ctl(assern_env, "validate", "good.toml", "undefined.toml", "bad.env", "missing.toml")
    assert result.returncode == 1
    assert f"{good}: ok" in result.stdout
    assert "undefined variable 'NOT_DEFINED_ANYWHERE'" in result.stdout
    assert "@ servers.a.env.T" in result.stdout
    assert "expected KEY=VALUE @ line 2" in result.stdout
    assert "file not found" in result.stdout


def test_init_writes_a_starter_config_once(assern_env: AssernEnv) -> None:
    target = assern_env.assern_home / "config.toml"
    first = ctl(assern_env, "init")
    assert first.returncode == 0, first.stderr
    assert target.is_file()
    text = target.read_text()
    assert text.startswith("# ")
    assert "# [servers.github]" in text  # commented examples

    assert ctl(assern_env, "validate").returncode == 0
    shown = json.loads(ctl(assern_env, "show", "--json").stdout)
    assert list(shown["servers"]) == ["time"]

    target.write_text(text + "\n# my edit\n")
    second = ctl(assern_env, "init")
    assert second.returncode == 1
    assert "already exists" in second.stderr
    assert target.read_text().endswith("# my edit\n")


MCP_JSON = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LITERAL": LITERAL},
            "autoApprove": ["search"],
        },
        "docs": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
    }
}


def test_import_mcp_servers_json(assern_env: AssernEnv) -> None:
    source = assern_env.work / "claude.json"
    source.write_text(json.dumps(MCP_JSON))

    printed = ctl(assern_env, "import", "claude.json")
    assert printed.returncode == 0, printed.stderr
    no_secret_in(printed.stdout, printed.stderr)
    shown = tomllib.loads(printed.stdout)
    assert shown["servers"]["github"]["env"] == {
        "GITHUB_TOKEN": "${GITHUB_TOKEN}",
        "LITERAL": "li…(redacted)",
    }
    assert "1 literal env or header value(s) are redacted" in printed.stderr

    written = ctl(assern_env, "import", "claude.json", "--output", "assern.toml")
    assert written.returncode == 0, written.stderr
    target = assern_env.work / "assern.toml"
    assert target.stat().st_mode & 0o777 == 0o600
    document = tomllib.loads(target.read_text())
    assert document == {
        "servers": {
            "github": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LITERAL": LITERAL},
            },
            "docs": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
        }
    }
    # the TOML resolves to the same servers as the JSON it came from
    env = {**assern_env.env, "GITHUB_TOKEN": "t", "DOCS_TOKEN": "d"}
    from_json = _show(assern_env, env, "claude.json")
    from_toml = _show(assern_env, env, "assern.toml")
    for server in from_json["servers"].values():
        server["env"] = {key: entry["value"] for key, entry in server["env"].items()}
    for server in from_toml["servers"].values():
        server["env"] = {key: entry["value"] for key, entry in server["env"].items()}
    assert from_toml["servers"] == from_json["servers"]

    again = ctl(assern_env, "import", "claude.json", "--output", "assern.toml")
    assert again.returncode == 1
    assert "already exists" in again.stderr


def _show(assern_env: AssernEnv, env: dict[str, str], config: str) -> dict[str, Any]:
    result = subprocess.run(
        [assernctl_command(), "config", "show", "--json", "--config", config],
        env=with_python_path(env),
        cwd=assern_env.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_import_the_original_yaml_layout(assern_env: AssernEnv) -> None:
    pytest.importorskip("yaml")
    old = assern_env.home / "old"
    old.mkdir()
    (old / "mcp.json").write_text(json.dumps(MCP_JSON))
    (old / "config.yaml").write_text(
        "projects:\n"
        "  work:\n"
        "    directories: [~/work/*]\n"
        "    env: {GITHUB_TOKEN: '${WORK_GITHUB_TOKEN}'}\n"
        "    servers:\n"
        "      github: {merge_mode: replace, env: {GITHUB_TOKEN: '${WORK_GITHUB_TOKEN}', PORT: 8080}}\n"
        "      docs: {disabled: true}\n"
        "settings: {log_level: info, timeout: 60s}\n"
    )
    result = ctl(assern_env, "import", str(old / "config.yaml"), "--output", "converted.toml")
    assert result.returncode == 0, result.stderr
    assert "note: dropped settings.log_level" in result.stderr
    document = tomllib.loads((assern_env.work / "converted.toml").read_text())
    assert set(document["servers"]) == {"github", "docs"}
    assert document["projects"]["work"]["directories"] == ["~/work/*"]
    assert document["projects"]["work"]["servers"]["github"] == {
        "merge_mode": "replace",
        "env": {"GITHUB_TOKEN": "${WORK_GITHUB_TOKEN}", "PORT": "8080"},
    }
    assert document["projects"]["work"]["servers"]["docs"] == {"disabled": True}
    assert ctl(assern_env, "validate", "converted.toml").returncode == 1  # ${GITHUB_TOKEN} is unset
    env = {**assern_env.env, "GITHUB_TOKEN": "t", "DOCS_TOKEN": "d", "WORK_GITHUB_TOKEN": "w"}
    assert list(_show(assern_env, env, "converted.toml")["servers"]) == ["github", "docs"]


def test_import_refuses_other_files(assern_env: AssernEnv) -> None:
    (assern_env.work / "x.txt").write_text("hello")
    result = ctl(assern_env, "import", "x.txt")
    assert result.returncode == 2
    assert "expected an mcpServers JSON file" in result.stderr


def test_cllm_mcp_discovery_when_there_is_no_assern_config(assern_env: AssernEnv) -> None:
    user = assern_env.home / ".config" / "cllm-mcp" / "config.json"
    user.parent.mkdir(parents=True)
    user.write_text('{"mcpServers": {"from-user": {"command": "u"}}}')
    assert list(json.loads(ctl(assern_env, "show", "--json").stdout)["servers"]) == ["from-user"]

    (assern_env.work / ".mcp-config.json").write_text('{"mcpServers": {"from-hidden": {"command": "h"}}}')
    assern_env.trust(assern_env.work)
    assert list(json.loads(ctl(assern_env, "show", "--json").stdout)["servers"]) == ["from-hidden"]

    (assern_env.work / "mcp-config.json").write_text('{"mcpServers": {"from-cwd": {"command": "c"}}}')
    document = json.loads(ctl(assern_env, "show", "--json").stdout)
    # the working folder's own file: read as `assern serve` reads it, and not used until trusted
    assert document["servers"] == {}
    assert document["trust"]["untrusted"][0]["servers"] == ["from-cwd"]
    assern_env.trust(assern_env.work)
    document = json.loads(ctl(assern_env, "show", "--json").stdout)
    assert list(document["servers"]) == ["from-cwd"]
    assert document["files"] == [str(assern_env.work / "mcp-config.json")]

    # an assern config of the user's own wins over every discovered file
    (assern_env.assern_home / "config.toml").write_text('[servers.mine]\ncommand = "m"\n')
    assert list(json.loads(ctl(assern_env, "show", "--json").stdout)["servers"]) == ["mine"]


def test_validate_lists_undefined_variables_and_type_errors_in_one_run(assern_env: AssernEnv) -> None:
    both = assern_env.work / "both.toml"
    both.write_text('[servers.a]\ncommand = "${NOT_DEFINED_ANYWHERE}"\nmax_restarts = "five"\n')
    result = ctl(assern_env, "validate", "both.toml")
    assert result.returncode == 1
    assert "expected an integer, got 'five' @ servers.a.max_restarts" in result.stdout
    assert "undefined variable 'NOT_DEFINED_ANYWHERE'" in result.stdout
    assert "@ servers.a.command" in result.stdout
    assert "2 problem(s) in 1 file(s)" in result.stderr
