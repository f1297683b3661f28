"""The status page in a real browser: Debian's chromium driven by Playwright.

`assern daemon` runs three backends: `alpha` (healthy; it crashes at start while a
file exists), `ghost` (its launcher is missing) and `flaky` (it exits at once, again
and again). `assernctl web --print` signs the browser in; the page shows each row, its
state and the doctor's id; `alpha`, killed while it cannot start, turns restarting and
comes back, on the same page, without a reload; no console error; without JavaScript
the page shows the same. Wrong and used codes, a foreign Host or Origin are refused;
with no instance, `assernctl web` says so.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from harness import TESTING_SERVER, AssernEnv, assern_command, make_env
from needed_tools import needs_chromium

pytestmark = [pytest.mark.e2e, needs_chromium]

#: Seconds any one wait of this test may take (each is a bounded poll or a browser wait).
LIMIT = 20.0


@contextmanager
def plain_asyncio() -> Iterator[None]:
    """Playwright's sync API runs an asyncio loop of its own. Once trio-asyncio is
    imported in this process (by the asyncio middleware tests of the same worker), its
    policy makes every new loop a trio one, which Playwright cannot drive: give it the
    standard policy for as long as it runs."""
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(previous)


def config(tmp_path: Path) -> Path:
    down = tmp_path / "down"
    path = tmp_path / "config.toml"
    path.write_text(
        f'[servers.alpha]\ncommand = "${{ASSERN_PYTHON}}"\nargs = ["{TESTING_SERVER}", "--name", "alpha", '
        f'"--tools", "echo", "--crash-on-start-if", "{down}"]\n'
        # the first restart is at once; the next waits 2 s: long enough to be seen restarting
        "max_restarts = 100\nrestart_window = 600\nbackoff_initial = 2.0\nbackoff_max = 2.0\n\n"
        '[servers.ghost]\ncommand = "assern-test-no-such-launcher"\nmax_restarts = 0\n\n'
        '[servers.flaky]\ncommand = "${ASSERN_PYTHON}"\nargs = ["-I", "-S", "-c", "raise SystemExit(3)"]\n'
        "max_restarts = 10000\nrestart_window = 600\nbackoff_initial = 0.5\nbackoff_max = 1.0\n"
    )
    return path


def ctl(env: AssernEnv, cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = str(Path(assern_command()).with_name("assernctl"))
    return subprocess.run(
        [command, *args, "--config", str(cfg)],
        env=env.env,
        cwd=env.work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def poll(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` until it gives something true (another process's doing: no event)."""
    deadline = time.monotonic() + LIMIT
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"waited {LIMIT:g} s for {what}")
        time.sleep(0.05)
    return found


def backends(env: AssernEnv, cfg: Path) -> dict[str, dict[str, Any]]:
    done = ctl(env, cfg, "status", "--json")
    if done.returncode != 0:
        return {}
    return {entry["name"]: entry for entry in json.loads(done.stdout)["backends"]}


