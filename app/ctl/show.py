"""`assernctl status`, `list` and `search`: what runs, the tools it serves, and which
of them a search finds."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import trio

from assern.actors.config.home import default_assern_home
from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.ctl.common import (
    Usage,
    all_instances,
    daemon_identity,
    find_instance,
    load_config,
    no_instance,
    print_json,
    socket_dir,
    workstation_daemon,
)
from assern.app.ctl.render import render_daemon, render_status, table
from assern.app.daemon.runtime_file import NotVerified, verify
from assern.app.running import environ, list_rows, tool_rows, with_tree
from assern.supervisor.io.logs import configure_logging

if TYPE_CHECKING:
    import argparse

    from assern.actors.config.spec import ResolvedConfig


def cmd_status(args: argparse.Namespace) -> int:
    if args.all:
        docs = []
        for instance in all_instances():
            try:
                docs.append(instance.ask("status"))
            except (ControlUnavailable, ControlError):
                continue
        if args.json:
            print_json({"instances": docs})
        elif not docs:
            print("no assern instance runs", file=sys.stderr)
        else:
            print("\n\n".join("\n".join(render_status(doc)) for doc in docs))
        return 0 if docs else 1
    daemon = workstation_daemon()
    try:
        config, found = find_instance(args)
        if found is None and daemon is None:
            raise LookupError(no_instance(config))
        doc: dict[str, Any] = found.ask("status") if found is not None else {}
        if daemon is not None:
            doc["workstation"] = request(daemon[0].control, "status")
            doc["workstation"].update(daemon_identity(*daemon))
    except LookupError as exc:
        print(f"assernctl: {exc.args[0]}", file=sys.stderr)
        stale = verify(socket_dir())
        if isinstance(stale, NotVerified) and stale.found:
            print(f"assernctl: no daemon runs: {stale.reason}", file=sys.stderr)
        return 1
    if args.json:
        print_json(doc)
        return 0
    lines = render_daemon(doc["workstation"]) if "workstation" in doc else []
    if found is None:
        lines.append(
            "  no client of this folder's configuration is connected (its view starts with the first)"
        )
    else:
        lines += ([""] if lines else []) + render_status(doc)
    print("\n".join(lines))
    return 0


def _profile(args: argparse.Namespace, config: ResolvedConfig) -> dict[str, Any]:
    """`{"profile": NAME}` when `--profile` names one of `config`'s profiles, else {}.

    Raises:
        Usage: no profile of that name.
    """
    profile = getattr(args, "profile", None)
    problem = config.settings.profile_problem(profile)
    if problem is not None:
        raise Usage(problem)
    return {"profile": profile} if profile is not None else {}


def cmd_list(args: argparse.Namespace) -> int:
    config, load = load_config(args)
    view = _profile(args, config)
    instance = None if args.fresh else find_instance(args)[1]
    if instance is not None:
        listing = instance.ask("list", timeout=60.0, **view)
        tools, problems = listing["tools"], listing["problems"]
        source: dict[str, Any] = {"source": "running-instance", "pid": instance.pid}
        source["slot"] = instance.slot.name
        marker = f"(from running instance) pid {instance.pid}, {instance.slot.name}"
    else:

        async def body(tree: Any) -> list[dict[str, str]]:
            return tool_rows(tree, view.get("profile"))

        with configure_logging(default_assern_home(environ()) / "logs", level=args.log_level):
            tools, problems = trio.run(list_rows, config, load, body)
        source = {"source": "fresh"}
        marker = "(fresh start: the backends were started for this listing)"
    if args.json:
        print_json({**source, **view, "tools": tools, "problems": problems})
    else:
        print(marker + (f", profile {view['profile']}" if view else ""))
        if not config.servers:
            print("No servers are configured.", file=sys.stderr)
        rows = [[t["name"], t["server"], t["description"]] for t in tools]
        print("\n".join(table(rows, ["NAME", "SERVER", "DESCRIPTION"])))
        for problem in problems:
            print(f"! {problem}", file=sys.stderr)
    return 0 if not problems else 1


def cmd_search(args: argparse.Namespace) -> int:
    """The tools a client's `search_tools` would find now (from the running instance, else
    from backends started for this search)."""
    query: dict[str, Any] = {"query": " ".join(args.query)}
    if args.limit is not None:
        query["limit"] = args.limit
    if args.server is not None:
        query["server"] = args.server
    config, load = load_config(args)
    view = _profile(args, config)
    instance = None if args.fresh else find_instance(args)[1]
    extra: dict[str, Any] = {"explain": True} if args.explain else {}
    if args.after is not None:
        extra["after"] = args.after
    if instance is not None:
        doc = instance.ask("search", timeout=60.0, **query, **view, **extra)
    else:
        from assern.actors.listener import exposure
        from assern.actors.search import learned as use
        from assern.actors.search.explain import explain_search

        counts = None
        if config.settings.search.learn == "on":
            try:
                counts = use.load(use.use_file(default_assern_home(environ())))
            except (OSError, use.BadUseFile):
                counts = use.NOTHING

        async def body(tree: Any) -> dict[str, Any]:
            catalog, directory = tree.views.cell(view.get("profile")).value, tree.directory.value
            result = exposure.search_anyway(catalog, directory, query, learned=counts, after=args.after)
            found = exposure.search_document(result)
            if args.explain and not result.is_error:
                names = [tool["name"] for tool in found.get("tools", [])]
                found["explain"] = explain_search(
                    catalog, directory, query, names, learned=counts, after=args.after
                )
            return found

        with configure_logging(default_assern_home(environ()) / "logs", level=args.log_level):
            doc = trio.run(with_tree, config, load, body)
    if args.json:
        print_json(doc)
    else:
        print(doc["text"], file=sys.stderr if doc["is_error"] else sys.stdout)
        if args.explain:
            from assern.actors.search.explain import explanation_lines

            for name, entry in doc.get("explain", {}).items():
                print("\n".join(explanation_lines(name, entry)))
    return 1 if doc["is_error"] else 0
