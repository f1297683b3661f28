"""`assernctl`: see and steer assern (everything but `assernctl config`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from mcp.shared.exceptions import MCPError

from assern.actors.config.resolve import default_assern_home
from assern.actors.config.spec import ConfigError
from assern.actors.listener.inproc import inproc_client
from assern.supervisor.cli import _environ, _loader, _passthrough, _with_tree, assern_main
from assern.supervisor.logging import configure_logging
from assern.supervisor.tree import Tree


def ctl_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="assernctl", description="Inspect and steer assern.")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="print the aggregated tools (starts the backends)")
    listing.add_argument("--json", action="store_true")
    call = sub.add_parser("call", help="call a prefixed tool (starts the backends directly)")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    for cmd in (listing, call):
        cmd.add_argument("--config", type=Path)
        cmd.add_argument("--project")
        cmd.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if args.command == "list":
        return assern_main(["list", *_passthrough(args), *(["--json"] if args.json else [])])
    try:
        arguments = json.loads(args.arguments)
    except ValueError as exc:
        print(f"assernctl: the arguments are not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("assernctl: the arguments must be a JSON object", file=sys.stderr)
        return 2
    environ = _environ()
    load = _loader(args.config, args.project, environ)
    try:
        config = load()
    except ConfigError as exc:
        print(f"assernctl: configuration error\n{exc}", file=sys.stderr)
        return 2

    async def body(tree: Tree) -> Any:
        async with inproc_client(tree.shared, "assernctl") as client:
            try:
                return await client.call_tool(args.tool, arguments)
            except MCPError as exc:
                return exc

    with configure_logging(default_assern_home(environ) / "logs", level=args.log_level):
        result = trio.run(_with_tree, config, load, body)
    if isinstance(result, MCPError):
        print(f"assernctl: {result.message}", file=sys.stderr)
        return 1
    print(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2))
    return 1 if result.is_error else 0
