"""Where the user's files are: the home folder, `~` expansion and `$ASSERN_HOME`.

Standard library only, and not even `pathlib` or `typing` at import (a `Path` is made
where one is returned): the quick proxy path (app/quick.py) finds `$ASSERN_HOME` with
`assern_home_folder` and stays a small process.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

#: The folder, inside a project's root, that holds its local config and .env.
LOCAL_DIR = ".assern"
#: The global config file in `$ASSERN_HOME`.
GLOBAL_CONFIG = "config.toml"
#: The HTTP front's bearer tokens (their hashes) in `$ASSERN_HOME` (`assernctl token`).
TOKENS_FILE = "tokens.toml"
#: The original Assern layout's global config, read when config.toml is absent and
#: PyYAML is installed.
LEGACY_GLOBAL_CONFIG = "config.yaml"
#: The original Assern layout kept its servers in this file beside `config.yaml`.
ORIGINAL_SERVERS_FILE = "mcp.json"


def home_folder(environ: Mapping[str, str]) -> str:
    """The user's home: `environ["HOME"]` when set (so tests can fake it), else the OS's."""
    return environ.get("HOME") or os.path.expanduser("~")


def user_home(environ: Mapping[str, str]) -> Path:
    """`home_folder` as a `Path`."""
    from pathlib import Path

    return Path(home_folder(environ))


def expand_user(path: str, home: Path | str) -> str:
    """Expand a leading `~` (alone or followed by `/`) to `home`."""
    if path == "~":
        return str(home)
    if path.startswith("~/"):
        return os.path.join(home, path[2:])
    return path


def assern_home_folder(environ: Mapping[str, str]) -> str:
    """`$ASSERN_HOME` (with `~` expanded), else `~/.valksor/assern`.

    Args:
        environ: The process environment; its HOME, when set, is the user's home.
    """
    home = home_folder(environ)
    configured = environ.get("ASSERN_HOME")
    if configured:
        return expand_user(configured, home)
    return os.path.join(home, ".valksor", "assern")


def default_assern_home(environ: Mapping[str, str]) -> Path:
    """`assern_home_folder` as a `Path`."""
    from pathlib import Path

    return Path(assern_home_folder(environ))
