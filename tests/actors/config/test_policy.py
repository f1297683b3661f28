"""When the config layer warns that a crashing server would be restarted forever."""

from __future__ import annotations

from assern.actors.config.policy import intensity_unreachable
from assern.supervisor.spec import Restart, RestartPolicy


def test_intensity_unreachable() -> None:
    reachable = RestartPolicy(max_restarts=5, restart_window=60, backoff_initial=0.5)
    assert not intensity_unreachable(reachable)
    unreachable = RestartPolicy(max_restarts=6, restart_window=15, backoff_initial=0.5)
    assert intensity_unreachable(unreachable)  # 0 + 0.5 + 1 + 2 + 4 + 8 = 15.5s of backoff > 15s
    assert not intensity_unreachable(
        RestartPolicy(restart=Restart.TEMPORARY, max_restarts=5, restart_window=1)
    )
    assert not intensity_unreachable(RestartPolicy(max_restarts=0, restart_window=1))
