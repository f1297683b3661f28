"""What real clients send on their first turn through assern: are all of assern's tools in it?

    .venv/bin/python ops/bench/client_first_turn.py                    # 5 runs of each situation
    .venv/bin/python ops/bench/client_first_turn.py --runs 2 --clients codex --json out.json

For each client installed (Codex CLI `codex exec`, Gemini CLI `gemini -p`, Claude Code
`claude -p`; one that is not installed is skipped with a line saying so), each run gives
the client a private HOME whose only MCP server is `assern serve` (this repository's, on
the bundled default configuration: the notes and calculator examples and the reference
time server), points the client's model URL at a loopback stub (`model_stub.py` beside
this file: it records every request and answers "ok"), runs one prompt, and reads the
FIRST model request that carries the prompt and tools: how many of assern's tools it
offers, against `assernctl list`. The client's stderr is searched for duplicate
registrations ("already registered") and errors. Situations, taking turns:

- "cold": no daemon runs, no saved lists and no kept first answers
  (`$ASSERN_HOME/cache/catalogs` and `cache/first-answers` removed);
- "warm": no daemon runs, the saved lists are kept: the client's `assern serve` starts
  the daemon;
- "daemon": a daemon already runs (started by an `assern serve` before the run).

`assernctl shutdown` stops the daemon before and after each run, and `assernctl status`
checks the situation before it (a run whose situation cannot be made true ends the
bench with a line saying why). The clients run on their own defaults; `--wait` sets
those that give up on a starting server to wait for it (Codex CLI `required = true`,
Claude Code `MCP_CONNECTION_NONBLOCKING=false`). Gemini CLI's entry is trusted: headless,
it leaves an untrusted server's tools out of the request whatever the server does.
Everything is written under one temporary folder, removed at the end. Prints one line
per run, then per client and situation the runs whose first request offered every
assern tool, those with a duplicate registration and those with an error line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_stub import ModelStub, tool_names
from serve_client import spawn_listing

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parents[1] / "examples" / "default.toml"
PROMPT = "first-turn-probe: reply with the word ok"
SITUATIONS = ("cold", "warm", "daemon")
DUPLICATE = re.compile(r"already registered", re.IGNORECASE)
ERROR = re.compile(r"\berror\b|failed|exception", re.IGNORECASE)


def beside_python(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit(f"the `{name}` console script is not installed beside this Python")
    return found


class SituationError(Exception):
    """A run's situation (cold, warm, daemon) could not be made true."""


class Setup:
    """One run's folders: a private HOME, its ASSERN_HOME with the default config, a project."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.assern_home = self.home / "assern"
        self.project = root / "project"
        self.assern_home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(exist_ok=True)
        self.catalogs = self.assern_home / "cache" / "catalogs"
        self.first_answers = self.assern_home / "cache" / "first-answers"
        shutil.copyfile(CONFIG, self.assern_home / "config.toml")

    def assern_env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "ASSERN_HOME": str(self.assern_home)}

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            **self.assern_env(),
            **extra,
        }

    def assernctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [beside_python("assernctl"), *args],
            env=self.env({}),
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def expected_tools(self) -> list[str]:
        listed = self.assernctl("list", "--json")
        if listed.returncode != 0:
            sys.exit(f"assernctl list failed: {listed.stderr.strip()}")
        return [tool["name"] for tool in json.loads(listed.stdout)["tools"]]

    def start_daemon(self) -> None:
        """An `assern serve` that starts the daemon and leaves: the daemon goes on."""
        process = spawn_listing([beside_python("assern"), "serve"], env=self.env({}), cwd=self.project)
        assert process.stdin is not None
        assert process.stdout is not None
        while (raw := process.stdout.readline()) and json.loads(raw).get("id") != 2:
            pass
        # A start answered from kept first answers lists before the daemon's backends
        # did: the session stays until their listings are saved (at most 30 s).
        deadline = time.monotonic() + 30
        while not self.saved_lists() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.stdin.close()
        process.wait(timeout=30)

    def stop_daemon(self) -> None:
        self.assernctl("shutdown")

    def daemon_answers(self) -> bool:
        """Whether a workstation daemon answers `assernctl status` for this ASSERN_HOME."""
        status = self.assernctl("status", "--json")
        return status.returncode == 0 and "workstation" in json.loads(status.stdout or "{}")

    def saved_lists(self) -> int:
        """How many backends' saved listings `$ASSERN_HOME/cache/catalogs` holds."""
        return len(list(self.catalogs.glob("*.json"))) if self.catalogs.is_dir() else 0

    def prepare(self, situation: str) -> None:
        """Make the situation true, and check it is: "cold" (no daemon, no saved lists),
        "warm" (no daemon, saved lists) or "daemon" (a daemon answers).

        Raises:
            SituationError: it could not be made true.
        """
        self.stop_daemon()
        if situation == "cold":
            shutil.rmtree(self.catalogs, ignore_errors=True)
            shutil.rmtree(self.first_answers, ignore_errors=True)
        elif situation == "warm" and not self.saved_lists():
            self.start_daemon()  # its backends list, and their listings are saved
            self.stop_daemon()
        elif situation == "daemon":
            self.start_daemon()
        answers, saved = self.daemon_answers(), self.saved_lists()
        if (situation == "daemon") != answers:
            raise SituationError(f"{situation}: a daemon {'answers' if answers else 'does not answer'}")
        if situation == "cold" and saved:
            raise SituationError(f"cold: {saved} saved lists are back before the run")
        if situation == "warm" and not saved:
            raise SituationError("warm: no saved lists after a daemon's start")


