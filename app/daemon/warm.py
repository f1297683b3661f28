"""What a successor warms before it takes the daemon's sockets (supersede.py, step 2).

The running daemon answers `contexts` (host.py) with, for each session, what its
connection stated in its hello (working folder, environment, `--config`, `--project`,
`--profile`: what the daemon keeps to resolve its view), whether its `assern serve`
moves sessions to a successor (`resumes`), and its view; and for each view, the backends
that run there (starting, ready or restarting: not lazy, dormant, failed or stopped).
The environment is the one the session sent, whole: resolved from it, a view has the
same fingerprint and its backends the same keys and process environment as when the
moving session's own hello reaches the successor. The answer is kept in memory only:
never logged, never in status.

The successor keeps one context per view that a moving session uses (`plan`: the first
such session's), skipping what it cannot read, and resolves each as a new connection's
(a folder that is gone, or a configuration that no longer resolves, is skipped and
logged). Starting a view starts its eager backends, as the moving session's arrival
would; the successor then starts the lazy backends that ran in the old daemon, and
waits for the backends that ran there (`warm_backends`), at most `WARM_BOUND` seconds in
all. A backend that fails or is slow does not hold the takeover: the log says what was
not warm. A warmed view that no session joins is retired as any view is, `view_grace`
seconds after the takeover, and its backends with it; a lazy backend woken for warming
sleeps after its `idle_timeout` as after a call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import structlog
import trio

from assern.actors.backend.backends import BackendsMsg, ServerCommand
from assern.actors.backend.status import BackendState
from assern.app.daemon.hello import BadHello, check_context
from assern.supervisor.mailbox import ActorGone, Reply, call

if TYPE_CHECKING:
    from assern.actors.backend.backends import Directory
    from assern.supervisor.cell import Cell

log = structlog.get_logger()

#: Seconds a successor waits in all for the backends it warms before it takes the sockets.
WARM_BOUND = 10.0
#: Seconds between two looks at the states of the backends being warmed.
WARM_POLL = 0.02
#: The reason the log gives for a backend started before any session asked for it.
WARMING = "warming for a successor"
#: What a session's hello states to have its view resolved (host.py keeps it).
CONTEXT_KEYS = ("cwd", "env", "config", "project", "profile")
#: The states of a backend whose process runs or is being started.
RUNNING = frozenset({BackendState.STARTING, BackendState.READY, BackendState.RESTARTING})
#: The states a warmed backend stops being waited for in, unready.
GIVEN_UP = frozenset({BackendState.FAILED, BackendState.STOPPED})
#: The states a backend is started by hand from.
ASLEEP = frozenset({BackendState.LAZY, BackendState.DORMANT})


class ViewTree(Protocol):
    """What warming uses of a started view's tree (app/tree.py's `Tree`)."""

    settled: trio.Event
    directory: Cell[Directory]
    backends_send: trio.MemorySendChannel[BackendsMsg]


def _strings(items: list[Any]) -> bool:
    return all(isinstance(item, str) for item in items)


def stated_context(params: Mapping[str, Any]) -> dict[str, Any]:
    """What a hello's `params` state to resolve the connection's view."""
    return {key: params.get(key) for key in CONTEXT_KEYS}


def running_backends(directory: Directory) -> list[str]:
    """The backends of a view's directory (its own names) whose process runs or starts."""
    return [name for name, handle in directory.items() if handle.state in RUNNING]


@attrs.frozen(kw_only=True)
class WarmTarget:
    """One view of the old daemon to warm: a context that resolves it, and its backends
    that ran there."""

    #: the old daemon's label of the view (for the log)
    view: str
    #: one moving session's stated context (environment values: never logged)
    context: Mapping[str, Any] = attrs.field(repr=False)
    running: tuple[str, ...]
    #: the sessions of that view that move to the successor
    sessions: int


@attrs.frozen
class Plan:
    """What to warm, and what of the old daemon's answer was skipped and why."""

    targets: tuple[WarmTarget, ...]
    skipped: tuple[str, ...] = ()


