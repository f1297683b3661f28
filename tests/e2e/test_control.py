"""The control socket and `assernctl`, end to end against a running instance."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import TESTING_SERVER, AssernEnv, assern_command, server_table
from instances import (
    Session,
    backend_pids,
    ctl,
    ctl_json,
    daemon,
    err,
    out,
    reap,  # noqa: F401 - autouse fixture
    socket_dir,
    text_of,
)
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e

FAST_RESTART = "backoff_initial = 0.05\nbackoff_max = 0.1\n"

#: The documented fields of `assernctl status --json` (docs/operations.md, "assernctl").
INSTANCE_KEYS = {
    "pid",
    "slot",
    "project",
    "version",
    "daemon",
    "fingerprint",
    "sockets",
    "config_files",
    "started_at",
    "uptime_s",
    "reload_error",
    "trust",
    "clients",
    "recent_calls",
    "backends",
}
BACKEND_KEYS = {
    "name",
    "invalid_schemas",
    "state",
    "state_since",
    "transport",
    "pid",
    "uptime_s",
    "restarts",
    "next_restart_in_s",
    "last_exit",
    "last_error",
    "tools",
    "resources",
    "prompts",
    "in_flight",
    "calls_total",
    "idle_since",
    "dormant_since",
    "latency_ms",
    "stderr_tail",
}


def backend(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in doc["backends"] if b["name"] == name)


async def test_status_json_while_backends_run_restart_and_fail(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    assern_env.per_config()  # the status of one configuration's own instance
    config = write_config(
        server_table("alpha") + "max_restarts = 1\n" + FAST_RESTART + server_table("beta", "--tools", "echo")
    )
    at = ("--config", str(config))

    async def status() -> dict[str, Any]:
        doc: dict[str, Any] = await ctl_json(assern_env, "status", *at)
        return doc

    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            client = await nursery.start(session.run)
            pid = int(text_of(await client.call_tool("alpha_get_pid", {})))
            await client.call_tool("alpha_echo", {"text": "x"})

            doc = await status()
            assert set(doc) == INSTANCE_KEYS
            assert doc["project"] is None
            assert doc["config_files"] == [str(config)]
            assert doc["daemon"] is False
            assert doc["reload_error"] is None
            assert doc["uptime_s"] >= 0
            assert [c["kind"] for c in doc["clients"]] == ["stdio"]
            assert doc["sockets"]["mcp"] == str(socket_dir(assern_env) / "assern.sock")
            assert [b["name"] for b in doc["backends"]] == ["alpha", "beta"]
            alpha = backend(doc, "alpha")
            assert set(alpha) == BACKEND_KEYS
            assert alpha["state"] == "ready"
            assert alpha["pid"] == pid
            assert alpha["transport"] == "stdio"
            assert alpha["tools"] >= 10
            assert alpha["resources"] == 2
            assert alpha["prompts"] == 2
            assert alpha["restarts"] == 0
            assert alpha["calls_total"] >= 2
            assert alpha["latency_ms"]["samples"] == 2
            assert alpha["latency_ms"]["median"] > 0
            assert alpha["uptime_s"] >= 0
            assert backend(doc, "beta")["tools"] == 1
            calls = [c for c in doc["recent_calls"] if c["server"] == "alpha"]
            assert len(calls) == 2  # the ring of recent calls (the status page shows it)
            assert all(c["outcome"] == "ok" and c["duration_ms"] > 0 for c in calls)

            # A call in flight shows as one.
            gate = tmp_path / "gate"
            opened = trio.Event()

            async def through_the_gate() -> None:
                await client.call_tool("alpha_gate", {"path": str(gate)})
                opened.set()

            nursery.start_soon(through_the_gate)
            doc = await status()
            while backend(doc, "alpha")["in_flight"] != 1:
                doc = await status()
            gate.touch()
            await opened.wait()

            # A crash: restarted, with the exit recorded.
            with pytest.raises(MCPError):
                await client.call_tool("alpha_crash", {"code": 7})
            doc = await status()
            while backend(doc, "alpha")["state"] != "ready" or backend(doc, "alpha")["pid"] == pid:
                doc = await status()
            alpha = backend(doc, "alpha")
            assert alpha["restarts"] == 1
            assert "code 7" in alpha["last_exit"]

            # Past max_restarts: failed, and the other backend is untouched.
            with pytest.raises(MCPError):
                await client.call_tool("alpha_crash", {"code": 9})
            doc = await status()
            while backend(doc, "alpha")["state"] != "failed":
                doc = await status()
            alpha = backend(doc, "alpha")
            assert alpha["pid"] is None
            assert "code 9" in alpha["last_error"]
            assert backend(doc, "beta")["state"] == "ready"
            human = await ctl(assern_env, "status", *at)
            assert human.returncode == 0
            lines = out(human).splitlines()
            assert lines[0].startswith("assern assern: pid ")
            assert any(line.split()[:2] == ["alpha", "failed"] for line in lines)
            session.leave()
    gone = await ctl(assern_env, "status", *at)
    assert gone.returncode == 1
    assert "no assern instance runs" in err(gone)


async def test_list_call_and_server_commands_through_the_instance(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + FAST_RESTART)
    at = ("--config", str(config))
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            client = await nursery.start(session.run)
            pid = int(text_of(await client.call_tool("alpha_get_pid", {})))

            listing = await ctl(assern_env, "list", *at)
            assert listing.returncode == 0, err(listing)
            assert out(listing).startswith("(from running instance)")
            assert any(line.startswith("alpha_echo ") for line in out(listing).splitlines())
            as_json = await ctl_json(assern_env, "list", *at)
            assert as_json["source"] == "running-instance"
            assert "alpha_echo" in {t["name"] for t in as_json["tools"]}

            found = await ctl(assern_env, "search", *at, "add", "two", "numbers")
            assert found.returncode == 0, err(found)
            assert out(found).splitlines()[1].startswith("- alpha_add (alpha): ")
            found_json = await ctl_json(assern_env, "search", *at, "echo", "--limit", "2")
            assert found_json["tools"][0]["name"] == "alpha_echo"
            assert len(found_json["tools"]) <= 2
            assert found_json["total"] == len(as_json["tools"])
            bad = await ctl(assern_env, "search", *at, "echo", "--server", "nope")
            assert bad.returncode == 1
            assert "There is no server 'nope'. Servers: alpha." in err(bad)

            called = await ctl(assern_env, "call", *at, "alpha_echo", '{"text": "via ctl"}')
            assert called.returncode == 0, err(called)
            assert json.loads(out(called))["content"][0]["text"] == "via ctl"
            by_server = await ctl(assern_env, "call", *at, "alpha", "echo", '{"text": "server form"}')
            assert json.loads(out(by_server))["content"][0]["text"] == "server form"
            no_tool = await ctl(assern_env, "call", *at, "alpha", "nope")
            assert no_tool.returncode == 1
            assert "has no tool 'nope'" in err(no_tool)

            restarted = await ctl_json(assern_env, "restart", *at, "alpha")
            assert restarted == {
                "server": "alpha",
                "action": "restart",
                "message": "restarted alpha",
                "state": "ready",
            }
            assert int(text_of(await client.call_tool("alpha_get_pid", {}))) != pid

            stopped = await ctl(assern_env, "stop", *at, "alpha")
            assert out(stopped).strip() == "stopped alpha (now stopped)"
            with pytest.raises(MCPError) as refused:
                await client.call_tool("alpha_echo", {"text": "x"})
            assert "stopped" in refused.value.message
            started = await ctl(assern_env, "start", *at, "alpha")
            assert started.returncode == 0, err(started)
            assert text_of(await client.call_tool("alpha_echo", {"text": "back"})) == "back"

            unknown = await ctl(assern_env, "restart", *at, "nope")
            assert unknown.returncode == 1
            assert "unknown server 'nope'" in err(unknown)
            session.leave()


async def test_reload_and_shutdown(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> None:
    good = server_table("alpha", "--tools", "echo")
    config = write_config(good)
    at = ("--config", str(config))
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            client = await nursery.start(session.run)
            await client.call_tool("alpha_echo", {"text": "x"})
            pid = (await ctl_json(assern_env, "status", *at))["pid"]

            reloaded = await ctl(assern_env, "reload", *at)
            assert reloaded.returncode == 0, err(reloaded)
            assert out(reloaded).strip() == "reloaded: 1 server(s) (alpha)"

            # A broken file: the reload fails, the running configuration stays, status says why.
            # (assernctl still finds the instance: same project, same config file.)
            config.write_text(good + 'max_restarts = "five"\n')
            broken = await ctl(assern_env, "reload", *at)
            assert broken.returncode == 1
            assert "expected an integer" in err(broken)
            assert "servers.alpha.max_restarts" in err(broken)
            doc = await ctl_json(assern_env, "status", *at)
            assert "servers.alpha.max_restarts" in doc["reload_error"]
            assert text_of(await client.call_tool("alpha_echo", {"text": "still"})) == "still"

            config.write_text(good)
            fixed = await ctl(assern_env, "reload", *at)
            assert fixed.returncode == 0, err(fixed)
            assert (await ctl_json(assern_env, "status", *at))["reload_error"] is None

            stopped = await ctl(assern_env, "shutdown", *at)
            assert stopped.returncode == 0, err(stopped)
            assert out(stopped).strip() == f"assern (pid {pid}) stopped"
            assert not (socket_dir(assern_env) / "assern.sock").exists()
            session.leave()
    after = await ctl(assern_env, "status", *at)
    assert after.returncode == 1


async def test_daemon_serves_proxies_and_answers_malformed_lines_with_errors(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    assern_env.per_config()  # `assern daemon --config`'s proxies
    config = write_config(server_table("alpha", "--tools", "echo,get_pid"))
    at = ("--config", str(config))
    exchanges = [
        (b"not json", "parse_error"),
        (b"[1, 2]", "invalid_request"),
        (b'{"command": "status"}', "invalid_request"),
        (b'{"v": 2, "command": "status"}', "unsupported_version"),
        (b'{"v": 1}', "invalid_request"),
        (b'{"v": 1, "command": "dance", "id": 7}', "unknown_command"),
        (b'{"v": 1, "command": "call"}', "invalid_arguments"),
        (b'{"v": 1, "command": "call", "tool": "alpha_echo", "arguments": [1]}', "invalid_arguments"),
        (b'{"v": 1, "command": "call", "tool": "nope"}', "call_failed"),
        (b'{"v": 1, "command": "restart"}', "invalid_arguments"),
        (b'{"v": 1, "command": "restart", "server": "nope"}', "unknown_server"),
    ]
    with trio.fail_after(40):
        async with daemon(assern_env, *at) as process:
            # An `assern serve` of the same configuration is a proxy to the daemon.
            async with trio.open_nursery() as nursery:
                session = Session(assern_env.serve(config))
                client = await nursery.start(session.run)
                assert text_of(await client.call_tool("alpha_echo", {"text": "hi"})) == "hi"
                session.leave()
            doc = await ctl_json(assern_env, "status", *at)
            assert doc["daemon"] is True
            assert doc["clients"] == []  # the proxy left; the daemon stays

            control = socket_dir(assern_env) / "assern.ctl"
            replies = await trio.to_thread.run_sync(talk, control, [line for line, _ in exchanges])
            for (line, code), reply in zip(exchanges, replies, strict=True):
                assert reply["v"] == 1
                assert reply["ok"] is False, line
                assert reply["error"]["code"] == code, (line, reply)
                assert reply["error"]["message"]
            assert replies[5]["id"] == 7
            assert "status" in replies[5]["error"]["data"]["commands"]
            # The connection and the instance go on.
            (hello,) = await trio.to_thread.run_sync(
                talk, control, [b'{"v": 1, "command": "hello", "id": "h"}']
            )
            assert hello["ok"] is True
            assert hello["id"] == "h"
            assert hello["result"]["protocol"] == 1

            stopped = await ctl(assern_env, "shutdown", *at)
            assert stopped.returncode == 0, err(stopped)
            assert await process.wait() == 0


def talk(path: Path, lines: list[bytes]) -> list[dict[str, Any]]:
    """Send lines on one control connection; one reply line each."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        reader = sock.makefile("rb")
        replies = []
        for line in lines:
            sock.sendall(line + b"\n")
            replies.append(json.loads(reader.readline()))
        return replies


