"""The commands around the aggregate: broken backends, logs, `assern list`, the demo, the bench."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from content import text_in
from harness import AssernEnv, assern_command, server_table
from mcp import Client

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


async def test_a_broken_backend_does_not_stop_the_others(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(
        server_table("alpha", "--tools", "echo")
        + server_table("broken", "--crash-on-start")
        + "max_restarts = 1\nbackoff_initial = 0.1\n"
        + '[servers.missing]\ncommand = "no-such-command-anywhere"\nmax_restarts = 0\n'
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {"alpha_echo"}
            result = await client.call_tool("alpha_echo", {"text": "healthy"})
            assert text_in(result.content[0]) == "healthy"
            failed: dict[str, dict[str, object]] = {}
            while set(failed) != {"broken", "missing"}:
                await trio.sleep(0.05)
                failed = {
                    str(e["server"]): e for e in assern_env.log_events() if e.get("event") == "backend_failed"
                }
            # The healthy backend still answers after the others failed for good.
            result = await client.call_tool("alpha_echo", {"text": "still"})
            assert text_in(result.content[0]) == "still"
    assert "exited with code 3" in str(failed["broken"]["error"])
    assert "not found" in str(failed["missing"]["error"])


async def test_backend_stderr_becomes_log_events_and_stdout_stays_clean(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("chatty", "--tools", "echo", "--stderr-lines", "3"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.list_tools()
            await client.call_tool("chatty_echo", {"text": "x"})
    events = assern_env.log_events()
    stderr = [e for e in events if e.get("event") == "backend_stderr"]
    assert [e["line"] for e in stderr if str(e["line"]).startswith("stderr line")] == [
        "stderr line 1",
        "stderr line 2",
        "stderr line 3",
    ]
    assert all(e["server"] == "chatty" for e in stderr)
    calls = [e for e in events if e.get("event") == "tool_call_finished"]
    assert calls
    assert calls[0]["server"] == "chatty"
    assert calls[0]["tool"] == "echo"
    assert str(calls[0]["client"]).startswith("socket-")  # a session of the daemon
    assert calls[0]["request_id"] is not None
    assert isinstance(calls[0]["duration_ms"], float)
    assert {"ts", "level", "event", "actor"} <= set(calls[0])


def run_cli(env: AssernEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [assern_command(), *args],
        env=env.env,
        cwd=env.work,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_assern_list_prints_the_catalog(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> None:
    config = write_config(server_table("alpha", "--tools", "echo,add"))
    table = run_cli(assern_env, "list", "--config", str(config))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == "(fresh start: the backends were started for this listing)"  # none runs
    assert lines[1].split() == ["NAME", "SERVER", "DESCRIPTION"]
    assert any(line.startswith("alpha_echo") and " alpha " in line for line in lines)

    as_json = run_cli(assern_env, "list", "--config", str(config), "--json")
    listed = json.loads(as_json.stdout)
    assert listed["source"] == "fresh"
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == {"alpha_echo", "alpha_add"}
    assert tools["alpha_add"]["server"] == "alpha"


def test_a_bad_config_is_an_error_not_a_traceback(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config('[servers.x]\ncommand = "x"\nmax_restarts = "five"\n')
    result = run_cli(assern_env, "serve", "--config", str(config))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "servers.x.max_restarts" in result.stderr
    assert str(config) in result.stderr


def test_demo_aggregates_the_bundled_backends(assern_env: AssernEnv) -> None:
    # `script` gives the demo a terminal on stdin, as a newcomer running it would have.
    result = subprocess.run(
        ["script", "-qec", f"{assern_command()} demo", "/dev/null"],
        env={**assern_env.env, "TERM": "dumb"},
        cwd=assern_env.work,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for name in ("notes_add_note", "calc_add", "time_get_current_time"):
        assert name in out
    assert "-> 42.0" in out
    assert '"timezone": "UTC"' in out


async def test_demo_serves_stdio_when_stdin_is_not_a_terminal(assern_env: AssernEnv) -> None:
    with trio.fail_after(60):
        async with Client(assern_env.params("demo"), mode="legacy") as client:
            result = await client.call_tool("calc_multiply", {"a": 6, "b": 7})
            assert text_in(result.content[0]) == "42.0"


def test_the_proxy_footprint_benchmark_smoke_run_works(tmp_path: Path) -> None:
    out = tmp_path / "proxy.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "bench" / "proxy_footprint.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["spawn_to_initialize"]["hint"]["n"] == 3
    assert report["proxy_rss_mib"]["hint"] > 0
    assert [row["proxies"] for row in report["concurrent"]] == [1, 3]
    assert [row["idle_sessions"] for row in report["call"]] == [0, 3]
    assert "spawn -> initialize answered" in result.stdout


def test_the_benchmark_smoke_run_works(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "bench" / "run.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    [scenario] = report["scenarios"]
    assern = scenario["results"]["assern"]
    assert assern["status"] == "ok", assern
    assert assern["call"]["direct"]["n"] == 10
    assert assern["call"]["through"]["n"] == 10
    assert assern["call"]["ratio_median"] > 0
    assert assern["throughput"]["through"]["calls"] > 0
    assert assern["rss"]["aggregator_peak_mb"] > 0
    assert "failed_calls" in assern["crash"]
    if assern["crash"]["recovered_s"] is not None:  # then the same backend is killed again
        assert assern["later_call"]["answered_ms"] is not None, assern["later_call"]
    assert assern["list_probe"]["k"]["first_byte"]["n"] == 5
    assert assern["list_probe"]["k"]["bytes"] == assern["list_bytes"]
    assert "call overhead, median (us)" in result.stdout
    assert scenario["order"] == ["assern"]
    assert 0 <= assern["quiet_wait_s"] <= 1.5  # at most the smoke plan's 0.5 s and one window


def test_the_crash_trials_run_works(tmp_path: Path) -> None:
    out = tmp_path / "crash.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "ops" / "bench" / "crash_trials.py"),
            *("--only", "assern", "--trials", "1", "--backends", "1", "--quiet", "0.5", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [trial] = json.loads(out.read_text())["assern"]
    assert trial["in_flight"].startswith("failed"), trial  # the kill took the in-flight call
    assert trial["failed_calls"] == 1
    assert 0 < trial["recovered_s"] < 5
    assert "assern   answers again after median" in result.stdout


def test_a_short_soak_loses_and_hangs_no_call(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    short = ["--duration", "4", "--warmup", "1", "--kill-every", "1", "--reload-every", "2"]
    short += ["--concurrency", "8"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "soak" / "run.py"), *short, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    assert figures["calls"] > 0
    assert figures["hung"] == 0
    assert figures["lost"] == 0
    assert figures["answers_read"] == figures["requests_written"] == figures["calls"]  # counted at the wire
    assert figures["kills"] >= 3
    assert figures["restarts"] >= 1
    assert "hung" in result.stdout
