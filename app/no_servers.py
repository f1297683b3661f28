"""Zero servers is never silent: what `assern serve`, `assern daemon` and `assernctl
doctor` say when a configuration yields no server, and where it was looked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from assern.actors.config.spec import ResolvedConfig

#: The `assernctl doctor` check (and log event field) of this problem.
DOCTOR_ID = "config.no_servers"


def config_files(paths: tuple[Path, ...]) -> list[Path]:
    """The configuration files among `paths` (the .env files left out: they hold values,
    never servers)."""
    return [path for path in paths if path.name != ".env" and path.suffix != ".env"]


def looked_at(config: ResolvedConfig) -> list[Path]:
    """The files that give this configuration its servers: those that exist, or, when none
    does, the files looked for (the global config unless `--config` replaced it, and the
    `.assern/config.toml` of the project root or the working folder)."""
    return config_files(config.files) or config_files(config.potential_files)


def no_servers_problem(config: ResolvedConfig) -> str | None:
    """Why `config` serves nothing, in one sentence naming the files; None when it has servers."""
    if config.servers:
        return None
    paths = ", ".join(str(path) for path in looked_at(config)) or "nothing"
    if not config_files(config.files):
        return f"no configuration found (looked for {paths})"
    return f"{paths} yields no server (none defined, or every one disabled or left out by the project)"


def no_servers_line(config: ResolvedConfig) -> str | None:
    """The stderr line of a start that will serve no server; None when it serves some."""
    problem = no_servers_problem(config)
    if problem is None:
        return None
    return f"assern: no server to serve: {problem}; see `assernctl doctor`"
