"""The doctor's ids a backend's status entry shows."""

from __future__ import annotations

from typing import Any

import pytest

from assern.actors.listener.page.findings import CRASH_LOOP, FAILED, NO_TOOLS, doctor_id


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"state": "failed", "restarts": 5}, FAILED),
        ({"state": "restarting", "restarts": 3}, CRASH_LOOP),
        ({"state": "starting", "restarts": 2}, CRASH_LOOP),
        ({"state": "restarting", "restarts": 1}, None),  # one restart is no loop
        ({"state": "ready", "tools": 0}, NO_TOOLS),
        ({"state": "ready", "tools": 3, "restarts": 9}, None),
        ({"state": "lazy", "tools": 0}, None),
        ({"state": "stopped"}, None),
        ({}, None),
    ],
)
def test_doctor_id(entry: dict[str, Any], expected: str | None) -> None:
    assert doctor_id(entry) == expected


def test_the_ids_are_the_doctors() -> None:
    assert (FAILED, CRASH_LOOP, NO_TOOLS) == ("backend.failed", "backend.crash_loop", "backend.no_tools")
