"""`assernctl`: see and steer assern (everything but `assernctl config`).

Most commands talk to the running instance of the current directory's resolved
configuration through its control socket (README, Operations): `status`, `list`,
`call`, `restart|stop|start SERVER`, `reload`, `shutdown`. Without one, `list` and
`call` start the backends themselves (direct mode), as `assern list` does. `logs`
reads the JSON-lines log files and needs no instance.

Only the direct mode imports the tree, so the other commands answer fast.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from assern.actors.config.discover import config_path_for
from assern.actors.config.resolve import default_assern_home
from assern.actors.config.spec import ConfigError, ResolvedConfig, ServerSpec, Settings
from assern.supervisor.cli import _environ, _list_rows, _loader, _tool_rows, _with_tree
from assern.supervisor.control_client import ControlError, ControlUnavailable, request
from assern.supervisor.instance import (
    InstanceError,
    Slot,
    fingerprint,
    slot_names,
    socket_directory,
)
from assern.supervisor.logging import LOG_FILE, configure_logging
from assern.supervisor.logtail import Follower, LogFilter, current_size, format_line, last_lines
from assern.supervisor.process import process_alive

#: Seconds `assernctl shutdown` waits for the instance's process to end.
SHUTDOWN_WAIT = 30.0
#: How often `assernctl logs -f` looks for new lines.
FOLLOW_INTERVAL = 0.2


class Usage(Exception):
    """A mistake on the command line or in the configuration: exit status 2."""


@attrs.frozen
class Instance:
    """A running instance that answered `hello`."""

    slot: Slot
    hello: Mapping[str, Any]

    @property
    def pid(self) -> int | None:
        pid = self.hello.get("pid")
        return pid if isinstance(pid, int) else None


# ------------------------------------------------------------------ finding


def _load(args: argparse.Namespace) -> tuple[ResolvedConfig, Callable[[], ResolvedConfig]]:
    """The configuration `list` and `call` use on their own (direct mode).

    Without `--config` and without a global assern config, cllm-mcp's files are found as
    cllm-mcp finds them (./mcp-config.json, ./.mcp-config.json, ~/.config/cllm-mcp/).
    """
    environ = _environ()
    path = config_path_for(
        args.config, cwd=Path.cwd(), environ=environ, assern_home=default_assern_home(environ)
    )
    load = _loader(path, args.project, environ)
    try:
        return load(), load
    except ConfigError as exc:
        raise Usage(f"configuration error\n{exc}") from None


def _directory() -> Path:
    environ = _environ()
    try:
        return socket_directory(default_assern_home(environ), environ).path
    except InstanceError as exc:
        raise Usage(str(exc)) from None


def _hello(slot: Slot) -> Mapping[str, Any] | None:
    try:
        hello = request(slot.control, "hello", timeout=5.0)
    except (ControlUnavailable, ControlError):
        return None
    return hello if isinstance(hello, dict) else None


def all_instances() -> list[Instance]:
    """Every instance of this `$ASSERN_HOME` that answers."""
    directory = _directory()
    if not directory.is_dir():
        return []
    found = []
    for name in slot_names(os.listdir(directory)):
        slot = Slot(directory, name)
        hello = _hello(slot)
        if hello is not None:
            found.append(Instance(slot, hello))
    return found


def _files(paths: Any) -> set[str]:
    return {os.path.realpath(str(p)) for p in paths} if isinstance(paths, list | tuple) else set()


def find_instance(args: argparse.Namespace) -> tuple[ResolvedConfig | None, Instance | None]:
    """The running instance for the current directory's configuration.

    First the instance whose configuration fingerprint is the one resolved here. A
    configuration edited since the instance loaded it (not reloaded yet, or broken) has
    another fingerprint; then the one instance with the same project and config files
    (or, when the files do not resolve now, matching `--project` and `--config`).

    Returns:
        (the configuration, or None when it does not resolve; the instance, or None).

    Raises:
        Usage: the configuration does not resolve and no single instance matches.
        LookupError: several instances match; the message says how to choose.
    """
    load = _loader(args.config, args.project, _environ())
    try:
        config: ResolvedConfig | None = load()
        problem = None
    except ConfigError as exc:
        config, problem = None, exc
    instances = all_instances()
    if config is not None:
        digest = fingerprint(config)
        for instance in instances:
            if instance.hello.get("fingerprint") == digest:
                return config, instance
        files = _files(config.files)
        same = [
            i
            for i in instances
            if i.hello.get("project") == config.project and _files(i.hello.get("config_files")) == files
        ]
    else:
        same = instances
        if args.project:
            same = [i for i in same if i.hello.get("project") == args.project]
        if args.config:
            same = [i for i in same if os.path.realpath(args.config) in _files(i.hello.get("config_files"))]
    if len(same) == 1:
        if problem is not None:
            print(f"assernctl: warning: the configuration does not resolve now:\n{problem}", file=sys.stderr)
        return config, same[0]
    if problem is not None:
        raise Usage(f"configuration error\n{problem}")
    if len(same) > 1:
        pids = ", ".join(str(i.pid) for i in same)
        raise LookupError(f"several instances match (pids {pids}); choose with --project or --config")
    return config, None


def _no_instance(config: ResolvedConfig | None) -> str:
    if config is None:
        return "no assern instance runs for this configuration"
    project = f"project {config.project!r}" if config.project else "no project"
    text = f"no assern instance runs for this configuration ({project})"
    others = len(all_instances())
    if others:
        text += f"; {others} other instance(s) run: see `assernctl status --all`"
    return text


def _require(args: argparse.Namespace) -> Instance:
    config, instance = find_instance(args)
    if instance is None:
        raise LookupError(_no_instance(config))
    return instance


# ------------------------------------------------------------------ output


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return lines


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _short(text: str | None, width: int = 60) -> str:
    if not text:
        return "-"
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def render_status(doc: Mapping[str, Any]) -> list[str]:
    """The readable form of one instance's status document."""
    project = doc.get("project") or "(no project)"
    head = f"assern {doc['slot']}: pid {doc['pid']}, {project}, up {_duration(doc.get('uptime_s'))}"
    if doc.get("daemon"):
        head += ", daemon"
    lines = [head]
    lines.append(f"  socket   {doc['sockets']['mcp']}")
    lines.append(f"  config   {', '.join(doc.get('config_files') or []) or '(no file)'}")
    clients = doc.get("clients") or []
    named = [c["id"] + (f" ({c['name']})" if c.get("name") else "") for c in clients]
    lines.append(f"  clients  {len(clients)}" + (f": {', '.join(named)}" if named else ""))
    if doc.get("reload_error"):
        lines.append("  ! the last reload failed; the configuration before it stays in force:")
        lines += [f"    {line}" for line in str(doc["reload_error"]).splitlines()]
    backends = doc.get("backends") or []
    if not backends:
        lines.append("  no servers are configured")
        return lines
    rows = [
        [
            b["name"],
            b["state"],
            _cell(b.get("pid")),
            _duration(b.get("uptime_s")),
            str(b.get("restarts", 0)),
            str(b.get("tools", 0)),
            str(b.get("resources", 0)),
            str(b.get("prompts", 0)),
            b.get("transport", "-"),
            str(b.get("in_flight", 0)),
            str(b.get("calls_total", 0)),
            _cell((b.get("latency_ms") or {}).get("median")),
            _short(b.get("last_error") or b.get("last_exit")),
        ]
        for b in backends
    ]
    headers = ["SERVER", "STATE", "PID", "UPTIME", "RESTARTS", "TOOLS", "RES", "PROMPTS", "TRANSPORT"]
    headers += ["IN FLIGHT", "CALLS", "MEDIAN MS"]
    lines.append("")
    lines += ["  " + line for line in _table(rows, [*headers, "LAST EXIT / ERROR"])]
    for b in backends:
        if b.get("next_restart_in_s") is not None:
            lines.append(f"  {b['name']}: next restart in {b['next_restart_in_s']:.1f} s")
        if b["state"] in ("failed", "restarting") and b.get("stderr_tail"):
            lines.append(f"  {b['name']}: last stderr lines:")
            lines += [f"    {line}" for line in b["stderr_tail"][-5:]]
    return lines


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))


