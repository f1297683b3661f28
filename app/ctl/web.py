"""`assernctl web [--print]`: the running instance's status page, in the browser.

The instance is the workstation daemon when one runs (its page shows every view,
session and shared backend), else the instance of this folder's configuration.

The instance starts the page's server at the first `web` (control socket) and answers
with a one-time sign-in address: opened in the browser, it sets the page's cookie and
redirects to the page's clean address. `--print` prints that address instead (it works
once, for a short while), for a browser elsewhere on this machine.
"""

from __future__ import annotations

import sys
import webbrowser
from typing import TYPE_CHECKING

from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.ctl.common import FAILED, ask, print_json, workstation_daemon

if TYPE_CHECKING:
    import argparse


def cmd_web(args: argparse.Namespace) -> int:
    daemon = workstation_daemon()
    if daemon is not None:  # the daemon's own page shows every view, session and backend
        try:
            result = request(daemon[0].control, "web")
        except (ControlUnavailable, ControlError) as exc:
            print(f"assernctl: {exc}", file=sys.stderr)
            return 1
    else:
        result = ask(args, "web")
    if result is FAILED:
        return 1
    if args.json:
        print_json(result)
        return 0
    login, url, ttl = result["login"], result["url"], result["expires_in_s"]
    once = f"it signs one browser in, once, within {ttl:g} s; the page is then at {url}"
    if args.print:
        print(login, flush=True)
        print(f"assernctl: {once}", file=sys.stderr)
        return 0
    try:
        opened = webbrowser.open(login)
    except webbrowser.Error:
        opened = False
    if opened:
        print(f"opened the status page: {url}")
    else:
        sys.stdout.flush()
        print(f"assernctl: no browser could be started here; open this address ({once}):", file=sys.stderr)
        print(login, flush=True)
    return 0