def server_entry(setup: Setup) -> dict[str, Any]:
    return {"command": beside_python("assern"), "args": ["serve"], "env": setup.assern_env()}


def codex(setup: Setup, url: str, wait: bool) -> tuple[list[str], dict[str, str]]:
    """Codex CLI: a provider in `$CODEX_HOME/config.toml` whose base URL is the stub's. It
    starts its first turn without a server that is not ready within its grace (about a
    second); `wait` marks assern `required`, which it waits for."""
    codex_home = setup.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    entry = server_entry(setup)
    env_table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in entry["env"].items())
    (codex_home / "config.toml").write_text(
        'model = "stub-model"\n'
        'model_provider = "stub"\n\n'
        "[model_providers.stub]\n"
        'name = "stub"\n'
        f'base_url = "{url}/v1"\n'
        'env_key = "STUB_API_KEY"\n'
        'wire_api = "responses"\n\n'
        "[mcp_servers.assern]\n"
        f"command = {json.dumps(entry['command'])}\n"
        f"args = {json.dumps(entry['args'])}\n"
        f"env = {{ {env_table} }}\n" + ("required = true\n" if wait else "")
    )
    command = ["codex", "exec", "--skip-git-repo-check", PROMPT]
    return command, {"CODEX_HOME": str(codex_home), "STUB_API_KEY": "stub"}


