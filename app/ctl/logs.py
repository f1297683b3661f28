"""`assernctl logs`: the JSON-line log files printed readably, filtered, and followed."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from assern.actors.config.home import default_assern_home
from assern.app.ctl.common import Usage
from assern.app.logtail import Follower, LogFilter, current_size, format_line, last_lines
from assern.app.running import environ
from assern.supervisor.io.logs import LOG_FILE

if TYPE_CHECKING:
    import argparse

#: How often `assernctl logs -f` looks for new lines.
FOLLOW_INTERVAL = 0.2


def cmd_logs(args: argparse.Namespace) -> int:
    try:
        keep = LogFilter(server=args.server, level=args.level, grep=args.grep)
    except ValueError as exc:
        raise Usage(str(exc)) from None
    path = default_assern_home(environ()) / "logs" / LOG_FILE
    show = (lambda line: line) if args.json else format_line
    offset = current_size(path)
    try:
        for line in last_lines(path, keep, None if args.lines < 0 else args.lines, upto=offset):
            print(show(line))
        sys.stdout.flush()
        if not args.follow:
            return 0
        follower = Follower(path, offset=offset)
        try:
            while True:
                for line in follower.poll():
                    if keep.accepts(line):
                        print(show(line), flush=True)
                time.sleep(FOLLOW_INTERVAL)
        finally:
            follower.close()
    except KeyboardInterrupt:
        return 0
