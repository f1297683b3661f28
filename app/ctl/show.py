"""`assernctl status` and `assernctl list`: what runs, and the tools it serves."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import trio

from assern.actors.config.home import default_assern_home
from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.ctl.common import all_instances, find_instance, load_config, print_json, require
from assern.app.ctl.render import render_status, table
from assern.app.running import environ, list_rows, tool_rows
from assern.supervisor.io.logs import configure_logging

if TYPE_CHECKING:
    import argparse


def cmd_status(args: argparse.Namespace) -> int:
    if args.all:
        docs = []
        for instance in all_instances():
            try:
                docs.append(request(instance.slot.control, "status"))
            except (ControlUnavailable, ControlError):
                continue
        if args.json:
            print_json({"instances": docs})
        elif not docs:
            print("no assern instance runs", file=sys.stderr)
        else:
            print("\n\n".join("\n".join(render_status(doc)) for doc in docs))
        return 0 if docs else 1
    try:
        instance = require(args)
        doc = request(instance.slot.control, "status")
    except LookupError as exc:
        print(f"assernctl: {exc.args[0]}", file=sys.stderr)
        return 1
    if args.json:
        print_json(doc)
    else:
        print("\n".join(render_status(doc)))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    config, load = load_config(args)
    instance = None if args.fresh else find_instance(args)[1]
    if instance is not None:
        listing = request(instance.slot.control, "list", timeout=60.0)
        tools, problems = listing["tools"], listing["problems"]
        source: dict[str, Any] = {"source": "running-instance", "pid": instance.pid}
        source["slot"] = instance.slot.name
        marker = f"(from running instance) pid {instance.pid}, {instance.slot.name}"
    else:

        async def body(tree: Any) -> list[dict[str, str]]:
            return tool_rows(tree)

        with configure_logging(default_assern_home(environ()) / "logs", level=args.log_level):
            tools, problems = trio.run(list_rows, config, load, body)
        source = {"source": "fresh"}
        marker = "(fresh start: the backends were started for this listing)"
    if args.json:
        print_json({**source, "tools": tools, "problems": problems})
    else:
        print(marker)
        if not config.servers:
            print("No servers are configured.", file=sys.stderr)
        rows = [[t["name"], t["server"], t["description"]] for t in tools]
        print("\n".join(table(rows, ["NAME", "SERVER", "DESCRIPTION"])))
        for problem in problems:
            print(f"! {problem}", file=sys.stderr)
    return 0 if not problems else 1
