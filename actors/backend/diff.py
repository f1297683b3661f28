"""Pure: what to start, stop and restart to go from the running specs to the desired ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assern.actors.config.spec import ServerSpec


@attrs.frozen(kw_only=True)
class SpecDiff:
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    restart: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()


def diff_specs(running: Mapping[str, ServerSpec], desired: Mapping[str, ServerSpec]) -> SpecDiff:
    """Names to start (new), stop (gone), restart (spec changed) and keep (same spec).

    Order follows `desired` for starts and restarts and `running` for stops.
    """
    return SpecDiff(
        start=tuple(name for name in desired if name not in running),
        stop=tuple(name for name in running if name not in desired),
        restart=tuple(name for name in desired if name in running and running[name] != desired[name]),
        unchanged=tuple(name for name in desired if name in running and running[name] == desired[name]),
    )
