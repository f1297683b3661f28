"""`assernctl doctor [--json] [--strict] [--server NAME]`: what is off, and how to fix it.

It changes nothing and works with or without a running instance: the facts are gathered
once (gather.py: the configuration as `assern serve` resolves it here, PATH, the files
and sockets, what the instance's control socket says), every check in the registry
(checks/) judges them, and each finding prints as `ok`, `warn` or `fail` with its stable
id and, for the last two, its fix. Exit status: 0 with no failure (warnings allowed;
`--strict` fails them), 1 with any, 2 for a usage error. docs/command-line.md lists
every check id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assern.app.ctl.common import Usage, print_json
from assern.app.ctl.doctor.checks import run_checks
from assern.app.ctl.doctor.gather import gather
from assern.app.ctl.doctor.render import exit_code, json_document, text_lines

if TYPE_CHECKING:
    import argparse

    from assern.app.ctl.doctor.facts import Facts


def known_servers(facts: Facts) -> set[str]:
    """The servers `--server` may name: the configuration's and the running instance's."""
    names = set(facts.config.servers) if facts.config is not None else set()
    status = facts.instance.status if facts.instance is not None else None
    for backend in (status or {}).get("backends") or ():
        names.add(str(backend.get("name")))
    return names


def cmd_doctor(args: argparse.Namespace) -> int:
    facts = gather(config_path=args.config, project=args.project, server=args.server)
    known = known_servers(facts)
    if args.server is not None and known and args.server not in known:
        raise Usage(f"no server {args.server!r} in this configuration (servers: {', '.join(sorted(known))})")
    findings = run_checks(facts)
    if args.json:
        print_json(json_document(findings, strict=args.strict))
    else:
        print("\n".join(text_lines(findings, strict=args.strict)))
    return exit_code(findings, strict=args.strict)