def _print_call_result(result: Mapping[str, Any]) -> int:
    _print_json(result)
    return 1 if result.get("isError") else 0


# ---------------------------------------------------------------- commands


def cmd_status(args: argparse.Namespace) -> int:
    if args.all:
        docs = []
        for instance in all_instances():
            try:
                docs.append(request(instance.slot.control, "status"))
            except (ControlUnavailable, ControlError):
                continue
        if args.json:
            _print_json({"instances": docs})
        elif not docs:
            print("no assern instance runs", file=sys.stderr)
        else:
            print("\n\n".join("\n".join(render_status(doc)) for doc in docs))
        return 0 if docs else 1
    try:
        instance = _require(args)
        doc = request(instance.slot.control, "status")
    except LookupError as exc:
        print(f"assernctl: {exc.args[0]}", file=sys.stderr)
        return 1
    if args.json:
        _print_json(doc)
    else:
        print("\n".join(render_status(doc)))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    config, load = _load(args)
    instance = None if args.fresh else find_instance(args)[1]
    if instance is not None:
        listing = request(instance.slot.control, "list", timeout=60.0)
        tools, problems = listing["tools"], listing["problems"]
        source: dict[str, Any] = {"source": "running-instance", "pid": instance.pid}
        source["slot"] = instance.slot.name
        marker = f"(from running instance) pid {instance.pid}, {instance.slot.name}"
    else:

        async def body(tree: Any) -> list[dict[str, str]]:
            return _tool_rows(tree)

        with configure_logging(default_assern_home(_environ()) / "logs", level=args.log_level):
            tools, problems = trio.run(_list_rows, config, load, body)
        source = {"source": "fresh"}
        marker = "(fresh start: the backends were started for this listing)"
    if args.json:
        _print_json({**source, "tools": tools, "problems": problems})
    else:
        print(marker)
        if not config.servers:
            print("No servers are configured.", file=sys.stderr)
        rows = [[t["name"], t["server"], t["description"]] for t in tools]
        print("\n".join(_table(rows, ["NAME", "SERVER", "DESCRIPTION"])))
        for problem in problems:
            print(f"! {problem}", file=sys.stderr)
    return 0 if not problems else 1


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
    spec = ServerSpec(name=name, transport="stdio", command=argv[0], args=tuple(argv[1:]), env=_environ())
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

    return await _with_tree(config, load, body)


