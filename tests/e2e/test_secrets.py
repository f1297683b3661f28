"""A secret in a backend's env or in an HTTP header is never shown where it does not belong.

Not in the log files, not in `assernctl status --json`, not in `assernctl config show`,
`explain` or `validate` without `--reveal`, and not in an error message, even when the
server it belongs to fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from harness import AssernEnv, server_table
from instances import Session, ctl, out
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e

ENV_SECRET = "zq-env-secret-7c41d9e2b8"
HEADER_SECRET = "zq-header-secret-f00dfeed17"
DOTENV_SECRET = "zq-dotenv-secret-0badc0de33"


async def test_secrets_never_reach_logs_status_config_output_or_errors(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    (assern_env.assern_home / ".env").write_text(f"FROM_DOTENV={DOTENV_SECRET}\n")
    config = write_config(
        server_table("alpha", "--tools", "echo")
        + f'env = {{ API_KEY = "{ENV_SECRET}", OTHER = "${{FROM_DOTENV}}" }}\n'
        # A remote server that cannot be reached: it fails, and its errors are shown.
        + '[servers.remote]\nurl = "http://127.0.0.1:9/mcp"\nmax_restarts = 0\nstartup_timeout = 2\n'
        + f'headers = {{ Authorization = "Bearer {HEADER_SECRET}" }}\n'
    )
    at = ("--config", str(config))
    shown: list[str] = []
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            client = await nursery.start(session.run)
            assert (await client.call_tool("alpha_echo", {"text": "hi"})).is_error is False
            with pytest.raises(MCPError) as refused:  # the server failed: its call is refused
                await client.call_tool("remote_anything", {})
            assert "server 'remote' is unavailable" in str(refused.value)
            shown.append(f"{refused.value} {refused.value.error.model_dump_json()}")
            for command in (
                ("status", "--json"),
                ("status",),
                ("list", "--json"),
                ("call", "remote_x", "{}"),
                ("config", "show", "--json"),
                ("config", "show"),
                ("config", "explain", "alpha"),
                ("config", "explain", "alpha", "--json"),
                ("config", "explain", "remote", "--json"),
                ("config", "explain", "alpha", "--reveal"),  # not a terminal: still hidden
                ("config", "validate", "--json"),
                ("logs", "-n", "-1", "--json"),
            ):
                done = await ctl(assern_env, *command, *at)
                shown.append(out(done) + done.stderr.decode())
            status = json.loads(shown[1])
            assert {b["name"]: b["state"] for b in status["backends"]} == {
                "alpha": "ready",
                "remote": "failed",
            }
            session.leave()
    logs = [path.read_text() for path in (assern_env.assern_home / "logs").glob("assern.log*")]
    assert logs
    for text in (*shown, *logs):
        for secret in (ENV_SECRET, HEADER_SECRET, DOTENV_SECRET):
            assert secret not in text
