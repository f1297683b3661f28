"""Trust end to end: a cloned folder's configuration runs nothing until `assernctl trust`.

The real `assern serve`, started in a project folder by the official client, with real
files: a project server that would create a marker file, and a context server whose
`root` is outside the project.

Through the workstation daemon with two projects (one trusted, one not) the same holds
per project: tests/e2e/test_daemon.py,
`test_through_the_daemon_only_the_trusted_projects_own_servers_run`.
"""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from harness import TESTING_SERVER, AssernEnv, server_table
from instances import assernctl_command, ctl, ctl_json, err, events, out, pids_of, serve_in, text_of
from mcp import Client
from mcp.client.stdio import stdio_client
from test_config_reload import Notes

pytestmark = pytest.mark.e2e


def marker_script(marker: Path) -> str:
    return f"touch {marker}; exec {sys.executable} {TESTING_SERVER} --name build --tools echo"


def marker_server(marker: Path) -> str:
    """A project server that creates `marker` when its process starts, then serves MCP."""
    return f'[servers.build]\ncommand = "sh"\nargs = ["-c", {json.dumps(marker_script(marker))}]\n'


async def names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_an_untrusted_server_never_starts_until_trusted_and_a_change_stops_it(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    (assern_env.assern_home / "config.toml").write_text(server_table("glob", "--tools", "echo"))
    repo = assern_env.home / "repo"
    (repo / ".assern").mkdir(parents=True)
    first, second = tmp_path / "first-marker", tmp_path / "second-marker"
    (repo / ".assern" / "config.toml").write_text(marker_server(first))
    stderr = tmp_path / "stderr.txt"
    notes = Notes()

    with trio.fail_after(90), stderr.open("w") as errlog:
        params = serve_in(assern_env, repo)
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", message_handler=notes.on_message
        ) as client:
            # Untrusted: the session works with the global servers; nothing of the folder runs.
            assert await names(client) == {"glob_echo"}
            assert text_of(await client.call_tool("glob_echo", {"text": "hi"})) == "hi"
            assert not first.exists()
            line = (
                f"assern: warning: {repo}: 1 server(s) from .assern/config.toml not started: this "
                f"folder's configuration is not trusted; review and allow with `assernctl trust {repo}`"
            )
            assert line in stderr.read_text().splitlines()
            status = await ctl_json(assern_env, "status", cwd=repo)
            assert [item["folder"] for item in status["trust"]["untrusted"]] == [str(repo)]
            assert f"! {line.removeprefix('assern: warning: ')}" in out(
                await ctl(assern_env, "status", cwd=repo)
            )
            (logged,) = events(assern_env, "project_untrusted")
            assert logged["command"] == f"assernctl trust {repo}"
            assert logged["servers"] == ["build"]

            # A second client in the folder proxies to the same instance, and is told too.
            again = tmp_path / "stderr-2.txt"
            with again.open("w") as errlog2:
                async with Client(stdio_client(params, errlog=errlog2), mode="legacy") as other:
                    assert await names(other) == {"glob_echo"}
            assert line in again.read_text().splitlines()

            # Trusted: the running instance applies the grant at once; the session is told.
            notes.drain()
            granted = await ctl(assern_env, "trust", "--yes", cwd=repo)
            assert granted.returncode == 0, err(granted)
            assert f"trusted: {repo}" in out(granted)
            await notes.until_listed(client, lambda listed: "build_echo" in listed)
            assert first.exists()
            assert text_of(await client.call_tool("build_echo", {"text": "ran"})) == "ran"

            # The command changes (a `git pull`): untrusted again; the new command never runs.
            notes.drain()
            (repo / ".assern" / "config.toml").write_text(marker_server(second))
            await notes.until_listed(client, lambda listed: "build_echo" not in listed)
            status = await ctl_json(assern_env, "status", cwd=repo)
            (changed,) = status["trust"]["untrusted"]
            assert changed["reason"] == "changed"
            before, after = (shlex.join(("-c", marker_script(m))) for m in (first, second))
            assert changed["changes"] == [f"~ server build: args {before} -> {after}"]
            assert await names(client) == {"glob_echo"}
            assert not second.exists()
            shown = await ctl(assern_env, "trust", cwd=repo)  # no terminal, no --yes: shows, grants nothing
            assert shown.returncode == 1
            assert f"{repo} changed since it was trusted" in out(shown)
    assert not second.exists()


async def test_an_untrusted_context_root_outside_the_project_indexes_nothing(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    (assern_env.assern_home / "config.toml").write_text(server_table("glob", "--tools", "echo"))
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "notes.md").write_text("# secret notes\n")
    repo = assern_env.home / "repo"
    (repo / ".assern").mkdir(parents=True)
    (repo / ".assern" / "config.toml").write_text(
        f'[servers.code]\nbuiltin = "context"\nroot = "{outside}"\n'
    )
    with trio.fail_after(60):
        async with Client(serve_in(assern_env, repo), mode="legacy") as client:
            assert await names(client) == {"glob_echo"}
            status = await ctl_json(assern_env, "status", cwd=repo)
            assert [b["name"] for b in status["backends"]] == ["glob"]
            assert status["trust"]["untrusted"][0]["servers"] == ["code"]
            assert pids_of(assern_env, "assern.context") == []
    assert not (assern_env.assern_home / "cache" / "context").exists()


async def test_grants_from_two_terminals_at_once_are_both_kept(assern_env: AssernEnv) -> None:
    folders = []
    for name in ("one", "two", "three"):
        folder = assern_env.home / name
        (folder / ".assern").mkdir(parents=True)
        (folder / ".assern" / "config.toml").write_text(f'[servers.{name}]\ncommand = "{name}"\n')
        folders.append(folder)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for folder in folders:
                nursery.start_soon(
                    functools.partial(
                        trio.run_process,
                        [assernctl_command(), "trust", "--yes", str(folder)],
                        env=assern_env.env,
                        stdin=subprocess.DEVNULL,
                        capture_stdout=True,
                    )
                )
    listed = await ctl_json(assern_env, "trust", "--list")
    assert sorted(row["folder"] for row in listed["folders"]) == sorted(map(str, folders))
    assert {row["state"] for row in listed["folders"]} == {"current"}
