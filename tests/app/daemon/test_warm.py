"""What a successor warms: read from the old daemon's `contexts`, and how it waits for the
backends that ran there (a bound, no backend holding the takeover)."""

from __future__ import annotations

from typing import Any

import attrs
import outcome
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from assern.actors.backend.backends import BackendsMsg, Directory, ServerCommand
from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.messages import BackendRequest
from assern.actors.backend.status import BackendState, BackendStatus
from assern.app.daemon.warm import (
    WARM_BOUND,
    WARMING,
    NotWarm,
    WarmTarget,
    plan,
    running_backends,
    stated_context,
    unready,
    warm_backends,
)
from assern.supervisor.cell import Cell


def context(cwd: str = "/work/a", **env: str) -> dict[str, Any]:
    return {"cwd": cwd, "env": {"HOME": "/home/me", **env}, "config": None, "project": None, "profile": None}


def session(view: str, *, resumes: bool = True, name: str = "session-1", **fields: Any) -> dict[str, Any]:
    return {"session": name, "view": view, "resumes": resumes, "context": context(), **fields}


def test_one_context_per_view_that_a_moving_session_uses() -> None:
    first = session("a@1", name="session-1")
    first["context"] = context("/work/a", TOKEN="one")
    answer = {
        "sessions": [
            first,
            session("a@1", name="session-2"),
            session("b@2", name="session-3", resumes=False),  # stays with the old daemon
            session("c@3", name="session-4"),
        ],
        "views": [
            {"label": "a@1", "running": ["alpha", "later"]},
            {"label": "b@2", "running": ["alpha"]},
            {"label": "c@3", "running": []},
        ],
    }
    found = plan(answer)
    assert found.skipped == ()
    assert found.targets == (
        WarmTarget(view="a@1", context=first["context"], running=("alpha", "later"), sessions=2),
        WarmTarget(view="c@3", context=context(), running=(), sessions=1),
    )
    assert found.targets[0].context["env"]["TOKEN"] == "one"  # the first session's, whole
    assert "one" not in repr(found.targets[0])  # environment values stay out of reprs


def test_a_session_whose_view_is_not_listed_is_still_warmed_with_no_backend_waited_for() -> None:
    found = plan({"sessions": [session("a@1")], "views": []})
    assert [(t.view, t.running) for t in found.targets] == [("a@1", ())]


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ([], "the answer is not an object"),
        ({"sessions": {}, "views": []}, "the answer has no sessions and views lists"),
        ({"sessions": []}, "the answer has no sessions and views lists"),
    ],
)
def test_an_answer_of_another_shape_warms_nothing_and_says_why(answer: object, why: str) -> None:
    assert plan(answer).targets == ()
    assert plan(answer).skipped == (why,)


def test_entries_that_cannot_be_read_are_skipped_with_why_and_the_rest_is_warmed() -> None:
    bad_env = session("x@1", name="session-2")
    bad_env["context"] = {**context(), "env": {"SECRET": 42}}
    relative = session("x@1", name="session-3")
    relative["context"] = context("work/a")
    answer = {
        "sessions": [
            "not an object",
            bad_env,
            relative,
            session("x@1", name="session-4", context=None),
            {"session": "session-5", "resumes": True, "context": context()},
            session("a@1", name="session-6"),
        ],
        "views": [
            {"label": "a@1", "running": ["alpha", 3]},
            {"running": []},
        ],
    }
    found = plan(answer)
    assert [(t.view, t.running, t.sessions) for t in found.targets] == [("a@1", (), 1)]
    assert found.skipped == (
        "view entry 0: needs a label and a list of running backend names",
        "view entry 1: needs a label and a list of running backend names",
        "session entry 0: not an object",
        "session session-2: env must map names to strings",
        "session session-3: cwd must be an absolute path",
        "session session-4: no context object",
        "session session-5: no view label",
    )
    assert "42" not in " ".join(found.skipped)


def test_a_hellos_stated_context_is_its_folder_environment_and_flags() -> None:
    params = {**context(), "protocol": 2, "build": "0.1.0+abc", "resumes": True}
    assert stated_context(params) == context()


