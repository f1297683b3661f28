"""`assernctl clients`, `import`, `wire`, `restore`: the real commands, then the client's
own entry started as the client would start it, serving the imported server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trio
from content import text_in
from harness import TESTING_SERVER, AssernEnv
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_config_commands import assernctl_command, with_python_path

pytestmark = pytest.mark.e2e

SECRET = "ghp_e2eliteralsecret0123456789abcdefXYZ"


def clients(env: AssernEnv, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [assernctl_command(), "clients", *args],
        env=with_python_path(env.env),
        cwd=env.work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert SECRET not in done.stdout + done.stderr
    return done


async def test_a_claude_code_server_is_imported_wired_served_and_restored(assern_env: AssernEnv) -> None:
    claude = assern_env.home / ".claude.json"
    original = json.dumps(
        {
            "numStartups": 1,
            "mcpServers": {
                "github": {
                    "type": "stdio",
                    "command": sys.executable,
                    "args": [str(TESTING_SERVER), "--name", "github"],
                    "env": {"GITHUB_TOKEN": SECRET},
                }
            },
        },
        indent=2,
    ).encode()
    claude.write_bytes(original)

    listed = clients(assern_env, "--json")
    assert listed.returncode == 0, listed.stderr
    (found,) = json.loads(listed.stdout)["clients"]
    assert (found["name"], found["reaches_assern"]) == ("claude-code", False)
    assert [(s["name"], s["reach"]) for s in found["servers"]] == [("github", "bypass")]

    imported = clients(assern_env, "import", "claude-code")
    assert imported.returncode == 0, imported.stderr
    assert "secrets moved to .env: GITHUB_TOKEN" in imported.stdout
    wired = clients(assern_env, "wire", "claude-code")
    assert wired.returncode == 0, wired.stderr
    entry = json.loads(claude.read_text())["mcpServers"]
    assert list(entry) == ["assern"]
    assert clients(assern_env, "wire", "claude-code").stdout.startswith("claude-code: nothing to change")

    # Start the entry as Claude Code would: its command, args and env, in the project folder.
    params = StdioServerParameters(
        command=entry["assern"]["command"],
        args=entry["assern"]["args"],
        env={**assern_env.env, **entry["assern"].get("env", {})},
        cwd=str(assern_env.work),
    )
    with trio.fail_after(30):
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("github_get_env", {"name": "GITHUB_TOKEN"})
    assert not result.is_error
    assert text_in(result.content[0]) == SECRET

    restored = clients(assern_env, "restore", "claude-code")
    assert restored.returncode == 0, restored.stderr
    assert claude.read_bytes() == original
    assert "already as backed up" in clients(assern_env, "restore", "claude-code").stdout
    assert claude.read_bytes() == original
