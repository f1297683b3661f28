"""The config actor: owns the resolved configuration and tells the backends what should run.

It publishes the resolved config (a frozen snapshot) and sends the backends supervisor
the desired set of backend specs at start and after every successful reload. Reloads
come from a `Reload` message (SIGHUP, `assernctl reload`) and from the file watcher,
which polls every file that contributed to the config and every file that would if it
were created, and the trust store with the files of folders that wait for it (a grant
applies at once: the folder's servers start, and sessions get `list_changed`). A reload
that fails leaves everything running as it was; the error is logged and kept for
status, and the next good save applies. A reload whose folder's files changed since
they were trusted is not a failure: those files stop applying (trust.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import structlog
import trio

from assern.actors.config.spec import ConfigError, DesiredSet, ResolvedConfig
from assern.actors.config.watch import POLL_INTERVAL, QUIET_PERIOD, FileWatcher, StatFn, stat_file

if TYPE_CHECKING:
    from collections.abc import Callable

    from assern.supervisor.cell import Cell

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class Reload:
    reason: str = "requested"


ConfigMsg = Reload


def log_trust(config: ResolvedConfig) -> None:
    """One log line per folder whose own files wait for trust (and for an unusable store)."""
    report = config.trust
    if report.store_problem is not None:
        log.error("trust_store_ignored", store=str(report.store), problem=report.store_problem)
    for untrusted in report.untrusted:
        log.warning(
            "project_untrusted",
            folder=untrusted.project.folder,
            servers=list(untrusted.project.servers),
            reason=untrusted.reason,
            command=untrusted.command,
        )


class ConfigActor:
    """Resolves the configuration again on request or when a watched file changes.

    Args:
        inbox: Its mailbox (`Reload` messages).
        load: Resolves the configuration from the files and the environment.
        current: The cell holding the config in force.
        backends: The backends supervisor's mailbox, for `DesiredSet`s.
        watch_interval: Seconds between two looks at the files; None turns watching off.
        quiet: How long the files must stay unchanged before a change reloads, so a
            burst of writes makes one reload.
        stat: How to stat a file (tests fake the file system).
    """

    def __init__(
        self,
        inbox: trio.MemoryReceiveChannel[ConfigMsg],
        *,
        load: Callable[[], ResolvedConfig],
        current: Cell[ResolvedConfig],
        backends: trio.abc.SendChannel[DesiredSet],
        watch_interval: float | None = POLL_INTERVAL,
        quiet: float = QUIET_PERIOD,
        stat: StatFn = stat_file,
    ) -> None:
        self.inbox = inbox
        self._load = load
        self.current = current
        self._backends = backends
        self._watch_interval = watch_interval
        self._quiet = quiet
        self._stat = stat
        self._reloading = trio.Lock()
        #: the error of the last reload that failed (None after a good one)
        self.reload_error: str | None = None
        #: the file the last failed reload blamed, watched until a reload succeeds
        self._failed_file: Path | None = None

    def watched(self) -> tuple[Path, ...]:
        """Every file whose change should reload: contributing, would-be and broken ones."""
        config = self.current.value
        paths = [*config.files, *config.potential_files, *config.trust.watched]
        if self._failed_file is not None:
            paths.append(self._failed_file)
        return tuple(dict.fromkeys(paths))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="config"):
            watcher = None
            if self._watch_interval is not None:
                watcher = FileWatcher(
                    self.watched, stat=self._stat, interval=self._watch_interval, quiet=self._quiet
                )
                watcher.prime()
            log_trust(self.current.value)
            await self._backends.send(DesiredSet(specs=self.current.value.servers))
            task_status.started()
            async with trio.open_nursery() as nursery:
                if watcher is not None:
                    nursery.start_soon(self._watch, watcher)
                async for msg in self.inbox:
                    await self._reload(msg.reason)
                nursery.cancel_scope.cancel()

    async def _watch(self, watcher: FileWatcher) -> None:
        while True:
            changed = await watcher.next_change()
            log.info("config_files_changed", files=[str(path) for path in changed])
            await self._reload("files changed: " + ", ".join(str(path) for path in changed))

    async def _reload(self, reason: str) -> None:
        """Resolve again; on success publish the config and send the new desired set.

        Reloads never overlap, so desired sets reach the backends in the order the
        configs were read.
        """
        async with self._reloading:
            try:
                config = self._load()
            except ConfigError as exc:
                self.reload_error = str(exc)
                self._failed_file = Path(exc.file) if exc.file is not None else None
                log.error("config_reload_failed", reason=reason, error=str(exc))
                return
            except Exception as exc:
                # A bug in resolution must not crash this actor: under rest_for_one that
                # would restart every backend. Only the type is logged: a message or a
                # traceback with locals could carry an env value.
                self.reload_error = f"internal error while reloading ({type(exc).__name__}); please report it"
                log.error("config_reload_failed", reason=reason, error=self.reload_error)
                return
            self.reload_error = None
            self._failed_file = None
            self.current.set(config)
            log.info("config_reloaded", reason=reason, servers=list(config.servers))
            for warning in config.warnings:
                log.warning("config_warning", warning=warning)
            log_trust(config)
            await self._backends.send(DesiredSet(specs=config.servers))
