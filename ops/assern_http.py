"""Starting processes for the ops scripts: assern's HTTP front, fixtures, balancers.

Shared by ops/conformance/run.py and ops/deploy/replica_drill.py (they put this folder
on `sys.path`). Every process writes its output to a log file and is stopped (SIGTERM,
then SIGKILL after 15 s) when its block ends.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: What `assern serve --http` prints on stderr once it listens.
SERVING = r"serving MCP over HTTP at (\S+)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def assern_argv() -> list[str]:
    """The `assern` installed beside this interpreter, else the module."""
    installed = Path(sys.executable).with_name("assern")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "assern.app.quick"]


@contextmanager
def running(argv: list[str], env: Mapping[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`argv` running with its output in `log`, stopped when the block ends."""
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def started(
    argv: list[str], env: Mapping[str, str], log: Path, ready: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`argv` running, once its output matches `ready`; yields it and the match's group 1."""
    with running(argv, env, log) as process:
        deadline = time.monotonic() + 60
        while (found := re.search(ready, log.read_text(errors="replace"))) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{argv[0]} did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        yield process, found.group(1)


def wait_ready(url: str, limit: float = 60.0) -> None:
    """Wait until the /readyz beside the MCP endpoint `url` answers 200 (backends settled)."""
    readyz = url.removesuffix("/mcp") + "/readyz"
    deadline = time.monotonic() + limit
    while True:
        try:
            with urllib.request.urlopen(readyz, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:  # refused, or 503 while backends start
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"assern was not ready after {limit:.0f} s ({readyz})")
        time.sleep(0.1)


@contextmanager
def http_front(
    config: Path, env: Mapping[str, str], log: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`assern serve --http` on a free loopback port with only an HTTP front, once ready;
    yields the process and its MCP endpoint's URL."""
    argv = [*assern_argv(), "serve", "--config", str(config), "--http", "127.0.0.1:0", "--no-stdio"]
    with started(argv, env, log, SERVING) as (process, url):
        wait_ready(url)
        yield process, url
