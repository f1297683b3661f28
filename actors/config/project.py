"""Which project applies: `--project`, the nearest `.assern/`, or directory patterns.

`detect_project` and `pattern_rank` are pure (paths in, answer out); only
`find_local_root` looks at the file system.
"""

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path, PurePath
from typing import Literal

import attrs

from assern.actors.config.home import LOCAL_DIR, expand_user
from assern.actors.config.spec import ConfigError

ProjectSource = Literal["argument", "local-config", "directories", "local-folder", "none"]

# Pattern kinds, least specific first: the rank compares kind before prefix length.
_ANY_DEPTH, _ONE_LEVEL, _EXACT = 0, 1, 2


@attrs.frozen(kw_only=True)
class ProjectMatch:
    """The outcome of project detection.

    Attributes:
        name: The project's name, or None when no project applies.
        source: How it was found: "argument" (`--project`), "local-config" (`project =`
            in `.assern/config.toml`), "directories" (a `projects.*.directories`
            pattern), "local-folder" (a `.assern/` that names no project and matches no
            pattern: the folder's name labels it), or "none".
    """

    name: str | None
    source: ProjectSource


def pattern_rank(pattern: str, directory: PurePath, home: Path) -> tuple[int, int] | None:
    """How specifically a `directories` pattern matches `directory`.

    `~/work/x` matches exactly that folder; `~/work/*` a folder one level below
    `~/work`; `~/work/**` `~/work` itself and any folder below it. Segments may hold
    fnmatch wildcards (`~/work/client-*`).

    Args:
        pattern: The pattern as written (absolute or starting with `~`).
        directory: An absolute, normalized folder.
        home: What `~` means.

    Returns:
        None when the pattern does not match; otherwise a rank where a greater rank is
        more specific: exact beats `*` beats `**`, then a longer prefix beats a shorter.
    """
    parts = PurePath(expand_user(pattern, home)).parts
    target = directory.parts
    if parts and parts[-1] == "**":
        kind, prefix = _ANY_DEPTH, parts[:-1]
        fits = len(target) >= len(prefix)
    elif parts and parts[-1] == "*":
        kind, prefix = _ONE_LEVEL, parts[:-1]
        fits = len(target) == len(prefix) + 1
    else:
        kind, prefix = _EXACT, parts
        fits = len(target) == len(prefix)
    if not fits or not all(fnmatchcase(t, p) for t, p in zip(target, prefix, strict=False)):
        return None
    return (kind, len(prefix))


def match_directories(projects: Mapping[str, Sequence[str]], directory: PurePath, home: Path) -> str | None:
    """The project whose `directories` match `directory` most specifically.

    Args:
        projects: Each project's directory patterns, in declaration order.
        directory: An absolute, normalized folder.
        home: What `~` means.

    Returns:
        The best project's name (on a tie, the one declared first), or None.
    """
    best: tuple[tuple[int, int], str] | None = None
    for name, patterns in projects.items():
        for pattern in patterns:
            rank = pattern_rank(pattern, directory, home)
            if rank is not None and (best is None or rank > best[0]):
                best = (rank, name)
    return best[1] if best else None


def detect_project(
    *,
    explicit: str | None,
    cwd: PurePath,
    home: Path,
    projects: Mapping[str, Sequence[str]],
    local_root: PurePath | None = None,
    local_project: str | None = None,
    config_file: str | None = None,
) -> ProjectMatch:
    """Decide which project applies (DESIGN.md §3).

    In order: the `explicit` name (`--project`) wins; else the `project =` of the nearest
    local config; else the most specific `directories` match of `cwd` (or, failing that,
    of the local root); else a local root that names no project is labelled by its
    folder's name; else no project applies.

    Args:
        explicit: The `--project` argument, or None.
        cwd: The absolute, normalized working directory.
        home: What `~` means in the patterns.
        projects: Each global project's `directories` patterns, in declaration order.
        local_root: The folder holding the nearest `.assern/`, if any.
        local_project: The `project =` of that folder's `.assern/config.toml`, if any.
        config_file: The global config file, named in the error.

    Returns:
        The project and how it was found.

    Raises:
        ConfigError: `explicit` names a project the global config does not define; the
            message lists the projects it does define.
    """
    if explicit is not None:
        if explicit not in projects:
            known = ", ".join(repr(name) for name in projects)
            listing = f"known projects: {known}" if known else "no projects are defined"
            raise ConfigError(config_file, (f"unknown project {explicit!r} ({listing})",))
        return ProjectMatch(name=explicit, source="argument")
    if local_project is not None:
        return ProjectMatch(name=local_project, source="local-config")
    name = match_directories(projects, cwd, home)
    if name is None and local_root is not None:
        name = match_directories(projects, local_root, home)
    if name is not None:
        return ProjectMatch(name=name, source="directories")
    if local_root is not None:
        return ProjectMatch(name=local_root.name, source="local-folder")
    return ProjectMatch(name=None, source="none")


def local_files(folder: Path) -> tuple[Path, Path]:
    """The files that make `folder` a project root: `.assern/config.toml` and `.assern/.env`."""
    local = folder / LOCAL_DIR
    return local / "config.toml", local / ".env"


def local_root_search(cwd: Path) -> list[Path]:
    """The folders `find_local_root` looks at, nearest first, up to the one it finds."""
    searched = []
    for folder in (cwd, *cwd.parents):
        searched.append(folder)
        if any(path.is_file() for path in local_files(folder)):
            break
    return searched


def find_local_root(cwd: Path) -> Path | None:
    """The nearest folder, `cwd` or a parent, whose `.assern/` holds config.toml or .env.

    Args:
        cwd: An absolute folder to start from.

    Returns:
        That folder (the project root), or None when there is none up to `/`.
    """
    last = local_root_search(cwd)[-1]
    return last if any(path.is_file() for path in local_files(last)) else None
