"""What a check finds: a status, a stable id, the finding in one line and its fix."""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

from assern.app.ctl.doctor.facts import Facts


class Status(enum.Enum):
    OK = "ok"
    WARN = "warn"  #: works, but worth fixing (`--strict` counts it as a failure)
    FAIL = "fail"  #: something does not work


@attrs.frozen
class Finding:
    """One line of `assernctl doctor`.

    Attributes:
        id: The check's stable id (`config.resolves`, `backend.failed`, ...): the same in
            the log events and `assernctl status` lines of the same problem.
        status: ok, warn or fail.
        summary: The finding, in one line.
        fix: The command (or the exact edit) that fixes it; None for ok.
    """

    id: str
    status: Status
    summary: str
    fix: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.status is not Status.OK and not self.fix:
            raise ValueError(f"{self.id}: a {self.status.value} finding needs its fix")


def ok(check: str, summary: str) -> Finding:
    return Finding(check, Status.OK, summary)


def warn(check: str, summary: str, fix: str) -> Finding:
    return Finding(check, Status.WARN, summary, fix)


def fail(check: str, summary: str, fix: str) -> Finding:
    return Finding(check, Status.FAIL, summary, fix)


#: A check: a pure function of the facts gathered once, giving its findings (none when
#: the facts it needs are missing, e.g. the backends' states without a running instance).
Check = Callable[[Facts], list[Finding]]
