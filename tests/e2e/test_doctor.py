"""`assernctl doctor` end to end: against a running instance with a healthy, a missing, a
crash-looping and an empty backend, and against nothing at all (no configuration, no
instance, no PATH); and zero servers said out loud by `assern serve`, `assern daemon`
and `assernctl status`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from harness import AssernEnv, assern_command, server_table
from instances import (
    ctl,
    ctl_json,
    daemon,
    err,
    events,
    out,
    reap,  # noqa: F401 - autouse fixture
    workstation,
)

pytestmark = pytest.mark.e2e

BACKENDS = (
    server_table("healthy", "--tools", "echo")
    + '[servers.missing]\ncommand = "no-such-launcher-anywhere"\nmax_restarts = 0\n'
    # dies at once, again and again: slower than its restart window lets it run out
    + '[servers.looping]\ncommand = "sh"\nargs = ["-c", "exit 3"]\n'
    + "max_restarts = 1000\nrestart_window = 3600\nbackoff_initial = 0.05\nbackoff_max = 0.2\n"
    + server_table("empty", "--tools", ",")
)


def by_id(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for check in document["checks"]:
        found.setdefault(check["id"], []).append(check)
    return found


async def settled(env: AssernEnv, config: Path) -> dict[str, dict[str, Any]]:
    """The backends once each shows what the test is about (polled: another process)."""
    with trio.fail_after(60):
        while True:
            status = await ctl_json(env, "status", "--config", str(config))
            backends = {b["name"]: b for b in status["backends"]}
            shown = (
                backends["healthy"]["state"] == "ready"
                and backends["empty"]["state"] == "ready"
                and backends["missing"]["state"] == "failed"
                and backends["looping"]["restarts"] >= 3
                and backends["looping"]["state"] in ("restarting", "starting")
            )
            if shown:
                return backends
            await trio.sleep(0.2)


async def test_doctor_against_a_running_instance(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(BACKENDS)
    async with daemon(assern_env, "--config", str(config)):
        await settled(assern_env, config)
        done = await ctl(assern_env, "doctor", "--json", "--config", str(config))
        assert done.returncode == 1, err(done)
        report = json.loads(done.stdout)
        checks = by_id(report)
        statuses = {key: [c["status"] for c in found] for key, found in checks.items()}
        assert statuses["config.resolves"] == ["ok"]
        assert statuses["daemon.answers"] == ["ok"]
        assert statuses["daemon.build"] == ["ok"]
        assert statuses["run.private"] == ["ok"]
        assert statuses["home.private"] == ["ok"]
        assert [c["summary"] for c in checks["server.launcher"]] == [
            "server 'missing': no-such-launcher-anywhere is not on the PATH of the running instance "
            f"(pid {report_pid(checks)}): {assern_env.env['PATH']}"
        ]
        assert [(c["status"], c["summary"].split(":")[0]) for c in checks["backend.failed"]] == [
            ("fail", "server 'missing' failed, out of restarts (0)")
        ]
        assert [c["fix"] for c in checks["backend.failed"]] == [
            f"assernctl logs --server missing -n 50; assernctl restart missing --config {config}"
        ]
        assert [c["status"] for c in checks["backend.crash_loop"]] == ["fail"]
        assert checks["backend.crash_loop"][0]["summary"].startswith("server 'looping' keeps crashing")
        assert [(c["status"], c["summary"]) for c in checks["backend.no_tools"]] == [
            ("warn", "server 'empty' is up and lists no tools (2 resources, 2 prompts)")
        ]
        assert report["summary"]["verdict"] == "fail"
        assert report["summary"]["fail"] == 3

        # The same ids in the readable status and in the log events.
        status = out(await ctl(assern_env, "status", "--config", str(config)))
        assert "  missing: doctor: backend.failed, see `assernctl doctor --server missing`" in status
        assert "  looping: doctor: backend.crash_loop, see `assernctl doctor --server looping`" in status
        assert "  empty: doctor: backend.no_tools, see `assernctl doctor --server empty`" in status
        assert [e.get("doctor") for e in events(assern_env, "backend_failed", server="missing")] == [
            "backend.failed"
        ]
        loops = events(assern_env, "backend_restart_scheduled", server="looping")
        assert {e.get("doctor") for e in loops[3:]} == {"backend.crash_loop"}
        assert events(assern_env, "backend_ready", server="empty")[0]["doctor"] == "backend.no_tools"

        # One server alone: the healthy one passes; an unknown name is a usage error.
        healthy = await ctl(assern_env, "doctor", "--server", "healthy", "--config", str(config))
        assert healthy.returncode == 0, out(healthy)
        assert out(healthy).splitlines()[-1] == "verdict: ok: 0 failure(s), 0 warning(s), 14 ok"
        assert ("ok", "backend.failed", "no backend failed (1 backend(s))") in rows(out(healthy))
        unknown = await ctl(assern_env, "doctor", "--server", "nope", "--config", str(config))
        assert unknown.returncode == 2
        assert "no server 'nope' in this configuration (servers: empty, healthy, looping, missing)" in err(
            unknown
        )


def rows(text: str) -> list[tuple[str, str, str]]:
    """(status, id, finding) of each line of the readable report (fix and verdict lines left out)."""
    found = []
    for line in text.splitlines():
        status, check, summary = line.split(None, 2)
        if status in ("ok", "warn", "fail"):
            found.append((status, check, summary))
    return found


def report_pid(checks: dict[str, list[dict[str, Any]]]) -> int:
    summary = checks["daemon.answers"][0]["summary"]
    return int(summary.split("(pid ")[1].split(")")[0])


async def test_doctor_with_no_configuration_no_instance_and_no_path(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    bare = attrs.evolve(assern_env, env={**assern_env.env, "PATH": ""})
    done = await ctl(bare, "doctor")
    assert done.returncode == 1, err(done)
    found = {check: (status, summary) for status, check, summary in rows(out(done))}
    assert found["config.resolves"] == ("ok", "resolves (no configuration file; no project): 0 server(s)")
    assert found["config.no_servers"][0] == "fail"
    assert found["config.no_servers"][1].startswith(
        f"no configuration found (looked for {assern_env.assern_home}/config.toml, "
    )
    assert "fix: assernctl config init" in out(done)
    assert found["daemon.answers"][1].startswith("no instance runs for this configuration")
    assert out(done).splitlines()[-1] == "verdict: fail: 1 failure(s), 0 warning(s), 9 ok"
    assert err(done) == ""
    assert not (assern_env.assern_home / "run").exists()  # nothing was created

    config = tmp_path / "npx.toml"
    config.write_text(
        '[servers.github]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-github"]\n'
    )
    npx = await ctl(bare, "doctor", "--json", "--config", str(config))
    assert npx.returncode == 1
    launcher = by_id(json.loads(npx.stdout))["server.launcher"]
    assert [(c["status"], c["summary"]) for c in launcher] == [
        ("fail", "server 'github': npx is not on this shell's PATH: (empty)")
    ]
    assert launcher[0]["fix"] == "install Node.js, which brings npx: https://nodejs.org/en/download"

    usage = await ctl(bare, "doctor", "--no-such-flag")
    assert usage.returncode == 2


async def test_zero_servers_is_said_by_serve_daemon_status_and_doctor(assern_env: AssernEnv) -> None:
    looked = f"{assern_env.assern_home}/config.toml, {assern_env.work}/.assern/config.toml"
    # (and then the mcpServers files it would read: cllm-mcp's)
    line_start = f"assern: no server to serve: no configuration found (looked for {looked}"
    async with workstation(assern_env):
        with trio.fail_after(60):
            # a client's `assern serve` (joining the daemon) says it on its stderr
            served = await trio.run_process(
                [assern_command(), "serve"],
                env=assern_env.env,
                cwd=str(assern_env.work),
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
            )
        said = [text for text in err(served).splitlines() if text.startswith(line_start)]
        assert said, err(served)
        assert said[0].endswith("); see `assernctl doctor`")
        assert events(assern_env, "config_no_servers")[0]["doctor"] == "config.no_servers"
        # its view stays a little after its client left: status and doctor see it
        status = out(await ctl(assern_env, "status"))
        assert "  no servers are configured (doctor: config.no_servers): see `assernctl doctor`" in status
        doctor = await ctl(assern_env, "doctor")
        assert doctor.returncode == 1
        found = {check: status for status, check, _ in rows(out(doctor))}
        assert (found["config.no_servers"], found["daemon.answers"], found["backend.failed"]) == (
            "fail",
            "ok",
            "ok",
        )