def plan(answer: object) -> Plan:
    """The views to warm from the old daemon's `contexts` answer (see the module): one per
    view that a moving session uses. Entries it cannot read are skipped, with why (no
    environment value is ever part of a reason)."""
    if not isinstance(answer, Mapping):
        return Plan((), ("the answer is not an object",))
    sessions, views = answer.get("sessions"), answer.get("views")
    if not isinstance(sessions, list) or not isinstance(views, list):
        return Plan((), ("the answer has no sessions and views lists",))
    skipped: list[str] = []
    running: dict[str, tuple[str, ...]] = {}
    for index, view in enumerate(views):
        label = view.get("label") if isinstance(view, Mapping) else None
        names = view.get("running") if isinstance(view, Mapping) else None
        if not isinstance(label, str) or not isinstance(names, list) or not _strings(names):
            skipped.append(f"view entry {index}: needs a label and a list of running backend names")
            continue
        running[label] = tuple(names)
    chosen: dict[str, tuple[Mapping[str, Any], int]] = {}
    for index, session in enumerate(sessions):
        if not isinstance(session, Mapping):
            skipped.append(f"session entry {index}: not an object")
            continue
        if session.get("resumes") is not True:
            continue  # its `assern serve` does not move: it stays with the old daemon
        label, context = session.get("view"), session.get("context")
        name = session.get("session") if isinstance(session.get("session"), str) else f"entry {index}"
        if not isinstance(label, str):
            skipped.append(f"session {name}: no view label")
            continue
        if not isinstance(context, Mapping):
            skipped.append(f"session {name}: no context object")
            continue
        try:
            check_context(context)
        except BadHello as exc:
            skipped.append(f"session {name}: {exc}")
            continue
        first, count = chosen.get(label, (context, 0))
        chosen[label] = (first, count + 1)
    targets = tuple(
        WarmTarget(view=label, context=context, running=running.get(label, ()), sessions=count)
        for label, (context, count) in chosen.items()
    )
    return Plan(targets, tuple(skipped))


@attrs.frozen(kw_only=True)
class NotWarm:
    """A backend that ran in the old daemon and was not ready when warming ended."""

    view: str
    server: str
    state: str
    why: str

    def document(self) -> dict[str, str]:
        return attrs.asdict(self)


async def warm_backends(tree: ViewTree, label: str, running: tuple[str, ...]) -> None:
    """Start the backends named `running` in a started view's `tree` (the lazy and dormant
    ones by hand, once the view's first starts are done) and wait until none of them is
    still on its way (the caller bounds it; `unready` says what was not warm)."""
    await tree.settled.wait()  # every backend of the view had its first start (a lazy one its probe)
    began = trio.current_time()
    pending = [name for name in running if name in tree.directory.value]
    asked: set[str] = set()
    while pending:
        for name in list(pending):
            handle = tree.directory.value.get(name)
            status = handle.status if handle is not None else None
            if status is None or status.state in GIVEN_UP:
                pending.remove(name)
            elif status.state is BackendState.READY:
                pending.remove(name)
                log.info(
                    "backend_started",
                    server=name,
                    view=label,
                    reason=WARMING,
                    pid=status.pid,
                    waited_s=round(trio.current_time() - began, 3),
                )
            elif status.state in ASLEEP and name not in asked:
                asked.add(name)
                await _start(tree, name)
        if pending:
            await trio.sleep(WARM_POLL)


async def _start(tree: ViewTree, name: str) -> None:
    """Ask the view's backends supervisor to start `name` (as `assernctl start` does)."""

    def command(reply: Reply[str]) -> BackendsMsg:
        return ServerCommand(action="start", server=name, reply=reply)

    try:
        await call(tree.backends_send, command)
    except (KeyError, ValueError, ActorGone, trio.ClosedResourceError) as exc:
        log.warning("daemon_warm_start_failed", server=name, error=str(exc))


def unready(directory: Directory, label: str, running: tuple[str, ...]) -> list[NotWarm]:
    """The backends of `running` not ready in a view's `directory`, and why."""
    found = []
    for name in running:
        handle = directory.get(name)
        if handle is None:
            found.append(NotWarm(view=label, server=name, state="absent", why="not configured here"))
            continue
        status = handle.status
        if status.state is BackendState.READY:
            continue
        if status.state in GIVEN_UP:
            why = status.last_error or status.last_exit or f"it is {status.state.value}"
        else:
            why = status.last_error or f"not ready within the warming bound ({WARM_BOUND:g} s)"
        found.append(NotWarm(view=label, server=name, state=status.state.value, why=why))
    return found
