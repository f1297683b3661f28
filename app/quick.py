"""The `assern` entry point, and its quick path to a running primary.

`assern serve` started while a primary of the same configuration runs only bridges bytes
(app/bridge.py). When a hint (app/hint.py) says that this very start, with these
arguments, folder, files and variables, resolved to that primary's configuration before,
we take the instance lock, check that the primary still answers `hello` with the hint's
fingerprint, connect to its MCP socket and become the bridge (app/bridge.py): no
configuration is parsed and nothing beyond the standard library is imported. Anything
else (no hint, a changed file or variable, a primary that is gone or reloaded into
another configuration, a lock held too long) takes the full path of app/cli.py, which
elects and writes a fresh hint.
"""

from __future__ import annotations

import os
import sys

from assern.actors.config.home import assern_home_folder
from assern.actors.listener.socket_basics import same_user
from assern.app.bridge import LOG_FILE, exec_bridge, log_event
from assern.app.control_client import ControlError, ControlUnavailable, connect_unix, request
from assern.app.daemon.hello import DAEMON_SLOT, hello_line, read_welcome, socket_folder
from assern.app.daemon.identity import build_id
from assern.app.daemon.launch import (
    START_TIMEOUT,
    STARTED_BY_VARIABLE,
    daemon_argv,
    daemon_folder,
    daemon_wanted,
    idle_exit,
    spawn_daemon,
    spawn_detached,
    start_daemon,
    stderr_file,
)
from assern.app.daemon.upgrade import should_supersede, supersede_argv, wait_for_successor
from assern.app.first_answers import keep_stamp, saved_answers
from assern.app.handover import exec_handover
from assern.app.hint import (
    PROFILE_VARIABLE,
    config_environ,
    hint_file,
    hint_key,
    serve_arguments,
    valid_hint,
)
from assern.app.instance_lock import InstanceError, InstanceLock, sharing_enabled

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see docs/benchmarks.md, proxies)
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping, Sequence
    from typing import Any

#: How long the quick path waits for the lock and for `hello` before it gives up.
LOCK_WAIT = 2.0
HELLO_TIMEOUT = 10.0
#: How long the daemon may take to resolve a connection's configuration and welcome it.
WELCOME_TIMEOUT = 60.0
#: Daemons a start replaces in turn (others' started meanwhile) before it joins as is.
MAX_UPGRADES = 3


def _lock(path: str) -> InstanceLock | None:
    lock = InstanceLock(path)  # type: ignore[arg-type]  # a str serves: no pathlib here
    try:
        lock.acquire(LOCK_WAIT)
    except (InstanceError, OSError):
        return None
    return lock


def _connect(hint: Mapping[str, Any]) -> socket.socket | None:
    """The primary's MCP socket, connected under the lock once `hello` matched; or None."""
    lock = _lock(hint["lock"])
    if lock is None:
        return None
    try:
        hello = request(hint["control"], "hello", timeout=HELLO_TIMEOUT, connect_timeout=HELLO_TIMEOUT)
        if not isinstance(hello, dict) or hello.get("fingerprint") != hint["fingerprint"]:
            return None
        return connect_unix(hint["mcp"], HELLO_TIMEOUT)
    except (ControlUnavailable, ControlError):
        return None
    finally:
        lock.release()


def _greet(sock: socket.socket, hello: bytes) -> dict[str, Any] | int | None:
    """Send the hello and read the answer: the welcome's params, or what `daemon_shim`
    returns (None: take the other paths; an exit status once the user was told why)."""
    sock.settimeout(WELCOME_TIMEOUT)
    try:
        sock.sendall(hello)
    except OSError:
        sock.close()
        return None
    answer = read_welcome(sock)
    params = answer.get("params") if answer is not None else None
    if answer is None or not isinstance(params, dict):
        sock.close()
        print("assern: the daemon did not answer; see its log (`assernctl logs`)", file=sys.stderr)
        return 1
    if answer.get("method") == "assern/refused":
        sock.close()
        print(f"assern: {params.get('error')}", file=sys.stderr)
        return 2
    return params


