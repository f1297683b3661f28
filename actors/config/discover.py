"""Where a config is found when none is named: cllm-mcp's discovery order.

cllm-mcp users keep an `mcpServers` JSON file in one of three places; assern's commands
find it there when the user has no assern config of their own, so an existing setup
works without a single new file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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
    candidates = [cwd / name for name in CLLM_MCP_LOCAL_NAMES]
    candidates.append(user_home(environ) / CLLM_MCP_USER_CONFIG)
    return next((path for path in candidates if is_file(path)), None)


def config_path_for(
    explicit: Path | None,
    *,
    cwd: Path,
    environ: Mapping[str, str],
    assern_home: Path,
    is_file: Callable[[Path], bool] = Path.is_file,
) -> Path | None:
    """The `config_path` to resolve with: `--config`, else a discovered file, else None.

    A discovered cllm-mcp file is used only when the user has no global assern config
    (`$ASSERN_HOME/config.toml`, or the original layout's `config.yaml`); None means
    "the global config in `$ASSERN_HOME`", as `resolve_config` takes it.

    Args:
        explicit: The `--config` argument, or None.
        cwd: The folder the user works in.
        environ: The process environment.
        assern_home: The folder holding the global config.
        is_file: Whether a path is an existing file (tests pass a fake).
    """
    if explicit is not None:
        return explicit
    if is_file(assern_home / GLOBAL_CONFIG) or is_file(assern_home / LEGACY_GLOBAL_CONFIG):
        return None
    return discover_config(cwd, environ, is_file=is_file)
