"""Where a config is found when none is named: cllm-mcp's discovery order.

cllm-mcp users keep an `mcpServers` JSON file in one of three places; assern finds it
there when the user has no assern config of their own, so an existing setup works
without a single new file. A file found in the working folder is that folder's own
configuration: like `.assern/`, it applies only once the folder is trusted (trust.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from assern.actors.config.home import GLOBAL_CONFIG, LEGACY_GLOBAL_CONFIG, user_home

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

#: File names looked up in the current directory, in order.
CLLM_MCP_LOCAL_NAMES = ("mcp-config.json", ".mcp-config.json")
#: cllm-mcp's per-user config, relative to the home folder.
CLLM_MCP_USER_CONFIG = Path(".config") / "cllm-mcp" / "config.json"


def discover_config(
    cwd: Path, environ: Mapping[str, str], *, is_file: Callable[[Path], bool] = Path.is_file
) -> Path | None:
    """The first `mcpServers` JSON file in cllm-mcp's discovery order.

    In order: `./mcp-config.json`, `./.mcp-config.json`, `~/.config/cllm-mcp/config.json`.

    Args:
        cwd: The folder the user works in.
        environ: The process environment; its HOME, when set, is the user's home.
        is_file: Whether a path is an existing file (tests pass a fake).

    Returns:
        The first candidate that exists, or None.
    """
    return next((path for path in discovery_candidates(cwd, environ) if is_file(path)), None)


def discovery_candidates(cwd: Path, environ: Mapping[str, str]) -> tuple[Path, ...]:
    """Where cllm-mcp's files are looked for, in order."""
    return (*(cwd / name for name in CLLM_MCP_LOCAL_NAMES), user_home(environ) / CLLM_MCP_USER_CONFIG)


@attrs.frozen(kw_only=True)
class GlobalChoice:
    """Which file stands for the global config.

    Attributes:
        path: The file to read in place of `$ASSERN_HOME/config.toml` (relative to the
            working folder when given so), or None for that file itself.
        required: A missing `path` is an error (it was named with `--config`).
        folder: The working folder when `path` is a file discovered in it: that file is
            the folder's own configuration, which applies only once trusted.
        candidates: The discovery's candidates, when discovery applied (for watching).
    """

    path: Path | None
    required: bool = False
    folder: Path | None = None
    candidates: tuple[Path, ...] = ()


def global_choice(
    explicit: Path | None,
    *,
    cwd: Path,
    environ: Mapping[str, str],
    assern_home: Path,
    is_file: Callable[[Path], bool] = Path.is_file,
) -> GlobalChoice:
    """The global config: `--config`, else `$ASSERN_HOME`'s, else a discovered file.

    A discovered cllm-mcp file is used only when the user has no global assern config
    (`$ASSERN_HOME/config.toml`, or the original layout's `config.yaml`). `assern serve`,
    `assernctl config` and every other command resolve through this one rule.

    Args:
        explicit: The `--config` argument, or None.
        cwd: The folder the user works in.
        environ: The process environment.
        assern_home: The folder holding the global config.
        is_file: Whether a path is an existing file (tests pass a fake).
    """
    if explicit is not None:
        return GlobalChoice(path=explicit, required=True)
    if is_file(assern_home / GLOBAL_CONFIG) or is_file(assern_home / LEGACY_GLOBAL_CONFIG):
        return GlobalChoice(path=None)
    candidates = discovery_candidates(cwd, environ)
    found = next((path for path in candidates if is_file(path)), None)
    in_folder = found is not None and found != candidates[-1]  # not the user's own file
    return GlobalChoice(path=found, folder=cwd if in_folder else None, candidates=candidates)
