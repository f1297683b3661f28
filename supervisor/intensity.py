"""Pure restart arithmetic: the sliding restart window and the backoff between restarts.

Nothing here reads a clock or draws a random number: callers pass `trio.current_time()`
values and a `u` drawn from their own `random.Random`, so tests can state exact times.

The first restart within the window is immediate, as in OTP (a child that ran
fine and then crashed once is back as fast as it can start); the backoff holds off
only a child that fails again within `restart_window`.

Worked example (`max_restarts=3`, `restart_window=60`, `backoff_initial=1`,
`backoff_max=8`, no jitter): a child that crashes as soon as it starts is started at
t = 0, 0, 1 and 3, and is marked failed at t = 3, since its fourth crash finds three
restarts in the window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assern.supervisor.spec import RestartPolicy


class RestartLedger:
    """The restarts of one child (or one supervisor) within a sliding time window.

    OTP's rule: a restart is refused when `max_restarts` restarts already happened
    within the last `window` seconds. A child that always crashes is therefore started
    exactly `max_restarts + 1` times.
    """

    __slots__ = ("_max_restarts", "_stamps", "_window")

    def __init__(self, max_restarts: int, window: float) -> None:
        """Create an empty ledger.

        Args:
            max_restarts: restarts allowed within `window` (0 refuses every restart).
            window: length of the sliding window, in seconds.

        Raises:
            ValueError: `max_restarts < 0` or `window <= 0`.
        """
        if max_restarts < 0:
            raise ValueError("max_restarts must be >= 0")
        if window <= 0:
            raise ValueError("window must be > 0")
        self._max_restarts = max_restarts
        self._window = window
        self._stamps: list[float] = []

    @classmethod
    def for_policy(cls, policy: RestartPolicy) -> RestartLedger:
        """A ledger for one child's `max_restarts` within `restart_window`."""
        return cls(policy.max_restarts, policy.restart_window)

    def admit(self, now: float) -> bool:
        """Decide on a restart at time `now` and record it when allowed.

        Entries older than `now - window` are dropped first. If `max_restarts` remain,
        the restart is refused (the child is exhausted) and nothing is recorded;
        otherwise `now` is recorded.

        Returns:
            True if the restart may go ahead.
        """
        horizon = now - self._window
        self._stamps = [stamp for stamp in self._stamps if stamp >= horizon]
        if len(self._stamps) >= self._max_restarts:
            return False
        self._stamps.append(now)
        return True

    def reset(self) -> None:
        """Forget every recorded restart (a manual restart starts afresh)."""
        self._stamps.clear()

    @property
    def stamps(self) -> tuple[float, ...]:
        """The recorded restart times still in the ledger, oldest first."""
        return tuple(self._stamps)

    def __len__(self) -> int:
        return len(self._stamps)

    def __repr__(self) -> str:
        return (
            f"RestartLedger(max_restarts={self._max_restarts}, window={self._window!r}, "
            f"stamps={self._stamps!r})"
        )


def backoff_delay(n: int, policy: RestartPolicy, u: float = 0.0) -> float:
    """The wait before the `n`-th restart in the window (`n` is the ledger length).

    0 for the first restart in the window; after that
    `min(backoff_max, backoff_initial * 2 ** (n - 2)) * (1 + jitter * u)`. Using the
    ledger length means old failures age out of the window and the backoff shrinks
    by itself, back to an immediate restart once the window holds no other.

    Args:
        n: 1 for the first restart in the window, 2 for the second, and so on.
        policy: supplies `backoff_initial`, `backoff_max` and `jitter`.
        u: a draw in [0, 1) from an injected `random.Random`; 0 means no jitter.

    Returns:
        The delay in seconds.

    Raises:
        ValueError: `n < 1` or `u` outside [0, 1).
    """
    if n < 1:
        raise ValueError("n counts restarts from 1")
    if not 0.0 <= u < 1.0:
        raise ValueError("u must be in [0, 1)")
    if n == 1:
        return 0.0
    # Float arithmetic saturates to inf instead of raising for huge n; cap the exponent
    # below float's range so `2.0 ** ...` itself cannot overflow.
    growth = 2.0 ** min(n - 2, 1000)
    base = min(policy.backoff_max, policy.backoff_initial * growth)
    return base * (1.0 + policy.jitter * u)


def backoff_total(policy: RestartPolicy) -> float:
    """The least time `max_restarts` back-to-back restarts take (delays without jitter)."""
    if policy.backoff_initial == 0 or policy.max_restarts < 2:
        return 0.0
    total = 0.0
    for n in range(2, policy.max_restarts + 1):
        delay = backoff_delay(n, policy)
        if delay >= policy.backoff_max:
            # Capped from here on: the rest of the sum is a product.
            return total + delay * (policy.max_restarts - n + 1)
        total += delay
    return total


def backoff_exceeds_window(policy: RestartPolicy) -> bool:
    """True when the backoff alone keeps restarts from ever exhausting the policy.

    If the delays for `max_restarts` restarts add up to more than `restart_window`, the
    oldest restart always leaves the window before the limit is reached: a child that
    keeps crashing is restarted forever instead of being marked failed (OTP's
    "sustained rate" concern). Config loading warns about it.
    """
    return backoff_total(policy) > policy.restart_window
