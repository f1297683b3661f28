"""The configuration's checks: it resolves, its variables are defined, it yields servers,
and each server's command is where its instance will look for it."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from assern.actors.config.env import UNDEFINED
from assern.app.ctl.doctor.finding import Finding, fail, ok, warn
from assern.app.no_servers import DOCTOR_ID as NO_SERVERS
from assern.app.no_servers import config_files, no_servers_problem

if TYPE_CHECKING:
    from pathlib import Path

    from assern.app.ctl.doctor.facts import Facts, Launcher

RESOLVES = "config.resolves"
UNRESOLVED = "env.unresolved"
LAUNCHER = "server.launcher"

_QUOTED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")

#: How to install the launchers MCP servers are most often started with.
INSTALL = {
    "npx": "install Node.js, which brings npx: https://nodejs.org/en/download",
    "npm": "install Node.js, which brings npm: https://nodejs.org/en/download",
    "node": "install Node.js: https://nodejs.org/en/download",
    "uvx": "python3 -m pip install --user uv",
    "uv": "python3 -m pip install --user uv",
    "docker": "install Docker: https://docs.docker.com/get-docker/",
}


def undefined(problem: str) -> bool:
    """Whether a configuration problem is an undefined `${VAR}`."""
    return problem.startswith(UNDEFINED)


def _about_server(problem: str, server: str | None) -> bool:
    """Whether a "WHAT @ key.path" problem concerns `server` (None: any)."""
    if server is None:
        return True
    _, _, path = problem.rpartition(" @ ")
    return f"servers.{server}." in f"{path}."


def _more(items: list[str]) -> str:
    return items[0] + (f" (and {len(items) - 1} more)" if len(items) > 1 else "")


def config_resolves(facts: Facts) -> list[Finding]:
    """`config.resolves`: the configuration resolves as `assern serve` resolves it here."""
    error = facts.config_error
    if error is not None:
        where = f"{error.file}: " if error.file else ""
        fix = facts.command("config", "validate")
        others = [problem for problem in error.problems if not undefined(problem)]
        if others:
            return [fail(RESOLVES, f"{where}{_more(others)}", fix)]
        count = len(error.problems)
        summary = f"{where}does not resolve: {count} undefined variable reference(s) (see {UNRESOLVED})"
        return [fail(RESOLVES, summary, fix)]
    config = facts.config
    if config is None:
        return []
    files = config_files(config.files)
    project = f"project {config.project}" if config.project else "no project"
    where = ", ".join(str(path) for path in files) if files else "no configuration file"
    summary = f"resolves ({where}; {project}): {len(config.servers)} server(s)"
    if config.warnings:
        summary += f"; {_more(list(config.warnings))}"
        return [warn(RESOLVES, summary, facts.command("config", "validate"))]
    return [ok(RESOLVES, summary)]


def env_unresolved(facts: Facts) -> list[Finding]:
    """`env.unresolved`: every `${VAR}` the servers use is defined (environment or .env)."""
    error = facts.config_error
    if error is None:
        return [ok(UNRESOLVED, "every ${VAR} of the configuration is defined")] if facts.config else []
    found = []
    dotenv = facts.assern_home / ".env"
    for problem in error.problems:
        if not undefined(problem) or not _about_server(problem, facts.server):
            continue
        names = _QUOTED.findall(problem.partition(" (")[0]) or ["NAME"]
        where = f" in {error.file}" if error.file else ""
        found.append(fail(UNRESOLVED, f"{problem}{where}", define(names, dotenv)))
    return found


def define(names: list[str], dotenv: Path) -> str:
    """The command that defines `names` in the global .env (VALUE to be replaced)."""
    target = shlex.quote(str(dotenv))
    if len(names) == 1:
        return f"echo '{names[0]}=VALUE' >> {target}"
    lines = " ".join(f"'{name}=VALUE'" for name in names)
    return f"printf '%s\\n' {lines} >> {target}"


def config_no_servers(facts: Facts) -> list[Finding]:
    """`config.no_servers`: the configuration gives assern something to serve."""
    config = facts.config
    if config is None:
        return []
    problem = no_servers_problem(config)
    if problem is None:
        return [ok(NO_SERVERS, f"servers: {', '.join(config.servers)}")]
    files = config_files(config.files)
    if files:
        problem += ": add a [servers.NAME] table, or enable one"
        fix = f"${{EDITOR:-vi}} {shlex.quote(str(files[0]))}"
    else:
        problem += ": `assernctl config init` writes a starter with one server"
        fix = "assernctl config init"
    return [fail(NO_SERVERS, problem, fix)]


def _missing(name: str, server: str) -> str:
    full_path = f'command = "/path/to/{name}" in [servers.{server}]'
    return INSTALL.get(name) or f"install {name}, or give its full path: {full_path}"


def _launcher(launcher: Launcher) -> Finding | None:
    """The failure of one server's command, or None when it is there."""
    name, server = launcher.command, launcher.server
    if launcher.found is None:
        if launcher.searched is None:
            summary = f"server '{server}': {name} does not exist or is not executable"
            return fail(LAUNCHER, summary, f"ls -l {shlex.quote(name)}")
        summary = f"server '{server}': {name} is not on {launcher.origin}: {launcher.searched or '(empty)'}"
        if launcher.elsewhere is not None:
            summary += f"; this shell finds it at {launcher.elsewhere}"
            return fail(LAUNCHER, summary, f'command = "{launcher.elsewhere}" in [servers.{server}]')
        return fail(LAUNCHER, summary, _missing(name, server))
    if launcher.interpreter is not None and launcher.interpreter_found is None:
        summary = (
            f"server '{server}': {name} ({launcher.found}) runs {launcher.interpreter}, "
            f"which is not on {launcher.origin}"
        )
        return fail(LAUNCHER, summary, _missing(launcher.interpreter, server))
    return None


def server_launcher(facts: Facts) -> list[Finding]:
    """`server.launcher`: each stdio server's command (and what its `#!` line runs) is on
    the PATH its instance will use."""
    if facts.config is None:
        return []
    found = [_launcher(launcher) for launcher in facts.launchers]
    problems = [finding for finding in found if finding is not None]
    if problems:
        return problems
    if not facts.launchers:
        return [ok(LAUNCHER, "no server starts a command")]
    here = [f"{launcher.server} ({launcher.found})" for launcher in facts.launchers]
    return [ok(LAUNCHER, f"every command is found: {', '.join(here)}")]
