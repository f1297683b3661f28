"""`assernctl`: see and steer assern.

Most commands talk to the running instance of the current directory's resolved
configuration through its control socket (docs/operations.md): `status`, `list`
(show.py), `call` (call.py), `restart|stop|start SERVER`, `reload`, `shutdown`
(steer.py). Without one, `list` and `call` start the backends themselves (direct
mode), as `assern list` does. `logs` (logs.py) reads the JSON-lines log files and
needs no instance; `config …` (config/) reads the configuration and starts nothing.

Only the direct mode imports the tree, so the other commands answer fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from assern.app.loading import FullCollectionsDeferred

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """`assernctl`: `config …` inspects configuration; everything else talks to assern."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["config"]:
        with FullCollectionsDeferred():
            from assern.app.ctl.config import config_main

        return config_main(args[1:])
    with FullCollectionsDeferred():
        from assern.app.ctl.parser import ctl_main

    return ctl_main(args)