def _upgrade(
    home: str, environ: Mapping[str, str], folder: str, mine: str, theirs: str, old_pid: object, hello: bytes
) -> tuple[socket.socket, dict[str, Any]] | None:
    """Replace the daemon of build `theirs` by one of this install (app/daemon/upgrade.py)
    and join it, or the daemon of another client that replaced it first (replaced in turn
    when this install is newer); None (the old daemon serves this client) when none
    took over."""
    control = os.path.join(folder, DAEMON_SLOT + ".ctl")

    def daemon_hello() -> dict[str, Any] | None:
        try:
            found = request(control, "hello", timeout=HELLO_TIMEOUT, connect_timeout=HELLO_TIMEOUT)  # type: ignore[arg-type]
        except (ControlUnavailable, ControlError):
            return None
        return found if isinstance(found, dict) else None

    idle, _ = idle_exit(environ)
    env = {**environ, STARTED_BY_VARIABLE: f"assern serve (pid {os.getpid()}) of build {mine}"}
    for _ in range(MAX_UPGRADES):
        argv = supersede_argv(daemon_argv(sys.executable, idle), theirs)
        try:
            spawn_detached(argv, cwd=daemon_folder(environ), environ=env, stderr_path=stderr_file(home))
        except OSError:
            return None
        found = wait_for_successor(daemon_hello, old_pid, START_TIMEOUT)
        if found is None:
            print(
                f"assern: warning: the daemon of build {mine} did not take over; joined build {theirs}",
                file=sys.stderr,
            )
            return None
        build, started_at = found.get("build"), found.get("started_at")
        if build == mine or not isinstance(build, str):
            break
        newer = should_supersede(
            mine, build, their_started_at=started_at if isinstance(started_at, int | float) else None
        )
        if not newer:
            break  # another client's newer daemon took over first: join it
        theirs, old_pid = build, found.get("pid")  # another client's older one: replace it in turn
    try:
        sock = connect_unix(os.path.join(folder, DAEMON_SLOT + ".sock"), HELLO_TIMEOUT)  # type: ignore[arg-type]
    except ControlUnavailable:
        return None
    greeted = _greet(sock, hello)
    return (sock, greeted) if isinstance(greeted, dict) else None


