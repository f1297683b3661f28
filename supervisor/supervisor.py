"""A generic supervisor: Erlang/OTP restart semantics on a trio nursery.

```python
async with open_supervisor(SupervisorSpec(strategy=Strategy.REST_FOR_ONE), specs) as sup:
    await sup.start_child(ChildSpec(id="extra", start=run_extra))
    print(sup.status()["extra"].state)
```

How it works:

- Every child incarnation is a task in the supervisor's nursery, started with
  `await nursery.start(...)`, inside a cancel scope of its own. That nursery is
  shielded from outside cancellation, so only the supervisor decides when, and in which
  order, children stop. Static children start in list order and stop in reverse order.
- When an incarnation ends, its task classifies the exit (`exits.py`) and, holding the
  supervisor's lock, applies the child's restart type, its per-child intensity
  (`RestartLedger`), the supervisor-wide intensity and the strategy. Siblings the
  strategy takes down are terminated in reverse start order, each bounded by its
  `shutdown_timeout`.
- Restarts wait for their backoff on `trio.sleep_until` (so `MockClock` governs them)
  in a separate task, without the lock, and then start the affected children in order.
- Structural operations (starting, handling an exit, terminating, restarting) take the
  lock one at a time, as OTP's supervisor process handles one message at a time. Under
  one_for_all and rest_for_one the lock stays held while a child starts, so a group
  starts strictly in order (and a child must not call this supervisor's methods before
  it called `started()`); under one_for_one the lock is released while a child starts,
  so a slow backend delays neither its siblings' starts nor their restarts.
- `shutdown_timeout` bounds each wait for a cancelled child: `None` waits as long as
  the child takes (OTP's `infinity`, right for nested supervisors), 0 does not wait.
  trio cannot kill a task: a child still running after its timeout is left to finish,
  and the nursery still waits for it before `open_supervisor` returns.

Cancellation: when the `async with open_supervisor(...)` block exits for any reason
(including cancellation), the children are terminated in reverse start order, each
wait shielded and bounded by its `shutdown_timeout`; the nursery then guarantees that no
task outlives the supervisor.
"""

from __future__ import annotations

import contextlib
import functools
import math
import random
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from assern.supervisor.children import Child, Incarnation, Plan, Readiness, stopped_changes, waiting_state
from assern.supervisor.exits import Exit, error_of, run_child, wants_restart
from assern.supervisor.intensity import RestartLedger, backoff_delay
from assern.supervisor.spec import ChildSpec, Restart, Strategy, SupervisorSpec
from assern.supervisor.status import (
    ChildExhausted,
    ChildState,
    ChildStatus,
    SupervisorError,
    SupervisorExhausted,
)
from assern.supervisor.trionics import raise_unwrapped, run_shielded_nursery, sole_member

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence


