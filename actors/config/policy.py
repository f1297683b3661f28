"""Restart-policy checks the config layer warns about (the arithmetic is the supervisor's)."""

from assern.supervisor.intensity import backoff_exceeds_window
from assern.supervisor.spec import Restart, RestartPolicy


def intensity_unreachable(policy: RestartPolicy) -> bool:
    """Whether the backoff keeps restarts so far apart that the intensity never trips.

    When `max_restarts` restarts cannot fit in `restart_window` seconds, the limit of
    "more than max_restarts within restart_window" is never reached and a crashing
    backend is restarted forever instead of being marked failed. Temporary children are
    never restarted, so they are never affected.
    """
    if policy.restart is Restart.TEMPORARY or policy.max_restarts == 0:
        return False
    return backoff_exceeds_window(policy)
