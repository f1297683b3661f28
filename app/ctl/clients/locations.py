"""Where each MCP client keeps its servers, for this user and the current folder.

Pure: paths in, paths out (nothing here looks at the disk). docs/clients.md says the
same, client by client, with the versions checked. User-wide files hang off HOME (and
the variables some clients read instead); project files are looked for in the current
folder and its parents up to the project's root (the top of its git work tree, else the
current folder), nearest first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

import attrs

ClientName = Literal["claude-code", "claude-desktop", "cursor", "vscode", "windsurf", "codex", "gemini"]
CLIENTS: tuple[ClientName, ...] = (
    "claude-code",
    "claude-desktop",
    "cursor",
    "vscode",
    "windsurf",
    "codex",
    "gemini",
)
Scope = Literal["user", "project"]
Syntax = Literal["json", "jsonc", "toml"]


@attrs.frozen(kw_only=True)
class Location:
    """One place where a client lists MCP servers.

    Attributes:
        client: The client's name.
        path: The file.
        scope: "user" (every folder) or "project" (this folder's project).
        key: Where the servers object is inside the file, e.g. ("mcpServers",).
        syntax: How the file is written: JSON, JSON with comments, or TOML.
        root: For a project location, the project's folder (its `.assern/` goes there).
        label: What the location is called in the client's own words.
    """

    client: ClientName
    path: Path
    scope: Scope
    key: tuple[str, ...]
    syntax: Syntax
    root: Path | None = None
    label: str = "user"


@attrs.frozen(kw_only=True)
class Places:
    """Every location of every client, and what says whether a client is installed.

    Attributes:
        locations: The config locations, in client order (user-wide first).
        markers: Per client, folders or files whose presence says it is installed.
        notes: What could not be looked for (no HOME), for the user.
    """

    locations: tuple[Location, ...]
    markers: Mapping[ClientName, tuple[Path, ...]]
    notes: tuple[str, ...] = ()


def project_root(cwd: Path, is_dir: Callable[[Path], bool] = Path.is_dir) -> Path:
    """The top of the git work tree holding `cwd`, else `cwd` (Claude Code's project key).

    Args:
        cwd: The current folder (absolute).
        is_dir: Whether a path is an existing folder... or a `.git` file of a worktree
            (tests pass a fake).
    """
    for folder in (cwd, *cwd.parents):
        if is_dir(folder / ".git"):
            return folder
    return cwd


def _exists(path: Path) -> bool:
    return path.exists()


def _app_support(home: Path, environ: Mapping[str, str], system: str) -> Path:
    """Where desktop applications keep their settings: ~/Library/Application Support on
    macOS, `$XDG_CONFIG_HOME` (default ~/.config) elsewhere."""
    if system == "darwin":
        return home / "Library" / "Application Support"
    configured = environ.get("XDG_CONFIG_HOME")
    return Path(configured) if configured and Path(configured).is_absolute() else home / ".config"


def _user_locations(home: Path, environ: Mapping[str, str], system: str) -> list[Location]:
    support = _app_support(home, environ, system)
    claude_dir = Path(environ["CLAUDE_CONFIG_DIR"]) if environ.get("CLAUDE_CONFIG_DIR") else home
    codex_dir = Path(environ["CODEX_HOME"]) if environ.get("CODEX_HOME") else home / ".codex"
    gemini_home = Path(environ["GEMINI_CLI_HOME"]) if environ.get("GEMINI_CLI_HOME") else home
    servers = ("mcpServers",)
    return [
        Location(
            client="claude-code",
            path=claude_dir / ".claude.json",
            scope="user",
            key=servers,
            syntax="json",
        ),
        Location(
            client="claude-desktop",
            path=support / "Claude" / "claude_desktop_config.json",
            scope="user",
            key=servers,
            syntax="json",
        ),
        Location(
            client="cursor", path=home / ".cursor" / "mcp.json", scope="user", key=servers, syntax="json"
        ),
        *(
            Location(
                client="vscode",
                path=support / product / "User" / "mcp.json",
                scope="user",
                key=("servers",),
                syntax="jsonc",
                label="user" if product == "Code" else f"user ({product})",
            )
            for product in ("Code", "Code - Insiders")
        ),
        Location(
            client="windsurf",
            path=home / ".codeium" / "windsurf" / "mcp_config.json",
            scope="user",
            key=servers,
            syntax="json",
        ),
        Location(
            client="codex", path=codex_dir / "config.toml", scope="user", key=("mcp_servers",), syntax="toml"
        ),
        Location(
            client="gemini",
            path=gemini_home / ".gemini" / "settings.json",
            scope="user",
            key=servers,
            syntax="json",
        ),
    ]


#: Project files: (client, path below the project folder, servers key, syntax).
_PROJECT_FILES: tuple[tuple[ClientName, str, tuple[str, ...], Syntax], ...] = (
    ("claude-code", ".mcp.json", ("mcpServers",), "json"),
    ("cursor", ".cursor/mcp.json", ("mcpServers",), "json"),
    ("vscode", ".vscode/mcp.json", ("servers",), "jsonc"),
    ("codex", ".codex/config.toml", ("mcp_servers",), "toml"),
    ("gemini", ".gemini/settings.json", ("mcpServers",), "json"),
)


def _project_locations(cwd: Path, root: Path, exists: Callable[[Path], bool]) -> list[Location]:
    folders = [cwd]
    if cwd.is_relative_to(root):
        folders += [parent for parent in cwd.parents if parent.is_relative_to(root)]
    found = []
    for client, relative, key, syntax in _PROJECT_FILES:
        folder = next((f for f in folders if exists(f / relative)), root)
        found.append(
            Location(
                client=client,
                path=folder / relative,
                scope="project",
                key=key,
                syntax=syntax,
                root=folder,
                label="project",
            )
        )
    return found


def find_places(
    environ: Mapping[str, str],
    cwd: Path,
    *,
    system: str = sys.platform,
    exists: Callable[[Path], bool] = _exists,
    is_dir: Callable[[Path], bool] = Path.is_dir,
) -> Places:
    """Every location where the seven clients may list servers, for `environ` and `cwd`.

    Args:
        environ: The environment: HOME, and CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME,
            XDG_CONFIG_HOME where set (as the clients read them).
        cwd: The current folder (absolute).
        system: `sys.platform`: "darwin" for macOS locations, anything else for Linux's.
        exists: Whether a path exists (tests pass a fake).
        is_dir: Whether a path is a folder (tests pass a fake).

    Returns:
        The locations (existing or not): without HOME, only the project files, with a note.
    """
    root = project_root(cwd, is_dir)
    project = _project_locations(cwd, root, exists)
    home_text = environ.get("HOME")
    if not home_text:
        return Places(
            locations=tuple(project),
            markers={},
            notes=("HOME is not set: the clients' user-wide files were not looked for",),
        )
    home = Path(home_text)
    user = _user_locations(home, environ, system)
    claude_file = user[0].path
    local = Location(
        client="claude-code",
        path=claude_file,
        scope="project",
        key=("projects", str(root), "mcpServers"),
        syntax="json",
        root=root,
        label="local, this project",
    )
    user_paths = {location.path for location in user}
    ordered: list[Location] = []
    for client in CLIENTS:
        ordered += [loc for loc in user if loc.client == client]
        if client == "claude-code":
            ordered.append(local)
        # A project folder that is the home folder holds the user files themselves.
        ordered += [loc for loc in project if loc.client == client and loc.path not in user_paths]
    support = _app_support(home, environ, system)
    markers: dict[ClientName, tuple[Path, ...]] = {
        "claude-code": (claude_file, home / ".claude"),
        "claude-desktop": (support / "Claude",),
        "cursor": (home / ".cursor",),
        "vscode": (support / "Code" / "User", support / "Code - Insiders" / "User"),
        "windsurf": (home / ".codeium" / "windsurf",),
        "codex": (user[-2].path.parent,),
        "gemini": (user[-1].path.parent,),
    }
    return Places(locations=tuple(ordered), markers=markers)
