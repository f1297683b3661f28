"""`assernctl call`: a tool called through the running instance, or, without one, on
backends started for this one call (direct mode), or on a literal command line."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from assern.actors.config.home import default_assern_home
from assern.actors.config.spec import ResolvedConfig, ServerSpec, Settings
from assern.app.control_client import ControlError
from assern.app.ctl.common import Usage, find_instance, load_config, no_instance, print_json
from assern.app.running import environ, with_tree
from assern.supervisor.io.logs import configure_logging

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence


def _print_call_result(result: Mapping[str, Any]) -> int:
    print_json(result)
    return 1 if result.get("isError") else 0


def _looks_like_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


def _call_target(items: Sequence[str]) -> tuple[str | None, str, str]:
    """(server, tool, arguments JSON) from `TOOL [ARGS]` or `SERVER TOOL [ARGS]`."""
    if len(items) == 1:
        return None, items[0], "{}"
    if len(items) == 2:
        if _looks_like_json(items[1]):
            return None, items[0], items[1]
        return items[0], items[1], "{}"
    if len(items) == 3:
        return items[0], items[1], items[2]
    raise Usage("call takes TOOL [ARGS] or SERVER TOOL [ARGS]")


def _is_command_line(server: str) -> bool:
    """Whether SERVER is a literal command line rather than a configured server's name."""
    argv = shlex.split(server)
    return len(argv) > 1 or (bool(argv) and (shutil.which(argv[0]) is not None or os.path.isfile(argv[0])))


def _literal_config(command_line: str) -> ResolvedConfig:
    argv = shlex.split(command_line)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", Path(argv[0]).stem)[:32] or "server"
    spec = ServerSpec(name=name, transport="stdio", command=argv[0], args=tuple(argv[1:]), env=environ())
    return ResolvedConfig(settings=Settings(), servers={name: spec}, project=None, files=())


async def _direct_call(
    config: ResolvedConfig, load: Callable[[], ResolvedConfig], server: str | None, tool: str, arguments: Any
) -> dict[str, Any]:
    from assern.actors.jsonrpc.errors import RpcError
    from assern.actors.listener.inproc import call_tool

    async def body(tree: Any) -> dict[str, Any]:
        name = tool
        if server is not None:
            routes = [r for r in tree.catalog.value.tools.values() if r.server == server]
            match = [r.name for r in routes if r.original == tool]
            if not match:
                own = ", ".join(sorted(r.original for r in routes)) or "none (is it running?)"
                return {"error": f"server '{server}' has no tool '{tool}'; its tools: {own}"}
            name = match[0]
        try:
            return {"result": await call_tool(tree.shared, name, arguments, "assernctl")}
        except RpcError as exc:
            return {"error": exc.message}

    return await with_tree(config, load, body)


def cmd_call(args: argparse.Namespace) -> int:
    server, tool, text = _call_target(args.target)
    try:
        arguments = json.loads(text)
    except ValueError as exc:
        raise Usage(f"the arguments are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise Usage("the arguments must be a JSON object")
    config, load = load_config(args)
    literal = server is not None and server not in config.servers and _is_command_line(server)
    if server is not None and server not in config.servers and not literal:
        known = ", ".join(config.servers) or "none"
        raise Usage(f"unknown server '{server}' (configured: {known}; or give a command line)")
    instance = None if literal else find_instance(args)[1]
    if instance is not None:
        fields: dict[str, Any] = {"tool": tool, "arguments": arguments}
        if server is not None:
            fields["server"] = server
        try:
            answer = instance.ask("call", timeout=None, **fields)
        except ControlError as exc:
            print(f"assernctl: {exc.message}", file=sys.stderr)
            return 1
        return _print_call_result(answer["result"])
    if args.no_direct:
        print(f"assernctl: {no_instance(config)} (and --no-direct)", file=sys.stderr)
        return 1
    if literal:
        assert server is not None
        config = _literal_config(server)
        server = next(iter(config.servers))
        load = lambda: config  # noqa: E731 - the ad-hoc config never changes
    elif server is not None:
        config = attrs.evolve(config, servers={server: config.servers[server]})
        load = lambda: config  # noqa: E731
    with configure_logging(default_assern_home(environ()) / "logs", level=args.log_level):
        outcome = trio.run(_direct_call, config, load, server, tool, arguments)
    if "error" in outcome:
        print(f"assernctl: {outcome['error']}", file=sys.stderr)
        return 1
    return _print_call_result(outcome["result"])
