"""Which of `assernctl doctor`'s findings a backend's status entry shows (pure).

The ids are the doctor's own, so a person who sees one on the status page finds the
same id, its explanation and its fix in `assernctl doctor`'s output and in the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Out of restarts: it stays down until started by hand.
FAILED = "backend.failed"
#: It keeps exiting and being restarted.
CRASH_LOOP = "backend.crash_loop"
#: It runs, but offers no tool.
NO_TOOLS = "backend.no_tools"
#: Restarts after which a backend that is down again counts as crash-looping.
LOOP_RESTARTS = 2


def doctor_id(backend: Mapping[str, Any]) -> str | None:
    """The doctor's id for what is wrong with one backend (`status`'s entry), if anything."""
    state = backend.get("state")
    if state == "failed":
        return FAILED
    restarts = backend.get("restarts")
    if state in ("restarting", "starting") and isinstance(restarts, int) and restarts >= LOOP_RESTARTS:
        return CRASH_LOOP
    if state == "ready" and backend.get("tools") == 0:
        return NO_TOOLS
    return None