def gemini(setup: Setup, url: str, wait: bool) -> tuple[list[str], dict[str, str]]:
    """Gemini CLI: `GOOGLE_GEMINI_BASE_URL` and a dummy `GEMINI_API_KEY`; the server in
    settings.json. It waits for its servers' discovery either way (`wait` changes nothing)."""
    folder = setup.home / ".gemini"
    folder.mkdir(exist_ok=True)
    settings = {
        # Headless (`-p`), a server's tools that would ask before a call are left out of
        # the model's request altogether: a trusted server's are not.
        "mcpServers": {"assern": {**server_entry(setup), "trust": True}},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    command = ["gemini", "-p", PROMPT]
    return command, {
        "GEMINI_API_KEY": "stub",
        "GOOGLE_GEMINI_BASE_URL": url,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }


def claude(setup: Setup, url: str, wait: bool) -> tuple[list[str], dict[str, str]]:
    """Claude Code: `ANTHROPIC_BASE_URL` and a dummy `ANTHROPIC_API_KEY`; the server by
    --mcp-config. Print mode starts its turn without a server whose tools are not listed
    within about two seconds; `wait` sets `MCP_CONNECTION_NONBLOCKING=false`, which waits."""
    config = json.dumps({"mcpServers": {"assern": {"type": "stdio", **server_entry(setup)}}})
    command = ["claude", "-p", PROMPT, "--mcp-config", config, "--strict-mcp-config"]
    return command, {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "stub",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **({"MCP_CONNECTION_NONBLOCKING": "false"} if wait else {}),
    }


CLIENTS: dict[str, tuple[str, Callable[[Setup, str, bool], tuple[list[str], dict[str, str]]]]] = {
    "codex": ("Codex CLI", codex),
    "gemini": ("Gemini CLI", gemini),
    "claude": ("Claude Code", claude),
}


def first_turn(requests: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first request that carries the prompt and offers tools (a client's own side
    requests, such as a title or routing call, offer none)."""
    for request in requests:
        body = request["body"]
        if PROMPT in json.dumps(body) and tool_names(body):
            return request
    return None


def offered(expected: list[str], names: list[str]) -> list[str]:
    """The expected assern tools a request offers, under the client's own prefix if any."""
    return [tool for tool in expected if any(name == tool or name.endswith("_" + tool) for name in names)]


def one_run(
    client: str,
    situation: str,
    setup: Setup,
    stub: ModelStub,
    expected: list[str],
    timeout: float,
    *,
    wait: bool = False,
) -> dict[str, Any]:
    setup.prepare(situation)
    command, extra = CLIENTS[client][1](setup, stub.url, wait)
    stub.taken()
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            env=setup.env(extra),
            cwd=setup.project,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        code: int | None = done.returncode
        stderr = done.stderr
    except subprocess.TimeoutExpired as expired:
        code = None
        stderr = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else ""
    seconds = time.perf_counter() - started
    requests = stub.taken()
    first = first_turn(requests)
    names = tool_names(first["body"]) if first else []
    got = offered(expected, names)
    setup.stop_daemon()
    lines = stderr.splitlines()
    return {
        "client": client,
        "situation": situation,
        "exit": code,
        "seconds": round(seconds, 2),
        "requests": len(requests),
        "first_request": first is not None,
        "assern_tools": len(got),
        "expected": len(expected),
        "all_tools": first is not None and len(got) == len(expected),
        "duplicates": [line for line in lines if DUPLICATE.search(line)],
        "errors": [line for line in lines if ERROR.search(line)][:5],
        "stderr_tail": lines[-5:],
    }


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="runs of each situation per client (5)")
    parser.add_argument("--clients", nargs="*", choices=sorted(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--situations", nargs="*", choices=SITUATIONS, default=list(SITUATIONS))
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds one client run may take (90)")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="configure each client to wait for assern before its first turn (not their default)",
    )
    parser.add_argument("--json", type=Path, help="also write every run here")
    args = parser.parse_args()
    print(f"load average before: {load()}", flush=True)
    print(
        "clients configured to wait for assern" if args.wait else "clients on their own defaults",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="assern-first-turn-") as tmp, ModelStub() as stub:
        for client in args.clients:
            label = CLIENTS[client][0]
            if shutil.which(client) is None:
                print(f"{label}: not installed (no `{client}` on PATH), skipped", flush=True)
                continue
            version = subprocess.run(
                [client, "--version"], capture_output=True, text=True, timeout=60, check=False
            )
            print(f"{label} {version.stdout.strip()}", flush=True)
            setup = Setup(Path(tmp) / client)
            expected = setup.expected_tools()
            for _ in range(args.runs):
                for situation in args.situations:
                    try:
                        run = one_run(client, situation, setup, stub, expected, args.timeout, wait=args.wait)
                    except SituationError as exc:
                        setup.stop_daemon()
                        sys.exit(f"{label}: the situation could not be made true: {exc}")
                    runs.append(run)
                    print(
                        f"  {situation:6} exit {run['exit']} {run['seconds']:6.2f} s"
                        f"  requests {run['requests']}"
                        f"  assern tools {run['assern_tools']}/{run['expected']}"
                        f"  duplicates {len(run['duplicates'])}"
                        + (f"  first error: {run['errors'][0][:100]}" if run["errors"] else "")
                        + ("" if run["requests"] else f"  stderr: {' | '.join(run['stderr_tail'])[:200]}"),
                        flush=True,
                    )
            setup.stop_daemon()
    print(f"load average after: {load()}")
    print(
        "runs whose first model request offers every assern tool;"
        " runs with a duplicate registration; with an error line:"
    )
    for client in args.clients:
        cells = []
        for situation in args.situations:
            mine = [run for run in runs if run["client"] == client and run["situation"] == situation]
            if mine:
                whole = sum(run["all_tools"] for run in mine)
                twice = sum(bool(run["duplicates"]) for run in mine)
                errors = sum(bool(run["errors"]) for run in mine)
                cells.append(f"{situation} {whole}/{len(mine)}, twice {twice}, errors {errors}")
        if cells:
            print(f"  {CLIENTS[client][0]}: " + "; ".join(cells))
    if args.json:
        args.json.write_text(json.dumps({"load": load(), "wait": args.wait, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
