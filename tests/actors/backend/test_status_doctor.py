"""A backend's state gives the doctor id of its problem, for status lines and log events."""

from __future__ import annotations

import pytest

from assern.actors.backend.status import (
    CRASH_LOOP_RESTARTS,
    BackendState,
    BackendStatus,
    doctor_field,
    doctor_id,
)


@pytest.mark.parametrize(
    ("state", "restarts", "tools", "expected"),
    [
        ("failed", 0, 0, "backend.failed"),
        ("failed", 7, 3, "backend.failed"),
        ("restarting", CRASH_LOOP_RESTARTS, 0, "backend.crash_loop"),
        ("starting", CRASH_LOOP_RESTARTS + 5, 0, "backend.crash_loop"),
        ("restarting", CRASH_LOOP_RESTARTS - 1, 0, None),  # a crash or two: it restarts
        ("ready", CRASH_LOOP_RESTARTS, 2, None),  # up again
        ("ready", 0, 0, "backend.no_tools"),
        ("ready", 0, 1, None),
        ("lazy", 0, 0, None),  # not started: its tools are not known yet
        ("stopped", 9, 0, None),
        ("a state of a newer build", 9, 0, None),
    ],
)
def test_each_state_has_its_doctor_id(state: str, restarts: int, tools: int, expected: str | None) -> None:
    assert doctor_id(state, restarts=restarts, tools=tools) == expected


def test_a_log_event_carries_the_id_only_when_there_is_a_problem() -> None:
    failed = BackendStatus(server="a", transport="stdio", state=BackendState.FAILED)
    assert doctor_field(failed) == {"doctor": "backend.failed"}
    fine = BackendStatus(server="a", transport="stdio", state=BackendState.READY, tools=4)
    assert doctor_field(fine) == {}