async def test_without_an_instance_call_and_list_start_the_backends_directly(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo"))
    at = ("--config", str(config))
    with trio.fail_after(40):
        refused = await ctl(assern_env, "call", *at, "--no-direct", "alpha_echo", '{"text": "x"}')
        assert refused.returncode == 1
        assert "no assern instance runs" in err(refused)

        direct = await ctl(assern_env, "call", *at, "alpha_echo", '{"text": "direct"}')
        assert direct.returncode == 0, err(direct)
        assert json.loads(out(direct))["content"][0]["text"] == "direct"

        # SERVER may be a literal command line (cllm-mcp's call-tool form).
        command = f"{sys.executable} {TESTING_SERVER} --name lit --tools echo"
        literal = await ctl(assern_env, "call", *at, command, "echo", '{"text": "literal"}')
        assert literal.returncode == 0, err(literal)
        assert json.loads(out(literal))["content"][0]["text"] == "literal"

        fresh = await ctl_json(assern_env, "list", *at)
        assert fresh["source"] == "fresh"
        assert [t["name"] for t in fresh["tools"]] == ["alpha_echo"]
        assert (await ctl(assern_env, "status", *at)).returncode == 1


async def test_direct_mode_finds_a_cllm_mcp_config_in_the_working_directory(assern_env: AssernEnv) -> None:
    # No --config and no global assern config: ./mcp-config.json is used, as cllm-mcp does.
    entry = {"command": sys.executable, "args": [str(TESTING_SERVER), "--name", "cl", "--tools", "echo"]}
    (assern_env.work / "mcp-config.json").write_text(json.dumps({"mcpServers": {"cl": entry}}))
    assern_env.trust(assern_env.work)  # the working folder's own file applies once trusted
    with trio.fail_after(40):
        called = await ctl(assern_env, "call", "cl_echo", '{"text": "discovered"}')
    assert called.returncode == 0, err(called)
    assert json.loads(out(called))["content"][0]["text"] == "discovered"


async def test_assern_list_asks_the_running_instance_and_fresh_starts_anew(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo,get_pid"))
    at = ("--config", str(config))

    async def assern_list(*extra: str) -> Any:
        with trio.fail_after(60):
            done = await trio.run_process(
                [assern_command(), "list", *at, *extra],
                env=assern_env.env,
                cwd=str(assern_env.work),
                check=False,
                capture_stdout=True,
                capture_stderr=True,
                stdin=subprocess.DEVNULL,
            )
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config))
            await nursery.start(session.run)
            table = await assern_list()
            assert table.startswith("(from running instance) pid ")
            backends = backend_pids(assern_env)
            assert len(backends) == 1
            assert any(line.startswith("alpha_echo ") for line in table.splitlines())
            as_json = json.loads(await assern_list("--json"))
            assert as_json["source"] == "running-instance"
            assert {t["name"] for t in as_json["tools"]} == {"alpha_echo", "alpha_get_pid"}
            assert backend_pids(assern_env) == backends  # nothing was started for it
            fresh = json.loads(await assern_list("--fresh", "--json"))
            assert fresh["source"] == "fresh"
            assert {t["name"] for t in fresh["tools"]} == {"alpha_echo", "alpha_get_pid"}
            session.leave()
