"""Restart-policy arithmetic the config layer needs for its warnings.

A local, small copy of the idea on purpose: the supervisor owns the real backoff code;
here we only need the shortest time a policy's restarts can take.
"""

from assern.supervisor.spec import Restart, RestartPolicy


def least_restart_span(policy: RestartPolicy) -> float:
    """The shortest time `max_restarts` restarts can take, counting only the backoff.

    The k-th restart waits `min(backoff_max, backoff_initial * 2 ** (k - 1))` seconds
    (jitter ignored), so the span is the sum of those delays for k = 1..max_restarts.

    Args:
        policy: The backend's restart policy.

    Returns:
        The span in seconds.
    """
    total = 0.0
    delay = policy.backoff_initial
    for done in range(policy.max_restarts):
        if delay >= policy.backoff_max or delay == 0:
            # Every remaining delay is the same; add them at once (and never overflow).
            return total + min(delay, policy.backoff_max) * (policy.max_restarts - done)
        total += delay
        delay *= 2
    return total


def intensity_unreachable(policy: RestartPolicy) -> bool:
    """Whether the backoff keeps restarts so far apart that the intensity never trips.

    When `max_restarts` restarts cannot fit in `restart_window` seconds, the limit of
    "more than max_restarts within restart_window" is never reached and a crashing
    backend is restarted forever instead of being marked failed. Temporary children are
    never restarted, so they are never affected.
    """
    if policy.restart is Restart.TEMPORARY or policy.max_restarts == 0:
        return False
    return least_restart_span(policy) > policy.restart_window