def daemon_shim(argv: Sequence[str], environ: Mapping[str, str], cwd: str) -> int | None:
    """Serve this client through the workstation daemon, started first when none answers
    (app/daemon/launch.py); return the exit status, or None to take the other paths (not a
    plain `serve`, sharing or the daemon turned off, or a daemon that did not start)."""
    args = serve_arguments(argv)
    if args is None or not sharing_enabled(environ) or not daemon_wanted(environ):
        return None
    env = config_environ(environ)
    home = assern_home_folder(env)
    folder = socket_folder(home, env, os.getuid())
    if folder is None:
        return None
    mcp = os.path.join(folder, DAEMON_SLOT + ".sock")
    options = dict(zip(args[::2], args[1::2], strict=True))
    config = options.get("--config")
    profile = options.get("--profile") or environ.get(PROFILE_VARIABLE) or None
    level = options.get("--log-level", "info").lower()
    log_file = os.path.join(home, "logs", LOG_FILE)
    mine = build_id(home)
    key = hint_key(args, cwd, env)
    join: dict[str, Any] = {
        "socket": mcp,
        "home": home,
        "build": mine,
        "config": os.path.join(cwd, config) if config else None,
        "project": options.get("--project"),
        "profile": profile,
    }
    try:
        sock = connect_unix(mcp, HELLO_TIMEOUT)  # type: ignore[arg-type]  # a str serves: no pathlib here
    except ControlUnavailable:
        answers = saved_answers(home, key, mine, env)
        if answers is not None:  # answer from them while the daemon starts
            pid, message = spawn_daemon(home, environ)
            if pid is not None:
                if message:
                    print(f"assern: warning: {message}", file=sys.stderr)
                log_event(log_file, level, "daemon_spawned", pid=pid, socket=mcp, answers="kept")
                exec_handover(
                    None, {**join, "answers": answers, "starting": pid}, log_file=log_file, log_level=level
                )
        started, message = start_daemon(home, environ, mcp)
        if started is None:
            print(f"assern: {message}; serving this client with an instance of its own", file=sys.stderr)
            return None
        if message:
            print(f"assern: warning: {message}", file=sys.stderr)
        if not same_user(started):
            started.close()
            print(f"assern: {mcp} is served by another user's process", file=sys.stderr)
            return None
        sock = started
    hello = hello_line(
        cwd=cwd,
        environ=environ,
        config=join["config"],
        project=join["project"],
        profile=profile,
        build=mine,
        resumes=True,
    )
    greeted = _greet(sock, hello)
    if not isinstance(greeted, dict):
        return greeted
    theirs = greeted.get("build")
    started_at = greeted.get("started_at")
    python = greeted.get("python")
    if isinstance(theirs, str) and should_supersede(
        mine,
        theirs,
        their_started_at=started_at if isinstance(started_at, int | float) else None,
        same_interpreter=python in (None, sys.executable),
    ):
        upgraded = _upgrade(home, environ, folder, mine, theirs, greeted.get("pid"), hello)
        if upgraded is not None:
            sock.close()
            sock, greeted = upgraded
    params = greeted
    for warning in params.get("warnings") or ():
        print(f"assern: warning: {warning}", file=sys.stderr)
    for notice in params.get("notices") or ():
        print(notice, file=sys.stderr)
    log_event(log_file, level, "daemon_joined", view=params.get("view"), socket=mcp)
    sock.settimeout(None)
    stamp = params.get("stamp")
    if isinstance(stamp, dict):  # keep this session's first answers for the next start
        join["answers"] = keep_stamp(home, key, mine, stamp)
        if params.get("capabilities_known") is False:
            join["initialize_unsettled"] = True  # its answer is not kept for the next start
    exec_handover(sock, join, log_file=log_file, log_level=level)
    raise AssertionError("unreachable: exec replaced this process")


def quick_proxy(argv: Sequence[str], environ: Mapping[str, str], cwd: str) -> int | None:
    """Proxy through a valid hint and return the exit status; None to take the full path."""
    args = serve_arguments(argv)
    if args is None or not sharing_enabled(environ):
        return None
    env = config_environ(environ)
    key = hint_key(args, cwd, env)
    home = assern_home_folder(env)
    hint = valid_hint(hint_file(home, key), key, env)
    if hint is None:
        return None
    sock = _connect(hint)
    if sock is None:
        return None
    for line in hint.get("notices", ()):
        sys.stderr.write(f"assern: warning: {line}\n")
    options = dict(zip(args[::2], args[1::2], strict=True))
    level = options.get("--log-level", "info").lower()
    profile = options.get("--profile") or environ.get(PROFILE_VARIABLE) or None
    log_file = os.path.join(home, "logs", LOG_FILE)
    log_event(log_file, level, "instance_proxy", slot=hint["slot"], socket=hint["mcp"], via="hint")
    exec_bridge(sock, slot=hint["slot"], log_file=log_file, log_level=level, profile=profile)
    raise AssertionError("unreachable: exec replaced this process")


def main() -> int:
    """The `assern` console script."""
    argv = sys.argv[1:]
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    if cwd is not None:
        code = daemon_shim(argv, os.environ, cwd)
        if code is None:
            code = quick_proxy(argv, os.environ, cwd)
        if code is not None:
            return code
    from assern.app.loading import FullCollectionsDeferred, import_structlog_lean

    with FullCollectionsDeferred():
        import_structlog_lean()
        from assern.app.cli import assern_main

    return assern_main(argv)


if __name__ == "__main__":  # `python -m assern.app.quick`: how a client starts the daemon
    sys.exit(main())