# ------------------------------------------------------------------ the backends


@attrs.define
class View:
    """A backend's readable side whose state the test (or the fake supervisor) sets."""

    name: str
    state: BackendState
    last_error: str | None = None
    pid: int | None = None
    spec: Any = None
    listing: Any = None
    fast_path: bool = False

    @property
    def status(self) -> BackendStatus:
        return BackendStatus(
            server=self.name, transport="stdio", state=self.state, last_error=self.last_error, pid=self.pid
        )

    def splice(self, *_args: Any, **_kwargs: Any) -> None:
        return None


@attrs.define
class Tree:
    settled: trio.Event
    directory: Cell[Directory]
    backends_send: trio.MemorySendChannel[BackendsMsg]


def tree_of(views: dict[str, View]) -> tuple[Tree, trio.MemoryReceiveChannel[BackendsMsg]]:
    send, receive = trio.open_memory_channel[BackendsMsg](8)
    handles = {}
    for name, view in views.items():
        mailbox, _ = trio.open_memory_channel[BackendRequest](1)
        handles[name] = BackendHandle(name=name, mailbox=mailbox, view=view)
    return Tree(settled=trio.Event(), directory=Cell(handles), backends_send=send), receive


def test_only_the_backends_whose_process_runs_or_starts_count_as_running() -> None:
    tree, _ = tree_of({state.value: View(state.value, state) for state in BackendState})
    assert running_backends(tree.directory.value) == ["starting", "ready", "restarting"]


async def test_warming_starts_the_sleeping_ones_by_hand_and_waits_for_every_one_that_ran(
    autojump_clock: trio.testing.MockClock,
) -> None:
    views = {
        "alpha": View("alpha", BackendState.STARTING),
        "later": View("later", BackendState.LAZY),
        "broken": View("broken", BackendState.STARTING),
        "idle": View("idle", BackendState.LAZY),  # did not run in the old daemon
    }
    tree, commands = tree_of(views)
    asked: list[tuple[str, str]] = []

    async def supervisor() -> None:
        async for msg in commands:
            assert isinstance(msg, ServerCommand)
            asked.append((msg.action, msg.server))
            views[msg.server].state = BackendState.STARTING
            msg.reply.send_nowait(outcome.Value(f"started {msg.server}"))

    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(supervisor)
            nursery.start_soon(warm_backends, tree, "a@1", ("alpha", "later", "broken", "gone"))
            await trio.testing.wait_all_tasks_blocked()
            assert asked == []  # nothing is started before the view's first starts are done
            tree.settled.set()
            await trio.testing.wait_all_tasks_blocked()
            assert asked == [("start", "later")]
            views["alpha"].state, views["alpha"].pid = BackendState.READY, 41
            views["later"].state, views["later"].pid = BackendState.READY, 42
            views["broken"].state, views["broken"].last_error = BackendState.FAILED, "exit 1"
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
    started = [(e["server"], e["pid"], e["reason"]) for e in logs if e["event"] == "backend_started"]
    assert sorted(started) == [("alpha", 41, WARMING), ("later", 42, WARMING)]
    assert views["idle"].state is BackendState.LAZY
    assert unready(tree.directory.value, "a@1", ("alpha", "later", "broken", "gone")) == [
        NotWarm(view="a@1", server="broken", state="failed", why="exit 1"),
        NotWarm(view="a@1", server="gone", state="absent", why="not configured here"),
    ]


async def test_a_backend_slow_to_start_is_left_starting_when_the_bound_passes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tree, _ = tree_of({"slow": View("slow", BackendState.STARTING)})
    tree.settled.set()
    with trio.move_on_after(WARM_BOUND) as bound:
        await warm_backends(tree, "a@1", ("slow",))
    assert bound.cancelled_caught
    assert [entry.document() for entry in unready(tree.directory.value, "a@1", ("slow",))] == [
        {
            "view": "a@1",
            "server": "slow",
            "state": "starting",
            "why": "not ready within the warming bound (10 s)",
        }
    ]
