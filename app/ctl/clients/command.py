"""`assernctl clients [--json]`, `clients import`, `clients wire`, `clients restore`.

Exit codes: 0 done (or nothing to do); 1 refused (a file invalid, changed, read-only,
no backup) with nothing of that file changed; 2 a wrong argument or no HOME nor
ASSERN_HOME to work with. Values of env and headers are never printed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assern.actors.config.home import assern_home_folder
from assern.actors.config.project import find_local_root
from assern.app.ctl.clients.files import FileRefused
from assern.app.ctl.clients.importing import ImportRefused, apply, plan_import
from assern.app.ctl.clients.locations import CLIENTS
from assern.app.ctl.clients.survey import ClientFinding, Survey, survey_clients
from assern.app.ctl.clients.wire import (
    Context,
    WireRefused,
    advice,
    apply_wire,
    assern_executable,
    assern_files,
    defined_in_dotenv,
    plan_wire,
    referenced_variables,
    restore,
)
from assern.app.ctl.common import Usage, print_json

if TYPE_CHECKING:
    import argparse


def _home_short(path: Path, home: str | None) -> str:
    text = str(path)
    if home and (text == home or text.startswith(home.rstrip("/") + "/")):
        return "~" + text[len(home.rstrip("/")) :]
    return text


def _assern_home(environ: dict[str, str]) -> Path | None:
    if environ.get("ASSERN_HOME") or environ.get("HOME"):
        return Path(assern_home_folder(environ))
    return None


def _survey(environ: dict[str, str]) -> Survey:
    return survey_clients(environ, Path.cwd(), assern_home=_assern_home(environ))


def _kind(entry: Any) -> str:
    if isinstance(entry.get("command"), str):
        return f"command {os.path.basename(entry['command'])}"
    url = entry.get("url") or entry.get("serverUrl") or entry.get("httpUrl")
    if isinstance(url, str):
        host = url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
        return f"url {host}"
    return "?"


def survey_document(survey: Survey) -> dict[str, Any]:
    """`assernctl clients --json` (documented in docs/clients.md)."""
    return {
        "clients": [
            {
                "name": finding.client,
                "reaches_assern": finding.wired,
                "files": [
                    {
                        "path": str(f.location.path),
                        "scope": f.location.scope,
                        "label": f.location.label,
                        "key": list(f.location.key),
                        "exists": f.exists,
                        "error": f.error,
                        "problems": list(f.problems),
                    }
                    for f in finding.files
                ],
                "servers": [
                    {
                        "name": s.server.name,
                        "file": str(s.server.location.path),
                        "scope": s.server.location.scope,
                        "reach": s.reach,
                        "backend": s.backend,
                        "disabled": s.server.disabled,
                    }
                    for s in finding.servers
                ],
            }
            for finding in survey.clients
        ],
        "assern": {
            "files": [str(path) for path in survey.backends.files],
            "servers": list(survey.backends.launches),
            "problem": survey.backends.problem,
        },
        "notes": list(survey.notes),
    }


def _render(survey: Survey, home: str | None) -> str:
    if not survey.clients:
        return "no MCP client found for this user and folder"
    lines = []
    for finding in survey.clients:
        reach = "reaches assern" if finding.wired else "does not reach assern"
        lines.append(f"{finding.client}: {reach}")
        for file in finding.files:
            if not file.exists:
                continue
            where = _home_short(file.location.path, home)
            key = ".".join(file.location.key) if file.location.key[0] == "projects" else ""
            servers = [s for s in finding.servers if s.server.location == file.location]
            if key and not servers:
                continue
            label = f"{file.location.label}" + (f", {file.location.key[-1]}" if not key else "")
            state = f"error: {file.error}" if file.error else f"{len(servers)} server(s)"
            lines.append(f"  {where} ({label}): {state}")
            lines += [f"    problem: {problem}" for problem in file.problems]
            for s in servers:
                what = {
                    "assern": "assern itself",
                    "duplicate": f"also assern's {s.backend!r}",
                    "bypass": "bypasses assern",
                }[s.reach]
                off = ", disabled" if s.server.disabled else ""
                lines.append(f"    {s.server.name}: {what}{off} ({_kind(s.server.entry)})")
    for note in survey.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _finding(survey: Survey, client: str) -> ClientFinding:
    finding = next((f for f in survey.clients if f.client == client), None)
    if finding is None:
        raise WireRefused(
            f"{client}: no config file found for this user and folder (see `assernctl clients`)"
        )
    return finding


def _clients_arg(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        raise Usage(f"unknown client(s) {', '.join(unknown)}: expected {', '.join(CLIENTS)}")
    return names


def cmd_clients(args: argparse.Namespace) -> int:
    environ = dict(os.environ)
    home = environ.get("HOME")
    action = getattr(args, "clients_command", None)
    try:
        if action is None:
            survey = _survey(environ)
            if args.json:
                print_json(survey_document(survey))
            else:
                print(_render(survey, home))
            return 0
        assern_home = _assern_home(environ)
        if assern_home is None:
            raise Usage("neither HOME nor ASSERN_HOME is set: there is no assern configuration to use")
        if action == "import":
            return _import(args, environ, assern_home, home)
        client = _clients_arg([args.client])[0]
        survey = _survey(environ)
        if action == "wire":
            return _wire(client, survey, environ, assern_home, home)
        return _restore(client, survey, assern_home, home)
    except (WireRefused, ImportRefused, FileRefused) as exc:
        print(f"assernctl: {exc}", file=sys.stderr)
        return 1


def _import(args: argparse.Namespace, environ: dict[str, str], assern_home: Path, home: str | None) -> int:
    clients = _clients_arg(list(args.clients))
    plan = plan_import(_survey(environ), clients, assern_home=assern_home, environ=environ)
    for target in plan.targets:
        for added in target.added:
            moved = (
                f"; secrets moved to {target.dotenv.name}: {', '.join(added.moved)}" if added.moved else ""
            )
            off = " (disabled)" if added.table.get("disabled") else ""
            print(
                f"{added.source.client}: {added.source.name} -> [servers.{added.name}]{off} "
                f"in {_home_short(target.config, home)}{moved}"
            )
            for note in added.notes:
                print(f"  note: {note}")
    for skipped in plan.skipped:
        print(f"{skipped.source.client}: {skipped.source.name}: {skipped.reason}")
    for clash in plan.clashes:
        print(f"clash: {clash}", file=sys.stderr)
    for warning in plan.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not plan.targets:
        print("nothing to import: assern has every server of " + ", ".join(clients))
        return 0
    if args.dry_run:
        print("dry run: nothing was written")
        return 0
    for path in apply(plan):
        print(f"wrote {_home_short(path, home)}")
    for target in plan.targets:
        if target.root is not None:
            print(f"next: `assernctl trust` in {target.root}, so that assern uses its .assern/config.toml")
    print("next: `assernctl clients wire CLIENT` points a client at assern")
    return 0


def _context(assern_home: Path, environ: dict[str, str]) -> Context:
    root = find_local_root(Path.cwd())
    files = assern_files(assern_home, root)
    dotenvs = [assern_home / ".env", *([root / ".assern" / ".env"] if root is not None else [])]
    return Context(
        executable=assern_executable(),
        assern_home=assern_home,
        assern_home_set=bool(environ.get("ASSERN_HOME")),
        variables=tuple(referenced_variables(files)),
        defined=frozenset(defined_in_dotenv(dotenvs)),
    )


def _wire(client: str, survey: Survey, environ: dict[str, str], assern_home: Path, home: str | None) -> int:
    finding = _finding(survey, client)
    context = _context(assern_home, environ)
    edits, kept = plan_wire(finding, context)
    if not edits:
        print(f"{client}: nothing to change (it reaches assern, and assern runs none of its other entries)")
    for written in apply_wire(client, edits, assern_home):
        parts = []
        if written.removed:
            parts.append(f"removed {', '.join(written.removed)} (assern runs them)")
        if written.added:
            parts.append(f"added 'assern' ({context.executable} serve)")
        print(f"{client}: {_home_short(written.path, home)}: {'; '.join(parts)}")
        print(f"  backup: {written.backup} (`assernctl clients restore {client}` puts it back)")
    for entry in kept:
        print(f"kept (assern does not run it): {entry}; `assernctl clients import {client}` first")
    for line in advice(client, context):
        print(f"note: {line}")
    return 0


def _restore(client: str, survey: Survey, assern_home: Path, home: str | None) -> int:
    finding = next((f for f in survey.clients if f.client == client), None)
    paths = [f.location.path for f in finding.files] if finding is not None else []
    for restored in restore(client, paths, assern_home):
        state = "restored" if restored.changed else "already as backed up"
        print(f"{client}: {_home_short(restored.path, home)}: {state} (from {restored.backup})")
    return 0


def add_parser(sub: Any) -> None:
    """`assernctl clients` and its subcommands, for app/ctl/parser.py."""
    clients = sub.add_parser(
        "clients",
        help="the MCP clients found here (Claude Code, Cursor, VS Code...): list, import, wire, restore",
        description="The MCP clients of this user and folder and their servers (see docs/clients.md).",
    )
    clients.add_argument("--json", action="store_true", help="machine-readable output")
    commands = clients.add_subparsers(dest="clients_command")
    names = ", ".join(CLIENTS)
    importing = commands.add_parser("import", help="add clients' servers to assern's configuration")
    importing.add_argument("clients", nargs="+", metavar="CLIENT", help=names)
    importing.add_argument("--dry-run", action="store_true", help="say what would be written; write nothing")
    wire = commands.add_parser("wire", help="point a client at assern (its file backed up first)")
    wire.add_argument("client", metavar="CLIENT", help=names)
    back = commands.add_parser("restore", help="put back a client's files as they were before `wire`")
    back.add_argument("client", metavar="CLIENT", help=names)
