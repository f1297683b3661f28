"""Every file a resolution reads, parsed, and which of them apply: the trust gate.

The user's own files apply as they are: `$ASSERN_HOME/.env` and `config.toml` (or the
file named with `--config`, or cllm-mcp's `~/.config/cllm-mcp/config.json`), with the
`[projects.NAME]` tables in them. A folder's own files (`.assern/config.toml` with its
includes, `.assern/.env`, an `mcpServers` file discovered in the working folder) are
parsed and digested (trust.py), and apply only when the trust store holds that digest
for the folder's real path; otherwise nothing of them is used: no server, env value,
`root`, setting or project name.

`resolve_config` and `assernctl trust` both read through `read_sources`, so what the
user is shown before trusting is exactly what a session would start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from assern.actors.config.discover import GlobalChoice, global_choice
from assern.actors.config.home import GLOBAL_CONFIG, LEGACY_GLOBAL_CONFIG, LOCAL_DIR, user_home
from assern.actors.config.layers import (
    GlobalSource,
    LocalSource,
    ServerStacks,
    read_dotenv,
    read_global,
    read_local,
)
from assern.actors.config.project import find_local_root
from assern.actors.config.trust import (
    TRUST_FILE,
    ProjectFiles,
    Table,
    TrustReport,
    TrustStore,
    assess,
    project_files,
    read_store,
)
from assern.actors.config.yaml_layout import yaml_available


@attrs.frozen(kw_only=True)
class Sources:
    """What the files say, with the untrusted folders' files left out.

    Attributes:
        choice: Which file stands for the global config.
        global_env_file: `$ASSERN_HOME/.env`.
        global_dotenv: Its values, or None when there is none.
        source: The global config (empty when it is a discovered file of an untrusted folder).
        local_root: The folder holding the nearest `.assern/`, trusted or not.
        local_env_file: Its `.assern/.env` path.
        local_dotenv: Its values, when there is one and the folder is trusted.
        local: Its `.assern/config.toml`, when the folder is trusted.
        projects: Every folder's own files that were found, trusted or not.
        trust: What trust decided.
        warnings: What the reading has to tell (a YAML file that cannot be read, ...).
    """

    choice: GlobalChoice
    global_env_file: Path
    global_dotenv: Mapping[str, str] | None
    source: GlobalSource
    local_root: Path | None
    local_env_file: Path | None
    local_dotenv: Mapping[str, str] | None
    local: LocalSource | None
    projects: tuple[ProjectFiles, ...]
    trust: TrustReport
    warnings: tuple[str, ...] = ()


def trust_file(assern_home: Path) -> Path:
    """The trust store of an `$ASSERN_HOME`."""
    return assern_home / TRUST_FILE


def read_sources(
    *, config_path: Path | None, cwd: Path, environ: Mapping[str, str], assern_home: Path
) -> Sources:
    """Read every file a resolution in `cwd` reads, and leave out what is not trusted.

    Args:
        config_path: `--config` (relative to `cwd`), or None.
        cwd: An absolute working folder.
        environ: The process environment (HOME in it is the user's home).
        assern_home: The folder of the global files and the trust store.

    Raises:
        ConfigError: a file (trusted or not) cannot be read or parsed. An untrusted
            file is parsed, never used: a parse error is still named.
    """
    home = user_home(environ)
    warnings: list[str] = []
    global_env_file = assern_home / ".env"
    global_dotenv = read_dotenv(global_env_file)
    choice = global_choice(config_path, cwd=cwd, environ=environ, assern_home=assern_home)
    if choice.path is not None:
        source = read_global(cwd / choice.path, required=choice.required, home=home)
    else:
        source = read_global(assern_home / GLOBAL_CONFIG, required=False, home=home)
        legacy = assern_home / LEGACY_GLOBAL_CONFIG
        if source.file is None and legacy.is_file():
            if yaml_available():
                source = read_global(legacy, required=True, home=home)
            else:
                warnings.append(
                    f"{legacy} is not read: reading YAML needs PyYAML (pip install 'assern[yaml]'), "
                    "or convert it with `assernctl config import`"
                )
    warnings += source.notes

    local_root = find_local_root(cwd)
    local_env_file = local_root / LOCAL_DIR / ".env" if local_root else None
    local_dotenv = read_dotenv(local_env_file) if local_env_file else None
    local = read_local(local_root, home=home) if local_root else None

    folders = _Folders()
    if choice.folder is not None and source.file is not None:
        folders.add(choice.folder, files=source.files, servers=source.servers)
    if local_root is not None and local is not None:
        local_files = list(local.files)
        if local_dotenv is not None and local_env_file is not None:
            local_files.insert(0, local_env_file)
        folders.add(
            local_root,
            files=local_files,
            servers=local.servers,
            dotenv=local_dotenv,
            dotenv_file=local_env_file if local_dotenv is not None else None,
            other=_other_tables(local),
        )
    projects = folders.projects()
    store = read_store(trust_file(assern_home)) if projects else TrustStore(path=trust_file(assern_home))
    trust = assess(projects, store)
    untrusted = {item.project.folder for item in trust.untrusted}
    if choice.folder is not None and _real(choice.folder) in untrusted:
        source = GlobalSource()
    if local_root is not None and _real(local_root) in untrusted:
        local, local_dotenv = None, None
    return Sources(
        choice=choice,
        global_env_file=global_env_file,
        global_dotenv=global_dotenv,
        source=source,
        local_root=local_root,
        local_env_file=local_env_file,
        local_dotenv=local_dotenv,
        local=local,
        projects=projects,
        trust=trust,
        warnings=tuple(warnings),
    )


def _real(folder: Path) -> str:
    return os.path.realpath(folder)


def _other_tables(local: LocalSource) -> dict[str, Any]:
    """Everything but servers that a local config sets, as parsed (for the digest)."""
    return {
        "project": local.project,
        "settings": attrs.asdict(local.settings) if local.settings is not None else None,
        "profiles": {name: attrs.asdict(table) for name, table in local.profiles.items()},
        "groups": {name: attrs.asdict(table) for name, table in local.groups.items()},
    }


class _Folders:
    """Collects each folder's files (one folder may hold `.assern/` and an `mcpServers` file)."""

    def __init__(self) -> None:
        self._inputs: dict[str, dict[str, Any]] = {}

    def add(
        self,
        folder: Path,
        *,
        files: Sequence[Path],
        servers: ServerStacks,
        dotenv: Mapping[str, str] | None = None,
        dotenv_file: Path | None = None,
        other: Mapping[str, Any] | None = None,
    ) -> None:
        if not files:
            return
        found = self._inputs.setdefault(_real(folder), {"files": [], "servers": {}, "other": {}})
        found["files"] += files
        for name, layers in servers.items():
            found["servers"].setdefault(name, []).extend(
                Table(fields=attrs.asdict(layer.config), file=_real(layer.origin.file)) for layer in layers
            )
        if dotenv is not None:
            found["dotenv"], found["dotenv_file"] = dotenv, _real(dotenv_file) if dotenv_file else None
        found["other"].update(other or {})

    def projects(self) -> tuple[ProjectFiles, ...]:
        """Each folder's files that set anything (an empty `.assern/` only marks a root)."""
        every = (
            project_files(
                folder,
                files=tuple(dict.fromkeys(found["files"])),
                servers=found["servers"],
                dotenv=found.get("dotenv"),
                dotenv_file=found.get("dotenv_file"),
                other=found["other"],
            )
            for folder, found in self._inputs.items()
        )
        return tuple(project for project in every if project.servers or project.env_keys or project.sections)
