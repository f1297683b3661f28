"""How a `[[middleware]]` entry's `use` names a factory, and loading it.

The configuration checks each entry when it is loaded (model.py); the router builds the
chains from the same factories (actors/gate/chain.py). What a middleware is, and what
it sees, is actors/gate/middleware.py's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    #: A factory: the options table -> the middleware (typed where it is called,
    #: actors/gate/middleware.py, which the configuration does not import).
    Factory = Callable[[Mapping[str, Any]], Any]
    Middleware = Callable[..., Any]

#: The middlewares assern ships, by the short name `use` may give instead of
#: "package.module:factory".
SHIPPED: Mapping[str, str] = {
    "rate_limit": "assern.actors.gate.middlewares.rate_limit:factory",
    "redact": "assern.actors.gate.middlewares.redact:factory",
    "audit": "assern.actors.gate.middlewares.audit:factory",
}


class MiddlewareError(Exception):
    """A `[[middleware]]` entry that cannot be loaded: what is wrong, in a sentence.

    Attributes:
        key: The entry's key at fault: "use" (the factory cannot be found) or "options"
            (the factory refused them).
    """

    def __init__(self, message: str, key: str = "use") -> None:
        super().__init__(message)
        self.key = key


def factory_path(use: str) -> str:
    """The "package.module:factory" that `use` names (a shipped name or the path itself).

    Raises:
        MiddlewareError: neither a shipped name nor "package.module:factory".
    """
    if use in SHIPPED:
        return SHIPPED[use]
    module, sep, attribute = use.partition(":")
    if not sep or not module or not attribute.isidentifier():
        shipped = ", ".join(repr(name) for name in SHIPPED)
        raise MiddlewareError(
            f"expected a shipped middleware ({shipped}) or 'package.module:factory', not {use!r}"
        )
    return use


def load_factory(use: str) -> Factory:
    """Import the factory that `use` names.

    Raises:
        MiddlewareError: it cannot be imported, or is not callable.
    """
    path = factory_path(use)
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an import runs arbitrary code: any failure is the entry's
        raise MiddlewareError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    found = getattr(module, attribute, None)
    if found is None:
        raise MiddlewareError(f"module {module_name!r} has no {attribute!r}")
    if not callable(found):
        raise MiddlewareError(f"{path!r} is not callable (a factory takes the options table)")
    factory: Factory = found
    return factory


def make_middleware(use: str, options: Mapping[str, Any]) -> Middleware:
    """The middleware `use` builds from `options`.

    Raises:
        MiddlewareError: the factory cannot be loaded, rejects the options, or builds
            something that is not callable.
    """
    factory = load_factory(use)
    try:
        built: Middleware = factory(dict(options))
    except Exception as exc:  # a factory that refuses its options says why in its error
        raise MiddlewareError(f"rejected its options: {exc}", "options") from None
    if not callable(built):
        raise MiddlewareError(
            f"its factory returned {type(built).__name__}, not an async function", "options"
        )
    return built
