"""Proxy mode: our stdio bridged byte for byte to a running primary's MCP socket.

The bytes are not parsed: every request, response, notification, cancellation and
server-to-client request passes both ways unchanged, so the client cannot tell a proxy
from the primary. No tree and no backend runs in a proxy, and nothing but the standard
library is imported: a proxy is Python, a socket and two threads of copying (about
11 MB). Whichever way a start found its primary (the quick path of app/quick.py or the
full election of app/cli.py), it replaces itself with this file run by a bare
interpreter (`exec_bridge`), so what the start imported is shed.

How a proxy ends:

- our client closes stdin: the socket's write side is shut so the primary ends the
  session as it would for stdio; we stop once it hangs up (or after `DRAIN_TIMEOUT`),
  exit status 0;
- the primary hangs up first: one line on stderr, exit status 1;
- SIGINT, SIGTERM or SIGHUP: exit status 128 + the signal's number.

A start given a profile (`assern serve --profile NAME` or `ASSERN_PROFILE`) says so
first: one `assern/profile` notification goes to the primary before the client's bytes
(the primary serves this connection that profile's view; actors/listener/session.py).

Each end writes one `proxy_stopped` JSON line (`ended_by`: client, primary or signal) to
the log file, as the rest of assern's log lines are written.

Standard library only.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import threading
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any, Literal

    Ended = Literal["client", "primary"]

CHUNK = 65536
#: After our client closed stdin, how long the primary may take to finish and hang up.
DRAIN_TIMEOUT = 5.0
#: supervisor/io/logs.py's file and line format, written again here: this file may import
#: nothing of assern (it runs under `python -I -S`).
LOG_FILE = "assern.log"
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: actors/listener/protocol.py's PROFILE_NOTE, written again here (standard library only)
PROFILE_NOTE = "assern/profile"


def profile_note(profile: str) -> bytes:
    """The line that tells the primary which profile this connection is served."""
    note = {"jsonrpc": "2.0", "method": PROFILE_NOTE, "params": {"name": profile}}
    return json.dumps(note).encode() + b"\n"


class Stopped(Exception):
    """A stop signal arrived."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def announce(sock: socket.socket, profile: str) -> None:
    """Tell the primary the profile of this connection, before any byte of the client."""
    try:
        sock.sendall(profile_note(profile))
    except OSError:
        pass  # the primary is gone: the bridge finds out and says so


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def bridge(
    sock: socket.socket, *, stdin: int = 0, stdout: int = 1, drain_timeout: float = DRAIN_TIMEOUT
) -> Ended:
    """Copy `stdin` to `sock` and `sock` to `stdout` until one side is done.

    Upstream (stdin to socket) runs in a thread, downstream in the calling thread, so
    neither direction waits for the other, and signals reach the caller.

    Returns:
        Which side ended the session: "client" or "primary".
    """
    sock.setblocking(True)
    wake_read, wake_write = socket.socketpair()
    upstream_ended: list[Ended] = []

    def upstream() -> None:
        ended: Ended = "client"
        try:
            while chunk := os.read(stdin, CHUNK):
                try:
                    sock.sendall(chunk)
                except OSError:
                    ended = "primary"
                    break
        except OSError:
            pass  # our stdin is gone: the client ended
        # Recorded before the write side is shut: the primary may hang up at once, and
        # the reader must know by then that our client ended first.
        upstream_ended.append(ended)
        if ended == "client":
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                upstream_ended[0] = "primary"
        try:
            wake_write.send(b"!")
        except OSError:
            pass

    thread = threading.Thread(target=upstream, name="assern-proxy-upstream", daemon=True)
    with selectors.DefaultSelector() as selector, wake_read, wake_write:
        selector.register(sock, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        thread.start()
        deadline: float | None = None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = selector.select(timeout)
            if not ready:
                return "client"  # drained for `drain_timeout`: the client is done
            for key, _events in ready:
                if key.fileobj is wake_read:
                    selector.unregister(wake_read)
                    if upstream_ended[0] == "primary":
                        return "primary"
                    deadline = time.monotonic() + drain_timeout
                    continue
                try:
                    chunk = sock.recv(CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    return "client" if upstream_ended == ["client"] else "primary"
                try:
                    _write_all(stdout, chunk)
                except OSError:
                    return "client"  # our stdout is gone


def log_event(log_file: str | None, threshold: str, event: str, **fields: Any) -> None:
    """Append one info-level JSON line as assern's structlog pipeline writes them (one
    write), unless the configured `threshold` (`--log-level`) is above info."""
    if log_file is None or _LEVELS.get(threshold.lower(), _LEVELS["info"]) > _LEVELS["info"]:
        return
    now = time.time()
    second = int(now)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    line = {**fields, "event": event, "level": "info", "ts": f"{stamp}.{int((now - second) * 1e6):06d}Z"}
    try:
        os.makedirs(os.path.dirname(log_file), exist_ok=True)
        fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps(line, default=str).encode() + b"\n")
        finally:
            os.close(fd)
    except OSError:
        pass  # a log line never stops the bridge


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def run_proxy(
    sock: socket.socket,
    *,
    slot: str,
    log_file: str | None,
    log_level: str = "info",
    profile: str | None = None,
) -> int:
    """Bridge until one side ends; log it; the exit status (see the module's docstring)."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _stop)
    try:
        if profile:
            announce(sock, profile)
        ended = bridge(sock)
    except Stopped as stop:
        log_event(log_file, log_level, "proxy_stopped", ended_by="signal", signal=stop.signum, slot=slot)
        return 128 + stop.signum
    finally:
        sock.close()
    log_event(log_file, log_level, "proxy_stopped", ended_by=ended, slot=slot)
    if ended == "primary":
        print("assern: the shared instance closed the connection", file=sys.stderr, flush=True)
        return 1
    return 0


def exec_bridge(
    sock: socket.socket, *, slot: str, log_file: str, log_level: str, profile: str | None = None
) -> None:
    """Replace this process with a bare bridge over `sock` (same pid, same stdio).

    This module is run by an isolated interpreter without `site` (`exec_module`): it
    imports nothing but the standard library, so the proxy keeps nothing of what its
    start imported (about 10.5 MB whichever path led here).
    """
    os.set_inheritable(sock.fileno(), True)
    exec_module("assern.app.bridge", [str(sock.fileno()), slot, log_file, log_level, profile or ""])


#: `python -I -S -c _LAUNCH ROOT MODULE ARGS`: `main()` of MODULE found under ROOT.
_LAUNCH = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "sys.exit(__import__(sys.argv.pop(1), fromlist=['main']).main())"
)


def exec_module(module: str, arguments: list[str]) -> None:
    """Replace this process (same pid, stdio, environment and folder) with `main()` of
    `module`, one of this package's standard-library-only modules, run by an isolated
    interpreter without `site` (`-I -S`) and given `arguments` as its argv. The module is
    imported, not run as a file: an import reads the cached bytecode, while a script is
    compiled again at every start (its time and about 1 MB more PSS for the bridges)."""
    sys.stdout.flush()
    sys.stderr.flush()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", _LAUNCH, root, module, *arguments])


def main(argv: Sequence[str] | None = None) -> int:
    """`main()` with argv `FD SLOT LOG_FILE LOG_LEVEL [PROFILE]` (what `exec_bridge` runs)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (4, 5) or not args[0].isdigit():
        print(
            "usage: python -I -S bridge.py FD SLOT LOG_FILE LOG_LEVEL [PROFILE] (internal)", file=sys.stderr
        )
        return 2
    fd, slot, log_file, log_level = args[:4]
    profile = args[4] if len(args) == 5 else None
    return run_proxy(
        socket.socket(fileno=int(fd)), slot=slot, log_file=log_file, log_level=log_level, profile=profile
    )


if __name__ == "__main__":
    sys.exit(main())