@contextmanager
def daemon(env: AssernEnv, cfg: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [assern_command(), "daemon", "--config", str(cfg)],
        env=env.env,
        cwd=env.work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        ctl(env, cfg, "shutdown")
        try:
            process.wait(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def login(env: AssernEnv, cfg: Path) -> str:
    done = ctl(env, cfg, "web", "--print")
    assert done.returncode == 0, done.stderr
    assert "once" in done.stderr
    return done.stdout.strip()


def raw_get(url: str, **headers: str) -> int:
    """The status of a GET sent by hand (a browser never sends a foreign Host)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=LIMIT)
    try:
        connection.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_status_page_in_a_browser(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    env = make_env(tmp_path)
    cfg = config(tmp_path)
    with daemon(env, cfg):
        poll(
            lambda: (
                (b := backends(env, cfg))
                and b["alpha"]["state"] == "ready"
                and b["ghost"]["state"] == "failed"
            ),
            "alpha ready and ghost failed",
        )
        called = ctl(env, cfg, "call", "alpha", "echo", '{"text": "an-argument-never-shown"}')
        assert called.returncode == 0, called.stderr
        first = login(env, cfg)
        page_url = first.split("/login?", 1)[0] + "/"
        sandbox = [] if os.geteuid() != 0 else ["--no-sandbox"]  # chromium refuses root otherwise
        with plain_asyncio(), sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=sandbox)
            try:
                live = browser.new_page()
                problems: list[str] = []
                live.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
                live.on("pageerror", lambda error: problems.append(str(error)))
                live.goto(first)
                assert live.url == page_url  # redirected: no code in the address that stays
                live.wait_for_selector("#live.on", timeout=LIMIT * 1000)

                # -- the rows, their states and the doctor's ids
                live.wait_for_selector('#backend-alpha[data-state="ready"]')
                live.wait_for_selector('#backend-ghost[data-state="failed"][data-doctor="backend.failed"]')
                live.wait_for_selector(
                    '#backend-flaky[data-doctor="backend.crash_loop"]', timeout=LIMIT * 1000
                )
                assert "backend.failed" in live.inner_text("#backend-ghost")
                assert "assern-test-no-such-launcher" in live.inner_text("#backend-ghost")
                assert "backend.crash_loop" in live.inner_text("#backend-flaky")
                assert "echo" in live.inner_text("#calls")
                assert "an-argument-never-shown" not in live.content()
                assert live.inner_text("#logs").strip()
                assert str(cfg) in live.inner_text("#instance")

                # -- alpha killed while it cannot start: restarting, then back, on the same page
                live.evaluate("window.stillTheSamePage = true")
                pid = backends(env, cfg)["alpha"]["pid"]
                (tmp_path / "down").touch()
                os.kill(pid, signal.SIGKILL)
                live.wait_for_selector('#backend-alpha[data-state="restarting"]', timeout=LIMIT * 1000)
                (tmp_path / "down").unlink()
                live.wait_for_selector('#backend-alpha[data-state="ready"]', timeout=LIMIT * 1000)
                assert str(pid) not in live.inner_text("#backend-alpha .pid")
                assert live.evaluate("window.stillTheSamePage") is True
                assert problems == []

                # -- without JavaScript: the same rows, states and ids, as of the loading
                still = browser.new_context(java_script_enabled=False).new_page()
                still.goto(login(env, cfg))
                assert still.url == page_url
                assert still.get_attribute("#backend-alpha", "data-state") == "ready"
                assert still.get_attribute("#backend-ghost", "data-doctor") == "backend.failed"
                assert still.get_attribute("#backend-flaky", "data-doctor") == "backend.crash_loop"
                assert "echo" in still.inner_text("#calls")
                assert still.inner_text("#logs").strip()
                assert "reload the page" in still.inner_text("#live")
                still.select_option("select[name=level]", "error")
                still.click("button[type=submit]")
                assert still.url == page_url + "?level=error"
                assert "backend_failed" in still.inner_text("#logs")  # ghost's failure is an error
                assert "backend_state" not in still.inner_text("#logs")  # info lines are filtered out

                # -- refused: a used code, a wrong one, a foreign Host or Origin, no cookie
                fresh = browser.new_page()

                def status_of(url: str) -> int:
                    response = fresh.goto(url)
                    assert response is not None
                    return response.status

                assert status_of(first) == 403  # used already
                assert status_of(page_url + "login?code=guessed") == 403
                assert status_of(page_url) == 401  # this context never signed in
                port = urlsplit(page_url).port
                code = login(env, cfg)
                assert raw_get(code, Host=f"evil.example:{port}") == 421
                assert raw_get(code, Origin="http://evil.example") == 403
                assert raw_get(code) == 303  # the refusals did not use the code up
                assert raw_get(code) == 403
            finally:
                browser.close()
    gone = ctl(env, cfg, "web", "--print")  # the instance stopped: nothing to open
    assert gone.returncode == 1
    assert "no assern instance runs" in gone.stderr
    assert gone.stdout == ""