@final
class Supervisor:
    """A running supervisor; get one from `open_supervisor`, never construct it.

    Reading methods (`status`, `child_ids`) never block. The async methods take the
    supervisor's lock, so they first wait for an operation in progress (a restart,
    siblings being terminated; under group strategies also a child starting).
    """

    def __init__(
        self,
        spec: SupervisorSpec,
        nursery: trio.Nursery,
        owner_scope: trio.CancelScope,
        rng: random.Random,
        on_change: Callable[[ChildStatus], None] | None,
    ) -> None:
        self._spec = spec
        # Children, their exit handling and pending restarts run in `nursery`, which is
        # shielded: only the supervisor decides when (and in which order) they stop.
        # `owner_scope` covers the `async with` block; failing cancels it.
        self._nursery = nursery
        self._owner_scope = owner_scope
        self._rng = rng
        self._on_change = on_change
        self._children: list[Child] = []
        self._by_id: dict[str, Child] = {}
        self._lock = trio.Lock()
        self._ledger = None if spec.intensity is None else RestartLedger(spec.intensity, spec.period)
        self._plans: set[Plan] = set()
        self._op_scopes: set[trio.CancelScope] = set()
        self._closing = False
        self._failure: SupervisorError | None = None

    @property
    def spec(self) -> SupervisorSpec:
        return self._spec

    # ------------------------------------------------------------------ reading

    def status(self) -> Mapping[str, ChildStatus]:
        """A snapshot of every child, keyed by id, in start order."""
        return {child.spec.id: child.status for child in self._children}

    def child_ids(self) -> tuple[str, ...]:
        """The children's ids in start order (the order they were added in)."""
        return tuple(child.spec.id for child in self._children)

    # ------------------------------------------------------------------ dynamic children

    async def start_child(self, spec: ChildSpec) -> None:
        """Add a child after the existing ones and start it.

        Returns once the child called `task_status.started()`, or once its first
        incarnation ended and its restart policy was applied (a restart scheduled, or the
        child marked stopped or failed): a crashing child neither hangs nor raises here.
        Under one_for_all and rest_for_one, a child added while a group restart is
        waiting for its backoff joins that restart instead of starting at once.

        Cancellation: the child's startup runs in the caller's context until it calls
        `started()`, so cancelling the caller cancels that incarnation: the child is
        marked STOPPED ("cancelled while starting", not restarted; `restart_child` brings
        it back) and `trio.Cancelled` propagates. If the supervisor shuts down meanwhile,
        the start is abandoned the same way and this returns.

        Raises:
            ValueError: a child with this id already exists.
            trio.ClosedResourceError: the supervisor is shutting down or has failed.
        """
        async with self._lock:
            self._check_open()
            if spec.id in self._by_id:
                raise ValueError(f"a child with id {spec.id!r} already exists")
            child = self._add(spec)
            with self._interruptible():
                await self._start_or_join(child)

    async def terminate_child(self, child_id: str) -> None:
        """Stop a child gracefully and remove it (its pending restart is dropped).

        The child's scope is cancelled and the supervisor waits, shielded, at most its
        `shutdown_timeout` for it to end (`None`: as long as it takes; 0: not at all).
        Other children are not affected, whatever the strategy.

        Cancellation: the bounded wait is shielded, so the child is always removed.

        Raises:
            KeyError: no child has this id.
            trio.ClosedResourceError: the supervisor is shutting down or has failed.
        """
        async with self._lock:
            self._check_open()
            child = self._by_id[child_id]
            text = await self._take_down(child)
            self._publish(child, stopped_changes(text))
            self._children.remove(child)
            del self._by_id[child_id]

    async def terminate_children(self, child_ids: Sequence[str]) -> None:
        """Stop several children at once and remove them, as `terminate_child` does each.

        Their waits run concurrently, so stopping N independent children (a one_for_one
        supervisor's) takes as long as the slowest, not the sum. Ids that are not (or no
        longer) children are skipped.

        Raises:
            trio.ClosedResourceError: the supervisor is shutting down or has failed.
        """
        async with self._lock:
            self._check_open()
            children = [self._by_id[child_id] for child_id in child_ids if child_id in self._by_id]
            ended: dict[str, str | None] = {}

            async def take_down(child: Child) -> None:
                ended[child.spec.id] = await self._take_down(child)

            async with trio.open_nursery() as nursery:
                for child in children:
                    nursery.start_soon(take_down, child)
            for child in children:
                self._publish(child, stopped_changes(ended[child.spec.id]))
                self._children.remove(child)
                del self._by_id[child.spec.id]

    async def restart_child(self, child_id: str) -> None:
        """Restart one child by hand, including a FAILED or STOPPED one.

        A running child is terminated first (as in `terminate_child`); a pending
        automatic restart is replaced. The child's restart ledger is cleared, so it gets
        its full `max_restarts` again. Other children are not affected. Returns like
        `start_child`, with the same cancellation behaviour.

        Raises:
            KeyError: no child has this id.
            trio.ClosedResourceError: the supervisor is shutting down or has failed.
        """
        async with self._lock:
            self._check_open()
            child = self._by_id[child_id]
            with self._interruptible():
                text = await self._take_down(child)
                if text is not None:
                    self._publish(child, {"last_exit": text, "started_at": None})
                child.ledger.reset()
                await self._launch_and_settle(child)

    # ------------------------------------------------------------------ lifecycle

    async def _start_static(self, specs: Sequence[ChildSpec]) -> None:
        for spec in specs:
            async with self._lock:
                if self._closing:
                    return
                child = self._add(spec)
                with self._interruptible():
                    await self._start_or_join(child)

    async def _shutdown(self) -> None:
        """Terminate every child in reverse start order; call it shielded."""
        self._closing = True
        self._cancel_plans()
        for scope in self._op_scopes:
            scope.cancel()
        async with self._lock:
            await self._stop_all()

    async def _fail(self, failure: SupervisorError) -> None:
        """Give up (lock held): stop every child, then cancel the `async with` block."""
        self._failure = failure
        self._closing = True
        self._cancel_plans()
        await self._stop_all()
        self._owner_scope.cancel()

    async def _stop_all(self) -> None:
        for child in reversed(self._children):
            text = await self._take_down(child)
            if child.status.state not in (ChildState.FAILED, ChildState.STOPPED):
                self._publish(child, stopped_changes(text))

    def _cancel_plans(self) -> None:
        for plan in self._plans:
            plan.scope.cancel()

    def _check_open(self) -> None:
        if self._closing:
            raise trio.ClosedResourceError("the supervisor is shutting down")

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        """A scope around a structural operation that shutdown may cancel."""
        with trio.CancelScope() as scope:
            self._op_scopes.add(scope)
            try:
                yield
            finally:
                self._op_scopes.discard(scope)

    @contextlib.asynccontextmanager
    async def _lock_released(self) -> AsyncIterator[None]:
        """Let other operations run while this one waits (lock held on entry and exit).

        Re-acquiring is shielded: every lock holder finishes in bounded time, because
        shutdown cancels the operations and the waits in `_take_down` are bounded.
        """
        self._lock.release()
        try:
            yield
        finally:
            with trio.CancelScope(shield=True):
                await self._lock.acquire()

    # ------------------------------------------------------------------ children

    def _add(self, spec: ChildSpec) -> Child:
        child = Child(
            spec=spec,
            ledger=RestartLedger.for_policy(spec.policy),
            status=ChildStatus(id=spec.id, state=ChildState.STARTING),
        )
        self._children.append(child)
        self._by_id[spec.id] = child
        return child

    def _publish(self, child: Child, changes: Mapping[str, Any]) -> None:
        """Replace the child's status snapshot and tell `on_change` if it changed."""
        status = attrs.evolve(child.status, **changes)
        if status == child.status:
            return
        child.status = status
        if self._on_change is not None:
            # The callback is the caller's code; its bugs must not kill the supervisor.
            with contextlib.suppress(Exception):
                self._on_change(status)

    async def _start_or_join(self, child: Child) -> None:
        """Start a new child, or queue it behind a pending group restart (lock held)."""
        plan = self._pending_group_plan()
        if plan is None:
            await self._launch_and_settle(child)
            return
        child.plan = plan
        plan.members.append(child)
        self._publish(child, {"state": ChildState.STARTING, "next_restart_at": plan.due})

    def _pending_group_plan(self) -> Plan | None:
        if self._spec.strategy is Strategy.ONE_FOR_ONE:
            return None
        # A group restart absorbs the members of earlier ones, so at most one waits.
        for plan in self._plans:
            if plan.members and not plan.executing:
                return plan
        return None

    async def _launch_and_settle(self, child: Child) -> None:
        """Start one incarnation; apply the policy if it ends before `started()`."""
        early_exit = await self._launch(child)
        if early_exit is not None:
            await self._handle_exit(child, early_exit)

    async def _launch(self, child: Child) -> Exit | None:
        """Start one incarnation (lock held); its `Exit` if it ended before `started()`.

        Cancellation: if the starter is cancelled before the child called `started()`,
        the incarnation is cancelled with it, the child is marked STOPPED (it is not
        restarted) and `trio.Cancelled` propagates.
        """
        inc = Incarnation()
        child.current = inc
        child.incarnations += 1
        self._publish(
            child,
            {
                "state": ChildState.STARTING,
                "restarts": child.incarnations - 1,
                "started_at": trio.current_time(),
                "next_restart_at": None,
            },
        )
        try:
            if self._spec.strategy is Strategy.ONE_FOR_ONE:
                # Independent children: others may start, stop or restart meanwhile.
                async with self._lock_released():
                    result = await self._start_incarnation(child, inc)
            else:
                # Group strategies start in order, one child at a time (as OTP does).
                result = await self._start_incarnation(child, inc)
        except BaseException:
            if child.current is inc:
                child.current = None
                self._publish(child, stopped_changes("cancelled while starting"))
            raise
        if child.current is not inc:
            return None  # terminated or restarted by another operation while starting
        return result

    async def _start_incarnation(self, child: Child, inc: Incarnation) -> Exit | None:
        result: Exit | None = await self._nursery.start(self._incarnation, child, inc)
        return result

    async def _incarnation(
        self,
        child: Child,
        inc: Incarnation,
        *,
        task_status: trio.TaskStatus[Exit | None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run one incarnation; report an early exit to the starter, a later one here."""
        ready = Readiness(task_status, functools.partial(self._on_ready, child, inc))
        try:
            inc.exit = await run_child(child.spec.start, inc.scope, ready)
        finally:
            inc.done.set()
        if not ready.called:
            task_status.started(inc.exit)
            return
        async with self._lock:
            if self._closing or child.current is not inc:
                return  # the supervisor took this child down itself
            with self._interruptible():
                await self._handle_exit(child, inc.exit)

    def _on_ready(self, child: Child, inc: Incarnation) -> None:
        if child.current is inc:
            self._publish(child, {"state": ChildState.RUNNING})

    async def _handle_exit(self, child: Child, ended: Exit) -> None:
        """Apply restart type, intensities and strategy to an ended child (lock held)."""
        if self._closing:
            return
        now = trio.current_time()
        child.current = None
        changes: dict[str, Any] = {
            "last_exit": ended.describe(),
            "last_error": error_of(ended),
            "started_at": None,
        }
        policy = child.spec.policy
        if not wants_restart(policy.restart, ended):
            self._publish(child, {**changes, "state": ChildState.STOPPED})
            return
        if not child.ledger.admit(now):
            self._publish(child, {**changes, "state": ChildState.FAILED})
            if child.spec.escalate:
                await self._fail_because(
                    ChildExhausted(child.spec.id, policy.max_restarts, policy.restart_window),
                    ended,
                )
            return
        if self._ledger is not None and not self._ledger.admit(now):
            self._publish(child, changes)
            intensity, period = self._spec.intensity or 0, self._spec.period
            await self._fail_because(SupervisorExhausted(intensity, period, child.spec.id), ended)
            return
        delay = backoff_delay(len(child.ledger), policy, self._rng.random())
        plan = Plan(due=now + delay)
        self._publish(child, {**changes, "state": ChildState.RESTARTING, "next_restart_at": plan.due})
        members = [child]
        for sibling in reversed(self._siblings_to_restart(child)):
            text = await self._take_down(sibling)
            if sibling.spec.policy.restart is Restart.TEMPORARY and sibling.incarnations:
                self._publish(sibling, stopped_changes(text))
                continue
            members.append(sibling)
            self._publish(
                sibling,
                {
                    "state": waiting_state(sibling),
                    "next_restart_at": plan.due,
                    "started_at": None,
                    **({} if text is None else {"last_exit": text}),
                },
            )
        plan.members = sorted(members, key=self._children.index)
        for member in plan.members:
            member.plan = plan
        self._plans.add(plan)
        self._nursery.start_soon(self._run_plan, plan)

    async def _fail_because(self, failure: SupervisorError, ended: Exit) -> None:
        failure.__cause__ = error_of(ended)
        await self._fail(failure)

    def _siblings_to_restart(self, child: Child) -> list[Child]:
        """The other children the strategy takes down with `child`, in start order."""
        if self._spec.strategy is Strategy.ONE_FOR_ONE:
            return []
        if self._spec.strategy is Strategy.ONE_FOR_ALL:
            candidates = self._children
        else:
            candidates = self._children[self._children.index(child) + 1 :]
        # FAILED and STOPPED children stay down; only live or queued ones take part.
        return [c for c in candidates if c is not child and (c.current is not None or c.plan is not None)]

    async def _take_down(self, child: Child) -> str | None:
        """Terminate the child's incarnation and drop its pending restart (lock held).

        Returns:
            How the incarnation ended, or None if it had already been handled.
        """
        if child.plan is not None:
            plan, child.plan = child.plan, None
            plan.members.remove(child)
            if not plan.members and not plan.executing:
                plan.scope.cancel()
        inc, child.current = child.current, None
        if inc is None:
            return None
        if not inc.done.is_set():
            inc.scope.cancel()
            grace = child.spec.shutdown_timeout
            # Bounded and shielded: termination happens in cleanup paths too.
            with trio.move_on_after(math.inf if grace is None else grace, shield=True):
                await inc.done.wait()
            if not inc.done.is_set():
                return f"did not stop within {grace:g}s"
        return None if inc.exit is None else inc.exit.describe()

    async def _run_plan(self, plan: Plan) -> None:
        """Wait for the backoff, then start the plan's members in order."""
        try:
            with plan.scope:
                await trio.sleep_until(plan.due)
                async with self._lock:
                    if self._closing:
                        return
                    plan.executing = True
                    while plan.members and not self._closing:
                        child = plan.members.pop(0)
                        child.plan = None
                        await self._launch_and_settle(child)
        finally:
            self._plans.discard(plan)


@contextlib.asynccontextmanager
async def open_supervisor(
    spec: SupervisorSpec,
    children: Sequence[ChildSpec] = (),
    *,
    rng: random.Random | None = None,
    on_change: Callable[[ChildStatus], None] | None = None,
) -> AsyncIterator[Supervisor]:
    """Start a supervisor and its static children; stop them all when the block exits.

    The children are started in order, each awaited until it calls
    `task_status.started()` (or until its first incarnation ended and its policy was
    applied: a child raising before `started()` is a crash, never an error here).

    Args:
        spec: strategy and supervisor-wide intensity.
        children: the static children, in start order.
        rng: draws the backoff jitter; inject `random.Random(seed)` for repeatable tests.
        on_change: called synchronously with the new `ChildStatus` on every change. It
            must not block; exceptions it raises are dropped.

    Yields:
        The running `Supervisor`.

    Raises:
        ValueError: two children share an id.
        ChildExhausted: a child with `escalate=True` exceeded its restart policy.
        SupervisorExhausted: the supervisor-wide `intensity` was exceeded.

    Cancellation: when the block exits (normally, with an error, or cancelled), the
    children are terminated in reverse start order, each wait shielded and bounded by
    its `shutdown_timeout`. When the supervisor fails, it stops its children the same
    way, cancels the block, and raises its error. An error raised by the block itself
    comes out as raised (not wrapped in an exception group).
    """
    ids = [child.id for child in children]
    if len(set(ids)) != len(ids):
        raise ValueError(f"child ids must be unique, got {ids}")
    inner_error: BaseException | None = None
    supervisor: Supervisor | None = None
    try:
        async with trio.open_nursery() as nursery:
            children_nursery: trio.Nursery = await nursery.start(run_shielded_nursery)
            try:
                supervisor = Supervisor(
                    spec, children_nursery, nursery.cancel_scope, rng or random.Random(), on_change
                )
                try:
                    await supervisor._start_static(children)
                    yield supervisor
                except BaseException as exc:
                    inner_error = exc
                    raise
                finally:
                    with trio.CancelScope(shield=True):
                        await supervisor._shutdown()
            finally:
                children_nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        lone = sole_member(group, inner_error)
        if lone is None:
            raise
        raise_unwrapped(lone)
    # Reached only when the block ran: `supervisor` was made.
    if supervisor._failure is not None:
        raise supervisor._failure


__all__ = [
    "ChildExhausted",
    "ChildState",
    "ChildStatus",
    "Supervisor",
    "SupervisorError",
    "SupervisorExhausted",
    "open_supervisor",
]
