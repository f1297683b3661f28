"""The middleware chain of a tool: compiled once per catalog snapshot, run per call.

`Middlewares` (owned by the router) keeps one instance per `[[middleware]]` entry across
snapshots, so a rate limit's counts survive a backend's restart; `chain()` picks, for one
tool, the entries whose `servers` and `tools` globs take it, outermost first. `Chain.run`
calls them around the forwarding and keeps each one's failure its own: a middleware
that raises answers its call with an error result naming it, while an error of the
backend (raised by `next`) passes through it unchanged.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import pydantic
import structlog

from assern.actors.config.middleware import MiddlewareError, make_middleware
from assern.actors.gate.middleware import Call, Middleware, Next, error_result

if TYPE_CHECKING:
    from collections.abc import Sequence

    from assern.actors.config.spec import MiddlewareSpec
    from assern.actors.gate.asyncio_host import AsyncioHost

log = structlog.get_logger()


@attrs.frozen(eq=False)
class Layer:
    """One middleware of a chain: its name (for errors and logs), how it is called from
    trio (an asyncio middleware is wrapped to run on the asyncio loop), and the instance
    its factory built (closed, if it has a `close()`, when its entry goes away)."""

    name: str
    run: Middleware
    instance: object = None


@attrs.frozen(eq=False)
class Chain:
    """The middlewares around one tool's calls, outermost first."""

    layers: tuple[Layer, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)

    async def run(self, call: Call, forward: Next) -> types.CallToolResult:
        """Pass `call` through every layer, then `forward` it (the backend)."""
        return await self._step(0, call, forward)

    async def _step(self, index: int, call: Call, forward: Next) -> types.CallToolResult:
        if index == len(self.layers):
            return await forward(call)
        layer = self.layers[index]
        downstream: list[BaseException] = []

        async def next_(passed: Call) -> types.CallToolResult:
            if not isinstance(passed, Call):
                raise TypeError(f"next() takes the Call, not {type(passed).__name__}")
            try:
                return await self._step(index + 1, passed, forward)
            except Exception as exc:
                downstream.append(exc)
                raise

        try:
            answer: Any = await layer.run(call, next_)
        except Exception as exc:
            if any(exc is seen for seen in downstream):
                raise  # the backend's (or a later middleware's) error, not this one's
            log.error(
                "middleware_failed",
                middleware=layer.name,
                server=call.server,
                tool=call.tool,
                client=call.client,
                error=f"{type(exc).__name__}: {exc}",
                exc_info=exc,
            )
            return error_result(
                f"Middleware '{layer.name}' failed on {call.exposed}: {type(exc).__name__}: {exc}"
            )
        return _as_result(layer.name, call, answer)


def _as_result(name: str, call: Call, answer: Any) -> types.CallToolResult:
    """A layer's answer as a CallToolResult (a dict in its JSON form is accepted)."""
    if isinstance(answer, types.CallToolResult):
        return answer
    if isinstance(answer, dict):
        try:
            return types.CallToolResult.model_validate(answer)
        except pydantic.ValidationError as exc:
            problem = f"returned a dict that is not a CallToolResult ({exc.error_count()} problems)"
    else:
        problem = f"returned {type(answer).__name__}, not a CallToolResult"
    log.error("middleware_failed", middleware=name, server=call.server, tool=call.tool, error=problem)
    return error_result(f"Middleware '{name}' failed on {call.exposed}: it {problem}.")


def _matches(patterns: Sequence[str], names: Sequence[str]) -> bool:
    return not patterns or any(fnmatchcase(name, pattern) for pattern in patterns for name in names)


class Middlewares:
    """The instances of the configured middlewares and the chains built from them.

    Args:
        host: Runs asyncio middlewares (None: such an entry answers its calls with an
            error saying there is no asyncio loop).
    """

    def __init__(self, host: AsyncioHost | None = None) -> None:
        self._host = host
        #: by entry: equal entries (options included) share one instance
        self._layers: dict[MiddlewareSpec, Layer] = {}

    def chain(self, specs: Sequence[MiddlewareSpec], server: str, names: Sequence[str]) -> Chain | None:
        """The chain of a tool of `server` known by `names` (exposed, SERVER_TOOL, own),
        or None when no entry takes it."""
        layers = tuple(
            self._layer(spec)
            for spec in specs
            if _matches(spec.servers, (server,)) and _matches(spec.tools, names)
        )
        return Chain(layers) if layers else None

    def retain(self, specs: Sequence[MiddlewareSpec]) -> None:
        """Forget the instances of entries no longer configured (a changed entry is a new
        one: its instance starts afresh)."""
        wanted = set(specs)
        for spec in set(self._layers) - wanted:
            close = getattr(self._layers.pop(spec).instance, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:  # its calls are over; a failed close is only worth a word
                    log.warning("middleware_close_failed", middleware=spec.name, error=str(exc))

    def _layer(self, spec: MiddlewareSpec) -> Layer:
        layer = self._layers.get(spec)
        if layer is None:
            layer = self._layers[spec] = self._build(spec)
        return layer

    def _build(self, spec: MiddlewareSpec) -> Layer:
        try:
            middleware = make_middleware(spec.use, spec.options)
        except MiddlewareError as exc:
            # The configuration checked it when it was loaded: something changed since
            # (a module edited). Its calls are answered with the reason, never forwarded
            # around it.
            log.error("middleware_unavailable", middleware=spec.name, error=str(exc))
            return Layer(spec.name, _refusing(spec.name, str(exc)))
        if not spec.asyncio:
            return Layer(spec.name, middleware, middleware)
        if self._host is None:
            return Layer(spec.name, _refusing(spec.name, "no asyncio loop runs in this process"), middleware)
        self._host.want()
        return Layer(spec.name, self._host.wrap(middleware), middleware)


def _refusing(name: str, reason: str) -> Middleware:
    async def refuse(call: Call, next_: Next) -> types.CallToolResult:
        return error_result(
            f"Middleware '{name}' is not available, so {call.exposed} is not called: {reason}."
        )

    return refuse
