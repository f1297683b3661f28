"""The env vectors of issue 3, end to end: the value the backend process really received.

Each test writes a fake user world (HOME, ASSERN_HOME, a project folder), starts the real
`assern serve` in a folder of it without `--config`, and asks the test backend for its
own environment with its `get_env` tool.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from content import text_in
from harness import AssernEnv, assern_command, server_table
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.e2e

UNSET = "<unset>"


def serve_in(env: AssernEnv, cwd: Path) -> StdioServerParameters:
    """`assern serve` with the global config of ASSERN_HOME, started in `cwd`."""
    return StdioServerParameters(command=assern_command(), args=["serve"], env=env.env, cwd=str(cwd))


async def env_of(env: AssernEnv, cwd: Path, server: str, *names: str) -> dict[str, str]:
    """The values of `names` in the environment of backend `server`'s process."""
    prefix = server.replace("-", "_")
    with trio.fail_after(20):
        async with Client(serve_in(env, cwd), mode="legacy") as client:
            values: dict[str, str] = {}
            for name in names:
                result = await client.call_tool(f"{prefix}_get_env", {"name": name})
                assert not result.is_error, result
                values[name] = text_in(result.content[0])
            return values


def project_folder(env: AssernEnv, path: str) -> Path:
    folder = env.home / path
    folder.mkdir(parents=True)
    return folder


def merge_vector(mode: str) -> str:
    """The design's vector: server env TOKEN=global, OTHER=value; project env TOKEN=project."""
    return (
        server_table("github")
        + f'merge_mode = "{mode}"\n'
        + 'env = { TOKEN = "global", OTHER = "value" }\n\n'
        + '[projects.work]\ndirectories = ["~/work/**"]\nenv = { TOKEN = "project" }\n'
    )


async def test_overlay_vector(assern_env: AssernEnv) -> None:
    """overlay: the project's TOKEN wins, the server's OTHER stays."""
    (assern_env.assern_home / "config.toml").write_text(merge_vector("overlay"))
    repo = project_folder(assern_env, "work/repo")
    got = await env_of(assern_env, repo, "github", "TOKEN", "OTHER", "PATH", "HOME")
    assert got["TOKEN"] == "project"
    assert got["OTHER"] == "value"
    assert got["PATH"] == assern_env.env["PATH"]
    assert got["HOME"] == str(assern_env.home)


async def test_replace_vector(assern_env: AssernEnv) -> None:
    """replace: only the project's TOKEN; the server's OTHER is gone; PATH and HOME stay."""
    (assern_env.assern_home / "config.toml").write_text(merge_vector("replace"))
    repo = project_folder(assern_env, "work/repo")
    got = await env_of(assern_env, repo, "github", "TOKEN", "OTHER", "PATH", "HOME")
    assert got["TOKEN"] == "project"
    assert got["OTHER"] == UNSET
    assert got["PATH"] == assern_env.env["PATH"]
    assert got["HOME"] == str(assern_env.home)


async def test_github_token_vector_local_env_wins(assern_env: AssernEnv) -> None:
    """GITHUB_TOKEN is ${DEFAULT_TOKEN} globally and ${WORK_TOKEN} in project `work`; the
    project's `.assern/.env` sets it to repo-specific-token: that is what the process gets."""
    (assern_env.assern_home / "config.toml").write_text(
        server_table("github")
        + 'env = { GITHUB_TOKEN = "${DEFAULT_TOKEN}" }\n\n'
        + '[projects.work]\ndirectories = ["~/work/**"]\nenv = { GITHUB_TOKEN = "${WORK_TOKEN}" }\n'
    )
    (assern_env.assern_home / ".env").write_text("DEFAULT_TOKEN=default-token\nWORK_TOKEN=work-token\n")
    repo = project_folder(assern_env, "work/repo")
    (repo / ".assern").mkdir()
    (repo / ".assern" / ".env").write_text("GITHUB_TOKEN=repo-specific-token\n")
    assern_env.trust(repo)
    src = project_folder(assern_env, "work/repo/src")  # anywhere inside the project

    got = await env_of(assern_env, src, "github", "GITHUB_TOKEN", "PATH", "HOME")
    assert got["GITHUB_TOKEN"] == "repo-specific-token"
    assert got["PATH"] == assern_env.env["PATH"]
    assert got["HOME"] == str(assern_env.home)

    # the same config in another project folder without a local .env: the project's token
    other = project_folder(assern_env, "work/other")
    assert (await env_of(assern_env, other, "github", "GITHUB_TOKEN")) == {"GITHUB_TOKEN": "work-token"}
