"""`assernctl restart|stop|start SERVER`, `reload` and `shutdown`: steer the running instance."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.ctl.common import FAILED, ask, print_json, workstation_daemon
from assern.supervisor.io.process import process_alive

if TYPE_CHECKING:
    import argparse

#: Seconds `assernctl shutdown` waits for the instance's process to end.
SHUTDOWN_WAIT = 30.0
#: How often `assernctl logs -f` looks for new lines.


def cmd_server(args: argparse.Namespace) -> int:
    result = ask(args, args.command, server=args.server, timeout=None)
    if result is FAILED:
        return 1
    if args.json:
        print_json(result)
    else:
        print(f"{result['message']} (now {result['state']})")
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    result = ask(args, "reload", timeout=60.0, failure="reload failed, the running configuration stays:\n")
    if result is FAILED:
        return 1
    if args.json:
        print_json(result)
    else:
        servers = result.get("servers") or []
        print(f"reloaded: {len(servers)} server(s)" + (f" ({', '.join(servers)})" if servers else ""))
    return 0


def cmd_shutdown(args: argparse.Namespace) -> int:
    """Stop the workstation daemon when one runs (every view and backend of it), else the
    instance of this folder's configuration."""
    daemon = workstation_daemon()
    if daemon is not None:
        try:
            result = request(daemon[0].control, "shutdown")
        except (ControlUnavailable, ControlError) as exc:
            print(f"assernctl: {exc}", file=sys.stderr)
            return 1
    else:
        result = ask(args, "shutdown")
    if result is FAILED:
        return 1
    pid = result.get("pid")
    deadline = time.monotonic() + SHUTDOWN_WAIT
    while isinstance(pid, int) and process_alive(pid):
        if time.monotonic() > deadline:
            print(f"assernctl: assern (pid {pid}) still stops after {SHUTDOWN_WAIT:g} s", file=sys.stderr)
            return 1
        time.sleep(0.05)
    if args.json:
        print_json({"stopped": True, "pid": pid})
    else:
        print(f"assern (pid {pid}) stopped")
    return 0
