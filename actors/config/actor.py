"""The config actor: owns the resolved configuration and tells the backends what should run.

It publishes the resolved config (a frozen snapshot) and sends the backends supervisor
the desired set of backend specs at start and after every successful reload. A reload
that fails leaves everything running as it was; the error is logged and kept for status.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import structlog
import trio

from assern.actors.backend.backends import BackendsMsg, DesiredSet
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.supervisor.cell import Cell

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class Reload:
    reason: str = "requested"


ConfigMsg = Reload


class ConfigActor:
    def __init__(
        self,
        inbox: trio.MemoryReceiveChannel[ConfigMsg],
        *,
        load: Callable[[], ResolvedConfig],
        current: Cell[ResolvedConfig],
        backends: trio.MemorySendChannel[BackendsMsg],
    ) -> None:
        self.inbox = inbox
        self._load = load
        self.current = current
        self._backends = backends
        #: the error of the last reload that failed (None after a good one)
        self.reload_error: str | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="config"):
            await self._backends.send(DesiredSet(specs=self.current.value.servers))
            task_status.started()
            async for msg in self.inbox:
                await self._reload(msg.reason)

    async def _reload(self, reason: str) -> None:
        try:
            config = self._load()
        except ConfigError as exc:
            self.reload_error = str(exc)
            log.error("config_reload_failed", reason=reason, error=str(exc))
            return
        self.reload_error = None
        self.current.set(config)
        log.info("config_reloaded", reason=reason, servers=list(config.servers))
        await self._backends.send(DesiredSet(specs=config.servers))
