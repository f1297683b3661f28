"""The workstation daemon's build identity, against a real daemon: `--version`, the build
in its welcome and status, a client of another build joining, and its runtime file
(written private, verified, removed at exit, named stale when its daemon is gone)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, assern_command, server_table
from instances import ctl, ctl_json, events, out, reap, serve_in, socket_dir, text_of, wait_until, workstation
from mcp import Client

from assern.app.control_client import request
from assern.app.daemon.hello import PROTOCOL, hello_line

pytestmark = pytest.mark.e2e
__all__ = ["reap"]  # the fixture: kills what a failing test left running

OTHER_BUILD = "0.0.1+000000000000"


def first_line(path: Path, line: bytes) -> Any:
    """Send `line` on the daemon's MCP socket; its one-line answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(line)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return json.loads(answer)


async def version_of(env: AssernEnv, *command: str) -> str:
    done = await trio.run_process(
        list(command), env=env.env, cwd=str(env.work), capture_stdout=True, stdin=subprocess.DEVNULL
    )
    return done.stdout.decode().strip()


async def test_the_daemon_says_its_build_and_its_runtime_file_stands_for_it(assern_env: AssernEnv) -> None:
    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    said = await version_of(assern_env, assern_command(), "--version")
    match = re.fullmatch(r"assern (\S+) \(build (\S+\+[0-9a-f]{12})\)", said)
    assert match is not None, said
    build = match[2]
    assert match[2].startswith(match[1] + "+")
    assernctl = await ctl(assern_env, "--version")
    assert out(assernctl).strip() == f"assernctl {match[1]} (build {build})"

    runtime = socket_dir(assern_env) / "daemon.json"
    with trio.fail_after(90):
        async with workstation(assern_env) as process:
            await wait_until(runtime.exists)
            assert runtime.stat().st_mode & 0o777 == 0o600
            record = json.loads(runtime.read_text())
            assert (record["pid"], record["build"], record["protocol"]) == (process.pid, build, PROTOCOL)
            control = socket_dir(assern_env) / "daemon.ctl"
            hello = await trio.to_thread.run_sync(lambda: request(control, "hello", timeout=10.0))
            assert (hello["build"], hello["cookie"], hello["socket_protocol"]) == (
                build,
                record["cookie"],
                PROTOCOL,
            )

            doc = await ctl_json(assern_env, "status")
            workstation_doc = doc["workstation"]
            assert (workstation_doc["daemon"]["build"], workstation_doc["daemon"]["protocol"]) == (
                build,
                PROTOCOL,
            )
            assert workstation_doc["this_build"] == build
            assert workstation_doc["runtime_file"] == {
                "path": str(runtime),
                "verified": True,
                "pid": process.pid,
                "build": build,
            }
            readable = out(await ctl(assern_env, "status"))
            assert f"  build    {build} (protocol {PROTOCOL})" in readable
            assert f"  runtime  {runtime}" in readable
            assert "this install is build" not in readable

            # A client of another build that speaks this protocol joins; the log says so.
            hello = hello_line(
                cwd=str(assern_env.work),
                environ=assern_env.env,
                config=None,
                project=None,
                profile=None,
                build=OTHER_BUILD,
            )
            welcome = await trio.to_thread.run_sync(first_line, socket_dir(assern_env) / "daemon.sock", hello)
            assert welcome["method"] == "assern/welcome"
            assert welcome["params"]["build"] == build
            assert welcome["params"]["protocol"] == PROTOCOL
            await wait_until(
                lambda: events(
                    assern_env, "daemon_build_differs", daemon_build=build, client_build=OTHER_BUILD
                )
            )
            # A client of this install, through its own `assern serve`, is the same build.
            async with Client(serve_in(assern_env, assern_env.work), mode="legacy") as client:
                assert text_of(await client.call_tool("alpha_echo", {"text": "same"})) == "same"
            assert len(events(assern_env, "daemon_build_differs")) == 1
    assert not runtime.exists()  # removed by the daemon that wrote it

    # What a daemon killed with SIGKILL leaves: its file, naming a pid that is gone.
    runtime.write_text(json.dumps(record))
    runtime.chmod(0o600)
    status = await ctl(assern_env, "status")
    assert status.returncode == 1
    assert f"assernctl: no daemon runs: {runtime} is stale: pid {record['pid']} no longer runs" in (
        status.stderr.decode()
    )
    doctor = json.loads(out(await ctl(assern_env, "doctor", "--json")))
    found = [f for f in doctor["checks"] if f["id"] == "daemon.runtime"]
    assert [(f["status"], f["fix"]) for f in found] == [("warn", f"rm -f {runtime}")]
    assert runtime.read_text() == json.dumps(record)  # doctor changes nothing
