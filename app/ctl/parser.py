"""`assernctl`'s command line (every group but `config`) and its dispatch."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assern.app.control_client import ControlUnavailable
from assern.app.ctl.call import cmd_call
from assern.app.ctl.clients.command import add_parser as add_clients_parser
from assern.app.ctl.clients.command import cmd_clients
from assern.app.ctl.common import Usage
from assern.app.ctl.context import cmd_context
from assern.app.ctl.daemon import cmd_daemon
from assern.app.ctl.doctor import cmd_doctor
from assern.app.ctl.logs import cmd_logs
from assern.app.ctl.show import cmd_list, cmd_search, cmd_status
from assern.app.ctl.steer import cmd_reload, cmd_server, cmd_shutdown
from assern.app.ctl.tokens import cmd_token
from assern.app.ctl.trust import cmd_trust, cmd_untrust
from assern.app.ctl.web import cmd_web
from assern.app.daemon.launch import DRAIN_DEADLINE
from assern.app.running import VersionAction

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def _config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="config file (as given to `assern serve`)")
    parser.add_argument("--project", help="project (default: detected from the directory)")
    parser.add_argument("--log-level", default="info", help="log level of a direct start")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="assernctl",
        description="Inspect and steer assern. Commands act on the instance that serves the current "
        "directory's configuration (see --config and --project).",
    )
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    # Listed for --help; `assernctl config ...` is dispatched before this parser (ctl/__init__.py).
    sub.add_parser(
        "config",
        help="inspect the configuration without starting anything: show, explain, validate, init, import",
    )

    status = sub.add_parser("status", help="the running instance and each backend")
    status.add_argument("--all", action="store_true", help="every running instance")
    listing = sub.add_parser("list", help="the aggregated tools (from the running instance if any)")
    listing.add_argument("--fresh", action="store_true", help="start the backends anew for this listing")
    listing.add_argument("--profile", help="what a client of [profiles.NAME] sees")
    search = sub.add_parser(
        "search",
        help="the tools a client's search_tools finds for a task (from the running instance if any)",
    )
    search.add_argument("query", nargs="+", help="the task, in a few words or a sentence")
    search.add_argument("--limit", type=int, help="how many tools at most (1-50, default 8)")
    search.add_argument("--server", help="search only this server's tools")
    search.add_argument("--fresh", action="store_true", help="start the backends anew for this search")
    search.add_argument("--profile", help="what a client of [profiles.NAME] finds")
    search.add_argument(
        "--after", metavar="SERVER", help="search as a connection that called this server last (it is lifted)"
    )
    search.add_argument(
        "--explain",
        action="store_true",
        help="why each tool ranks where it does (words, fields, meaning, learned boost)",
    )
    call = sub.add_parser(
        "call",
        help="call a tool: TOOL [ARGS] or SERVER TOOL [ARGS]",
        description="Call a tool through the running instance (or, without one, by starting the backends). "
        "TOOL is a prefixed name; with SERVER (a configured name, or a command line such as "
        "'npx -y some-server') TOOL is the server's own tool name. ARGS is a JSON object.",
    )
    call.add_argument("target", nargs="+", metavar="[SERVER] TOOL [ARGS]")
    call.add_argument("--no-direct", action="store_true", help="fail instead of starting the backends")
    for action in ("restart", "stop", "start"):
        command = sub.add_parser(action, help=f"{action} one backend of the running instance")
        command.add_argument("server")
    sub.add_parser("reload", help="resolve the configuration again and apply the difference")
    token = sub.add_parser("token", help="the HTTP front's bearer tokens: create NAME, list, revoke NAME")
    token.add_argument("action", choices=("create", "list", "revoke"))
    token.add_argument("name", nargs="?", help="the token's name (create, revoke)")
    sub.add_parser("shutdown", help="stop the running instance and wait until it is gone")
    daemon = sub.add_parser(
        "daemon",
        help="the workstation daemon: restart (a fresh daemon takes over; no client is closed)",
    )
    daemon.add_argument("action", choices=("restart",))
    daemon.add_argument(
        "--drain",
        type=float,
        default=DRAIN_DEADLINE,
        metavar="SECONDS",
        help=f"how long the old daemon's calls in flight may run on (default {DRAIN_DEADLINE:g})",
    )
    web = sub.add_parser(
        "web",
        help="open the running instance's status page in the browser (signed in with a one-time code)",
    )
    web.add_argument(
        "--print", action="store_true", help="print its one-time sign-in address instead of opening a browser"
    )
    for command in sub.choices.values():
        _config_options(command)
        command.add_argument("--json", action="store_true", help="machine-readable output")

    _context_parser(sub)
    add_clients_parser(sub)

    doctor = sub.add_parser(
        "doctor",
        help="check the configuration, PATH, files, sockets, the instance and its backends; changes nothing",
        description="Check what makes assern work here, with or without a running instance, and say how "
        "to fix what is off: one line per check (ok, warn or fail, its id, the finding, a fix: line), then "
        "a verdict. Exit 0 with no failure, 1 with any (with --strict, warnings count), 2 for a usage error.",
    )
    doctor.add_argument("--strict", action="store_true", help="count warnings as failures")
    doctor.add_argument("--server", help="look at this server alone (its command and its backend)")
    doctor.add_argument("--config", type=Path, help="config file (as given to `assern serve`)")
    doctor.add_argument("--project", help="project (default: detected from the directory)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    _trust_parser(sub)

    logs = sub.add_parser("logs", help="print (and follow) the log, readably")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("-n", "--lines", type=int, default=20, help="how many last lines first (-1: all)")
    logs.add_argument("--server", help="only events of this server")
    logs.add_argument("--level", help="only this level and above: debug, info, warning, error")
    logs.add_argument("--grep", help="only lines containing this text (case-insensitive)")
    logs.add_argument("--json", action="store_true", help="the raw JSON lines")
    return parser


def _trust_parser(sub: Any) -> None:
    """`assernctl trust [PATH]`, `trust --list`, `untrust PATH` (app/ctl/trust.py)."""
    trust = sub.add_parser(
        "trust",
        help="review a folder's own configuration (.assern/, mcp-config.json) and let assern run it",
        description="Show what the configuration files of PATH (default: the current folder) would "
        "start, ask, and record them as trusted; a running instance applies it at once. See "
        "docs/security.md.",
    )
    trust.add_argument("path", nargs="?", metavar="PATH", help="the folder (default: the current one)")
    trust.add_argument("--yes", "-y", action="store_true", help="trust without asking (for scripts)")
    trust.add_argument("--list", action="store_true", help="the trusted folders, and whether they changed")
    untrust = sub.add_parser("untrust", help="forget a folder's trust: its configuration stops running")
    untrust.add_argument("path", metavar="PATH", help="the folder (it may be gone already)")
    for command in (trust, untrust):
        command.add_argument("--config", type=Path, help="config file (as given to `assern serve`)")
        command.add_argument("--json", action="store_true", help="machine-readable output")


def _context_parser(sub: Any) -> None:
    """`assernctl context status|search|reindex` (app/ctl/context.py)."""
    context = sub.add_parser(
        "context",
        help="the context servers' indexes: status, search QUERY, reindex",
        description='The indexes of the builtin context servers (builtin = "context"): see docs/context.md.',
    )
    commands = context.add_subparsers(dest="context_command", required=True)
    status = commands.add_parser(
        "status", help="each context server's index: files, chunks, size, pending, watcher, progress"
    )
    status.add_argument("--watch", action="store_true", help="follow the indexes until each one is current")
    search = commands.add_parser("search", help="search the indexes as the semantic_search tool does")
    search.add_argument("query", nargs="+", help="the question or the names to look for")
    search.add_argument("--top-k", type=int, help="how many results per server (1-50, default 10)")
    search.add_argument("--path", help="only files matching this glob (src/**/*.py)")
    reindex = commands.add_parser(
        "reindex", help="the running context servers check every file again (hash, index, drop)"
    )
    reindex.add_argument("--full", action="store_true", help="rebuild the database from scratch")
    reindex.add_argument("--no-wait", action="store_true", help="start the reindex and return at once")
    reindex.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop waiting after this long (default 600); the reindex goes on in the background",
    )
    for command in commands.choices.values():
        command.add_argument("--server", help="only this context server")
        _config_options(command)
        command.add_argument("--json", action="store_true", help="machine-readable output")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": cmd_status,
    "list": cmd_list,
    "search": cmd_search,
    "call": cmd_call,
    "restart": cmd_server,
    "stop": cmd_server,
    "start": cmd_server,
    "reload": cmd_reload,
    "shutdown": cmd_shutdown,
    "daemon": cmd_daemon,
    "token": cmd_token,
    "logs": cmd_logs,
    "context": cmd_context,
    "clients": cmd_clients,
    "doctor": cmd_doctor,
    "trust": cmd_trust,
    "untrust": cmd_untrust,
    "web": cmd_web,
}


def ctl_main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except Usage as exc:
        print(f"assernctl: {exc}", file=sys.stderr)
        return 2
    except ControlUnavailable as exc:
        print(f"assernctl: the instance stopped answering: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `assernctl … | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