def cmd_call(args: argparse.Namespace) -> int:
    server, tool, text = _call_target(args.target)
    try:
        arguments = json.loads(text)
    except ValueError as exc:
        raise Usage(f"the arguments are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise Usage("the arguments must be a JSON object")
    config, load = _load(args)
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
            answer = request(instance.slot.control, "call", timeout=None, **fields)
        except ControlError as exc:
            print(f"assernctl: {exc.message}", file=sys.stderr)
            return 1
        return _print_call_result(answer["result"])
    if args.no_direct:
        print(f"assernctl: {_no_instance(config)} (and --no-direct)", file=sys.stderr)
        return 1
    if literal:
        assert server is not None
        config = _literal_config(server)
        server = next(iter(config.servers))
        load = lambda: config  # noqa: E731 - the ad-hoc config never changes
    elif server is not None:
        config = attrs.evolve(config, servers={server: config.servers[server]})
        load = lambda: config  # noqa: E731
    with configure_logging(default_assern_home(_environ()) / "logs", level=args.log_level):
        outcome = trio.run(_direct_call, config, load, server, tool, arguments)
    if "error" in outcome:
        print(f"assernctl: {outcome['error']}", file=sys.stderr)
        return 1
    return _print_call_result(outcome["result"])


_FAILED = object()


def _ask(args: argparse.Namespace, command: str, *, failure: str = "", **fields: Any) -> Any:
    """One command to the running instance; prints why and returns `_FAILED` when it fails."""
    try:
        instance = _require(args)
        return request(instance.slot.control, command, **fields)
    except LookupError as exc:
        print(f"assernctl: {exc.args[0]}", file=sys.stderr)
    except ControlError as exc:
        print(f"assernctl: {failure}{exc.message}", file=sys.stderr)
    return _FAILED


def cmd_server(args: argparse.Namespace) -> int:
    result = _ask(args, args.command, server=args.server, timeout=None)
    if result is _FAILED:
        return 1
    if args.json:
        _print_json(result)
    else:
        print(f"{result['message']} (now {result['state']})")
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    result = _ask(args, "reload", timeout=60.0, failure="reload failed, the running configuration stays:\n")
    if result is _FAILED:
        return 1
    if args.json:
        _print_json(result)
    else:
        servers = result.get("servers") or []
        print(f"reloaded: {len(servers)} server(s)" + (f" ({', '.join(servers)})" if servers else ""))
    return 0


def cmd_shutdown(args: argparse.Namespace) -> int:
    result = _ask(args, "shutdown")
    if result is _FAILED:
        return 1
    pid = result.get("pid")
    deadline = time.monotonic() + SHUTDOWN_WAIT
    while isinstance(pid, int) and process_alive(pid):
        if time.monotonic() > deadline:
            print(f"assernctl: assern (pid {pid}) still stops after {SHUTDOWN_WAIT:g} s", file=sys.stderr)
            return 1
        time.sleep(0.05)
    if args.json:
        _print_json({"stopped": True, "pid": pid})
    else:
        print(f"assern (pid {pid}) stopped")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    try:
        keep = LogFilter(server=args.server, level=args.level, grep=args.grep)
    except ValueError as exc:
        raise Usage(str(exc)) from None
    path = default_assern_home(_environ()) / "logs" / LOG_FILE
    show = (lambda line: line) if args.json else format_line
    offset = current_size(path)
    try:
        for line in last_lines(path, keep, None if args.lines < 0 else args.lines, upto=offset):
            print(show(line))
        sys.stdout.flush()
        if not args.follow:
            return 0
        follower = Follower(path, offset=offset)
        try:
            while True:
                for line in follower.poll():
                    if keep.accepts(line):
                        print(show(line), flush=True)
                time.sleep(FOLLOW_INTERVAL)
        finally:
            follower.close()
    except KeyboardInterrupt:
        return 0


# -------------------------------------------------------------------- parser


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
    sub = parser.add_subparsers(dest="command", required=True)

    status = sub.add_parser("status", help="the running instance and each backend")
    status.add_argument("--all", action="store_true", help="every running instance")
    listing = sub.add_parser("list", help="the aggregated tools (from the running instance if any)")
    listing.add_argument("--fresh", action="store_true", help="start the backends anew for this listing")
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
    sub.add_parser("shutdown", help="stop the running instance and wait until it is gone")
    for command in sub.choices.values():
        _config_options(command)
        command.add_argument("--json", action="store_true", help="machine-readable output")

    logs = sub.add_parser("logs", help="print (and follow) the log, readably")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("-n", "--lines", type=int, default=20, help="how many last lines first (-1: all)")
    logs.add_argument("--server", help="only events of this server")
    logs.add_argument("--level", help="only this level and above: debug, info, warning, error")
    logs.add_argument("--grep", help="only lines containing this text (case-insensitive)")
    logs.add_argument("--json", action="store_true", help="the raw JSON lines")
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": cmd_status,
    "list": cmd_list,
    "call": cmd_call,
    "restart": cmd_server,
    "stop": cmd_server,
    "start": cmd_server,
    "reload": cmd_reload,
    "shutdown": cmd_shutdown,
    "logs": cmd_logs,
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
