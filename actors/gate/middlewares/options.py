"""Reading a shipped middleware's options table: every problem a sentence naming the option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

_KINDS = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list of strings",
}


def read_options(options: Mapping[str, Any], kinds: Mapping[str, type]) -> dict[str, Any]:
    """The options, each checked against its kind (an int is a valid float; a list holds
    strings only).

    Raises:
        ValueError: an unknown option, or one of the wrong kind.
    """
    unknown = sorted(set(options) - set(kinds))
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} (known: {', '.join(sorted(kinds))})")
    read: dict[str, Any] = {}
    for name, value in options.items():
        kind = kinds[name]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        valid = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if kind is list:
            valid = isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
            value = list(value) if valid else value
        if not valid:
            raise ValueError(f"option {name!r} expects {_KINDS[kind]}, got {value!r}")
        read[name] = value
    return read


def at_least(name: str, value: float | None, least: float) -> None:
    """Raises ValueError when a given `value` is below `least`."""
    if value is not None and value < least:
        raise ValueError(f"option {name!r} must be at least {least:g}, got {value:g}")
