"""When a client's `assern serve` replaces the running daemon with one of its own build.

A shim reads the daemon's build in its welcome. When it differs from its own, the shim
supersedes the daemon (app/daemon/supersede.py) only if this install is the newer one:

- a higher version than the daemon's (an upgrade): supersede;
- a lower version (an older install's client): join the newer daemon as it is, as long
  as it reads this hello's protocol (a daemon that does not says what to do);
- the same version with other files (a checkout edited, a reinstall), or the same build
  run by another interpreter (a new virtualenv): supersede only if one of this install's
  files, or its interpreter's path, changed after the daemon started. Two installs used side
  by side that both stay unchanged then share whichever daemon started last, instead of
  replacing each other at every client start.

The shim starts `assern daemon --supersede DAEMON_BUILD`, which replaces only a daemon of
that build. Another client may have replaced it first (two clients of two new installs
starting at once): then ours stops, and the shim meets that other daemon instead; it
replaces that one in turn when this install is the newer (the same rules), else joins it.

Standard library only.
"""

from __future__ import annotations

import os
import sys
import time

from assern.app.daemon.identity import PACKAGE_ROOT, package_files

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """A version as comparable parts: numbers by value, anything else by text after them."""
    parts = []
    for part in version.replace("-", ".").split("."):
        digits = part[: len(part) - len(part.lstrip("0123456789"))]
        parts.append((int(digits) if digits else -1, part[len(digits) :]))
    return tuple(parts)


def newest_file_ns(root: str = PACKAGE_ROOT, python: str = sys.executable) -> int:
    """The latest modification time (ns) of this install's shipped files and of its
    interpreter's path (a virtualenv made after the daemon started is newer)."""
    try:
        interpreter = os.lstat(python).st_mtime_ns
    except OSError:
        interpreter = 0
    return max(interpreter, max((stat[2] for stat, _ in package_files(root)), default=0))


def should_supersede(
    mine: str,
    theirs: str,
    *,
    their_started_at: float | None,
    same_interpreter: bool = True,
    newest_ns: Callable[[], int] = newest_file_ns,
) -> bool:
    """Whether a shim of build `mine` replaces the daemon of build `theirs` (see the module);
    a daemon run by another interpreter counts as another build of the same version."""
    if mine == theirs and same_interpreter:
        return False
    my_version, their_version = mine.partition("+")[0], theirs.partition("+")[0]
    if version_key(my_version) != version_key(their_version):
        return version_key(my_version) > version_key(their_version)
    if their_started_at is None:
        return False
    return newest_ns() / 1e9 > their_started_at


def wait_for_successor(
    hello: Callable[[], Mapping[str, object] | None], old_pid: object, timeout: float
) -> Mapping[str, object] | None:
    """Ask `hello` until a daemon other than `old_pid` answers (only one that took the
    sockets over can): the one we started, or another client's that replaced the old
    daemon first. Its hello; None once `timeout` passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = hello()
        if found is not None and found.get("pid") != old_pid:
            return found
        time.sleep(0.02)
    return None


def supersede_argv(argv: list[str], their_build: str) -> list[str]:
    """The daemon command (launch.daemon_argv) that replaces only a daemon of `their_build`."""
    return [*argv, "--supersede", their_build]


__all__ = ["newest_file_ns", "should_supersede", "supersede_argv", "version_key", "wait_for_successor"]
