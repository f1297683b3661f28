"""`assernctl daemon restart`: a fresh daemon of this install takes over, no client closed.

The new daemon (`assern daemon --supersede`, started detached as a client's `assern serve`
starts one: app/daemon/launch.py) takes the sockets from the running one
(app/daemon/supersede.py); the old one finishes its calls in flight (at most `--drain`
seconds) and stops. Waits until the new daemon answers, and prints both.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from assern.actors.config.home import default_assern_home
from assern.app.ctl.common import print_json, workstation_daemon
from assern.app.daemon.launch import (
    STARTED_BY_VARIABLE,
    daemon_argv,
    daemon_folder,
    idle_exit,
    spawn_detached,
    stderr_file,
)
from assern.app.hint import config_environ

if TYPE_CHECKING:
    import argparse

#: Seconds `assernctl daemon restart` waits for the new daemon to answer.
RESTART_WAIT = 30.0


def cmd_daemon(args: argparse.Namespace) -> int:
    """`assernctl daemon restart [--drain SECONDS]`."""
    running = workstation_daemon()
    if running is None:
        print("assernctl: no workstation daemon runs (the next `assern serve` starts one)", file=sys.stderr)
        return 1
    old = running[1]
    env = config_environ(os.environ)
    home = default_assern_home(env)
    idle, warning = idle_exit(env)
    if warning is not None:
        print(f"assernctl: warning: {warning}", file=sys.stderr)
    argv = [*daemon_argv(sys.executable, idle), "--supersede", "--drain", f"{args.drain:g}"]
    child_env = {**os.environ, STARTED_BY_VARIABLE: f"assernctl daemon restart (pid {os.getpid()})"}
    stderr = stderr_file(str(home))
    spawn_detached(argv, cwd=daemon_folder(os.environ), environ=child_env, stderr_path=stderr)
    deadline = time.monotonic() + RESTART_WAIT
    while time.monotonic() < deadline:
        found = workstation_daemon()
        if found is not None and found[1].get("pid") != old.get("pid"):
            new = found[1]
            if args.json:
                print_json({"old": _brief(old), "new": _brief(new)})
            else:
                print(
                    f"assern daemon restarted: pid {old.get('pid')} (build {old.get('build')}) drains "
                    f"and stops; pid {new.get('pid')} (build {new.get('build')}, generation "
                    f"{new.get('generation')}) serves every client now"
                )
            return 0
        time.sleep(0.05)
    print(f"assernctl: no new daemon answered within {RESTART_WAIT:g} s; see {stderr}", file=sys.stderr)
    return 1


def _brief(hello: dict[str, object] | object) -> dict[str, object]:
    found = hello if isinstance(hello, dict) else {}
    return {key: found.get(key) for key in ("pid", "build", "generation")}
