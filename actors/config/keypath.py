"""Key paths as users read them in error messages: `servers.github.args[1]`."""

import re

#: A path into a config document: table keys (str) and array indices (int).
KeyPath = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_key_path(path: KeyPath) -> str:
    """Render a key path the way TOML spells it.

    Args:
        path: Table keys and array indices, outermost first.

    Returns:
        Dotted keys with `[i]` for indices; keys that are not bare TOML keys are quoted,
        e.g. `servers."my.server".args[0]`. The empty path renders as "(top level)".
    """
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
            continue
        key = part if _BARE_KEY.fullmatch(part) else '"' + part.replace('"', '\\"') + '"'
        out.append(f".{key}" if out else key)
    return "".join(out) or "(top level)"


def at(message: str, path: KeyPath) -> str:
    """Attach a key path to a problem: "MESSAGE @ key.path"."""
    return f"{message} @ {format_key_path(path)}"
