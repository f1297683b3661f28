"""The command line: `assern` (serve, daemon, list, demo) and `assernctl`.

`assern serve` speaks MCP on stdio; nothing but the protocol is ever written to stdout
while it serves. Human output (list, demo) goes to stdout only in those commands.

`assern serve` shares one instance per resolved configuration (docs/operations.md,
"Instance sharing"): the election makes it the primary (it detaches into its own session and
runs the tree) or a proxy (it bridges stdio to the primary's socket and starts nothing).
The tree is imported only by the commands that run it, so a proxy and
`assernctl` start quickly. The process that runs the tree for a stdio client claims
stdio first and opens the front door on it (app/front_door.py), which
answers the client's `initialize` while the tree is imported in a worker thread.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from assern.actors.config.home import default_assern_home, user_home
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.app.ctl.render import table
from assern.app.daemon.launch import DRAIN_DEADLINE
from assern.app.hint import PROFILE_VARIABLE, serve_arguments
from assern.app.instance import InstanceError, sharing_enabled
from assern.app.loading import FullCollectionsDeferred
from assern.app.no_servers import DOCTOR_ID as NO_SERVERS
from assern.app.no_servers import looked_at, no_servers_line
from assern.app.running import VersionAction, environ, loader, run_dir, this_build, tool_rows, with_tree
from assern.supervisor.io.logs import configure_logging

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import ModuleType

    from assern.actors.config.listen import ListenSpec
    from assern.app.detach import LauncherLink
    from assern.app.election import Primary, Proxy
    from assern.app.tree import HttpSocket, Tree

log = structlog.get_logger()

#: Libraries that log a line per HTTP request at info (the remote backends' HTTP
#: client): their warnings reach the log, their info only with --log-level debug.
CHATTY_LOGGERS = ("httpx2", "httpcore2", "httpx", "httpcore")

DEMO_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("calc_add", {"a": 2, "b": 40}),
    ("time_get_current_time", {"timezone": "UTC"}),
    ("notes_search_notes", {"query": "assern"}),
)


def demo_config_path() -> Path:
    return Path(str(resources.files("assern.examples") / "default.toml"))


def _print_table(rows: Sequence[Mapping[str, str]], columns: Sequence[str]) -> None:
    cells = [[row[column] for column in columns] for row in rows]
    print("\n".join(table(cells, [column.upper() for column in columns])))


def _print_backend_problems(tree: Tree) -> None:
    for handle in tree.directory.value.values():
        status = handle.status
        if status.state.value not in ("ready", "lazy", "dormant"):
            reason = status.last_error or status.last_exit or "not ready"
            print(f"! server '{handle.name}' is {status.state.value}: {reason}", file=sys.stderr)


def _content_text(result: Any) -> str:
    parts = [getattr(c, "text", None) or f"<{c.type}>" for c in result.content]
    text = " ".join(parts)
    return ("ERROR: " if result.is_error else "") + text


# ----------------------------------------------------------------------- commands


def given_profile(flag: str | None, env: Mapping[str, str]) -> str | None:
    """The profile a start was given: `--profile`, else `ASSERN_PROFILE` (empty: none)."""
    return flag or env.get(PROFILE_VARIABLE) or None


def _elect(config: ResolvedConfig) -> Primary | Proxy:
    """Run the election for `config` (see app/election.py).

    Raises:
        InstanceError: sharing cannot work here.
    """
    from assern.app.election import elect

    env = environ()
    return elect(config, assern_home=default_assern_home(env), environ=env)


def _leave_hint(args: argparse.Namespace, config: ResolvedConfig, elected: Primary | Proxy) -> None:
    """Let the next identical start proxy without resolving (app/hint.py)."""
    from assern.app.hint import hint_file, hint_key, make_hint, write_hint

    if getattr(args, "hint_args", None) is None or not config.servers:
        return  # a start with no server takes the full path each time: it says so on stderr
    env = environ()
    key = hint_key(args.hint_args, os.getcwd(), env)
    home = default_assern_home(env)
    slot = elected.slot
    hint = make_hint(
        config,
        key=key,
        environ=env,
        assern_home=home,
        fingerprint=elected.fingerprint,
        slot=slot.name,
        mcp=slot.mcp,
        control=slot.control,
        lock=elected.lock,
    )
    write_hint(hint_file(home, key), hint)


def _proxy(args: argparse.Namespace, elected: Proxy) -> int:
    """Become a bare bridge to the primary: the election's imports are shed by `exec`."""
    from assern.app.bridge import LOG_FILE, exec_bridge

    log_file = str(default_assern_home(environ()) / "logs" / LOG_FILE)
    exec_bridge(
        elected.sock,
        slot=elected.slot.name,
        log_file=log_file,
        log_level=args.log_level.lower(),
        profile=args.profile,
    )
    raise AssertionError("unreachable: exec replaced this process")


def _http_front(args: argparse.Namespace, config: ResolvedConfig) -> HttpSocket | int | None:
    """The HTTP front's bound socket when this start serves HTTP (None when it does not;
    an exit status after printing why it cannot)."""
    given = getattr(args, "http", None)
    if given is None and (args.command != "daemon" or config.listen.http is None):
        return None  # `assern serve` opens a port only when asked to: `--http`
    # Imported only now: a start without HTTP never loads the HTTP stack.
    from assern.actors.config.listen import BindError, listen_problems, parse_bind

    with FullCollectionsDeferred():
        from assern.actors.listener.http.server import BindFailed, bind_socket
        from assern.app.tree import HttpSocket

    try:
        bind = parse_bind(given) if given else config.listen.http
    except BindError as exc:
        print(f"assern: --http: {exc}", file=sys.stderr)
        return 2
    if bind is None:
        print(
            "assern: --http needs an address ([HOST:]PORT) or `http` in the config's [listen]",
            file=sys.stderr,
        )
        return 2
    spec = attrs.evolve(config.listen, http=bind)
    problems = listen_problems(spec)
    for key, problem in problems:
        print(f"assern: [listen] {key}: {problem}", file=sys.stderr)
    if problems:
        return 2
    if (no_token := _no_token_yet(spec)) is not None:
        print(f"assern: {no_token}", file=sys.stderr)
        return 2
    try:
        sock = bind_socket(bind)
    except BindFailed as exc:
        print(f"assern: {exc}", file=sys.stderr)
        return 2
    front = HttpSocket(sock=sock, bind=bind)
    scheme = "https" if spec.tls else "http"
    print(f"assern: serving MCP over HTTP at {scheme}://{front.address()}/mcp", file=sys.stderr, flush=True)
    return front


def _no_token_yet(spec: ListenSpec) -> str | None:
    """Why a front off loopback may not start yet: it needs a token and none exists.

    Off loopback every request must carry a token (`auth` "auto" or "token"); with none
    created, the front would answer each one 401, so the start is refused instead, with
    how to create one. On loopback, "auto" needs no token until one exists.
    """
    from assern.actors.listener.http.tokens import TokenError, TokenStore

    assert spec.http is not None
    if spec.http.loopback or not spec.needs_token(tokens_exist=False):
        return None
    needs = f"serving {spec.http} (not a loopback address) needs a bearer token"
    try:
        if TokenStore(spec.tokens_file).tokens():
            return None
    except TokenError as exc:
        return f"{needs}, and its token file cannot be read: {exc}"
    return (
        f"{needs}, and none exists in {spec.tokens_file}: create one with `assernctl token "
        "create NAME` (with the same --config as this start, if it has one), then start "
        "again; clients send it as 'Authorization: Bearer TOKEN'"
    )


def cmd_serve(args: argparse.Namespace, config: ResolvedConfig, load: Callable[[], ResolvedConfig]) -> int:
    from assern.app.detach import detach
    from assern.app.election import Proxy

    http = _http_front(args, config)
    if isinstance(http, int):
        return http
    if getattr(args, "no_stdio", False):
        if http is None:
            print("assern serve: --no-stdio leaves nothing to serve without --http", file=sys.stderr)
            return 2
        from assern.app.tree import Tree

        trio.run(Tree(config, load, stdio=False, run_dir=run_dir(), http=http).run)
        return 0
    primary: tuple[Primary, LauncherLink] | None = None
    # An HTTP front is its own instance: a port is not shared through the Unix socket.
    if http is None and sharing_enabled(environ()):
        try:
            elected = _elect(config)
        except InstanceError as exc:
            print(f"assern: warning: running without instance sharing: {exc}", file=sys.stderr)
            log.warning("instance_sharing_unavailable", error=str(exc))
        else:
            _leave_hint(args, config, elected)
            if isinstance(elected, Proxy):
                return _proxy(args, elected)
            # Fork before anything starts: the tree (and the pid registry) belong to the
            # primary child; this process only waits for it (app/detach.py).
            link = detach(elected.forget)
            if isinstance(link, int):
                return link
            log.info("primary_detached", pid=os.getpid(), slot=elected.slot.name)
            primary = (elected, link)
    trio.run(_serve_tree, config, load, primary, args.profile, http)
    return 0


def _load(module: str) -> ModuleType:
    with FullCollectionsDeferred():
        return importlib.import_module(module)


async def _serve_tree(
    config: ResolvedConfig,
    load: Callable[[], ResolvedConfig],
    primary: tuple[Primary, LauncherLink] | None,
    profile: str | None,
    http: HttpSocket | None = None,
) -> None:
    """Run the tree for our stdio client, met at the front door while the tree loads."""
    from assern.actors.listener.handshake import capabilities_from
    from assern.actors.listener.stdio import StdioClaim
    from assern.actors.router.capability_file import cache_file, remembered_raw
    from assern.app.front_door import FrontDoor

    runs = run_dir()
    cache = cache_file(runs.parent)  # the tree's own capability cache (app/tree.py)
    claim = StdioClaim()
    try:
        door = FrontDoor(
            claim.stdin,
            claim.stdout,
            # With a wait configured, the handshake may wait for backends: the session answers it.
            answer=config.settings.initialize_wait <= 0,
            capabilities=lambda: capabilities_from(remembered_raw(cache, config.servers).values()),
            release=claim.release,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(door.run)
            # Imported here, after the fork (the launcher that only waits stays small),
            # and in a thread: the door answers meanwhile.
            tree_module = await trio.to_thread.run_sync(_load, "assern.app.tree")
            hosting = (
                tree_module.Hosting(primary=primary[0], launcher=primary[1]) if primary is not None else None
            )
            tree = tree_module.Tree(
                config,
                load,
                stdio=True,
                run_dir=runs,
                hosting=hosting,
                door=door,
                stdio_profile=profile,
                http=http,
            )
            await tree.run()
            nursery.cancel_scope.cancel()
    finally:
        claim.release()


def workstation_daemon(args: argparse.Namespace) -> int:
    """`assern daemon` with no --config, --project or --http: one daemon for every project
    and client of this `$ASSERN_HOME` (app/daemon/host.py)."""
    from assern.app.daemon.launch import STARTED_BY_VARIABLE
    from assern.app.daemon.start import DaemonRunning, Supersede, activated, claim

    with FullCollectionsDeferred():
        from assern.app.daemon.host import DaemonHost

    env = environ()
    if not sharing_enabled(env):
        print("assern daemon: nothing to do with ASSERN_NO_INSTANCE_SHARING set (no socket)", file=sys.stderr)
        return 2
    home = default_assern_home(env)
    # Servers without a cwd run in the daemon's folder: the same for every start (and
    # every project: docs/configuration.md, "Where servers run").
    with contextlib.suppress(OSError):
        os.chdir(user_home(env))
    try:
        claimed = activated(os.environ)
        started_by = "socket activation" if claimed is not None else "command"
        client = os.environ.pop(STARTED_BY_VARIABLE, None)
        if claimed is None and client:
            started_by = client
        if claimed is None:
            supersede = None
            if args.supersede is not None:
                reason = client or "assern daemon --supersede"
                supersede = Supersede(
                    build=this_build(), reason=reason, deadline=args.drain, only=args.supersede or None
                )
            claimed = claim(home, env, supersede)
    except DaemonRunning as exc:
        print(
            f"assern daemon: {exc}; stop it first with `assernctl shutdown`, or replace it with "
            "`assernctl daemon restart`",
            file=sys.stderr,
        )
        return 1
    except InstanceError as exc:
        print(f"assern daemon: {exc}", file=sys.stderr)
        return 2
    print(
        f"assern daemon: pid {os.getpid()}, MCP socket {claimed.slot.mcp}, "
        f"control socket {claimed.slot.control}",
        file=sys.stderr,
        flush=True,
    )
    host = DaemonHost(
        assern_home=home,
        build=this_build(),
        mcp=claimed.mcp,
        control=claimed.control,
        mcp_path=claimed.slot.mcp,
        control_path=claimed.slot.control,
        idle_exit=args.idle_exit,
        started_by=started_by,
        generation=claimed.takeover.predecessor.generation + 1 if claimed.takeover is not None else 1,
        takeover=claimed.takeover,
    )
    trio.run(host.run)
    if host.failure is not None:
        print(f"assern daemon: {host.failure}", file=sys.stderr)
        return 2
    return 0


def cmd_daemon(args: argparse.Namespace, config: ResolvedConfig, load: Callable[[], ResolvedConfig]) -> int:
    from assern.app.election import Proxy

    with FullCollectionsDeferred():
        from assern.app.tree import Hosting, Tree

    if not sharing_enabled(environ()):
        print("assern daemon: nothing to do with ASSERN_NO_INSTANCE_SHARING set (no socket)", file=sys.stderr)
        return 2
    http = _http_front(args, config)
    if isinstance(http, int):
        return http
    try:
        elected = _elect(config)
    except InstanceError as exc:
        print(f"assern daemon: {exc}", file=sys.stderr)
        return 2
    if isinstance(elected, Proxy):
        elected.sock.close()
        print(
            f"assern daemon: an instance for this configuration already runs (pid {elected.pid}, "
            f"socket {elected.slot.mcp}); stop it first with `assernctl shutdown`",
            file=sys.stderr,
        )
        return 1
    print(
        f"assern daemon: pid {os.getpid()}, MCP socket {elected.slot.mcp}, "
        f"control socket {elected.slot.control}",
        file=sys.stderr,
        flush=True,
    )
    tree = Tree(
        config,
        load,
        stdio=False,
        run_dir=run_dir(),
        hosting=Hosting(primary=elected, daemon=True),
        http=http,
    )
    trio.run(tree.run)
    return 0


def _list(args: argparse.Namespace) -> int:
    """`assern list`: the tools of the running instance of this configuration, marked as
    such, else (or with `--fresh`) of backends started for the listing; `assernctl list`."""
    from assern.app.ctl.common import Usage
    from assern.app.ctl.show import cmd_list as list_tools

    try:
        return list_tools(args)
    except (Usage, LookupError) as exc:
        print(f"assern: {exc}", file=sys.stderr)
        return 2


def cmd_demo(args: argparse.Namespace, config: ResolvedConfig, load: Callable[[], ResolvedConfig]) -> int:
    if not sys.stdin.isatty():
        print(
            "assern demo: stdin is not a terminal, so this serves the demo's aggregate over MCP on "
            "stdio; run `assern demo` in a terminal to see the demo instead",
            file=sys.stderr,
            flush=True,
        )
        return cmd_serve(args, config, load)
    from assern.actors.listener.inproc import inproc_client

    async def body(tree: Tree) -> None:
        servers = ", ".join(tree.directory.value)
        print(f"assern demo: one MCP server in front of {len(tree.directory.value)} backends ({servers})\n")
        _print_backend_problems(tree)
        _print_table(tool_rows(tree), ("name", "server", "description"))
        catalog = tree.catalog.value
        print(
            f"\n{len(catalog.tools)} tools, {len(catalog.prompts)} prompts, "
            f"{len(catalog.resources)} resources, {len(catalog.templates)} resource templates\n"
        )
        async with inproc_client(tree.shared, "demo") as client:
            for name, arguments in DEMO_CALLS:
                result = await client.call_tool(name, arguments)
                print(f"call {name} {json.dumps(arguments)}\n  -> {_content_text(result)}")
        print(
            "\nEach call was routed by its prefix to the backend that owns the tool.\n"
            "Point an MCP client at `assern demo` (stdio) to use it, or write your own config:\n"
            "see README.md."
        )

    trio.run(with_tree, config, load, body)
    return 0


def assern_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="assern", description="One MCP server in front of many.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("serve", "serve the aggregate over MCP on stdio (shares one instance per configuration)"),
        (
            "daemon",
            "run the workstation daemon for every project (with --config/--project: one "
            "configuration's shared instance), until `assernctl shutdown` or SIGTERM",
        ),
        ("list", "the aggregated tools: of the running instance if any, else of a fresh start"),
        ("demo", "run on the bundled example backends (serves stdio when stdin is not a terminal)"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        if name != "demo":
            cmd.add_argument("--config", type=Path, help="config file (TOML or mcpServers JSON)")
            cmd.add_argument("--project", help="project to use (default: detected from the directory)")
        if name in ("serve", "list", "demo"):
            cmd.add_argument(
                "--profile",
                help="the view of [profiles.NAME] (serve: default $ASSERN_PROFILE, else by client name)",
            )
        if name in ("serve", "daemon"):
            cmd.add_argument(
                "--http",
                nargs="?",
                const="",
                metavar="[HOST:]PORT",
                help="also serve MCP over streamable HTTP at /mcp (default address: [listen] http; "
                "a bare port binds 127.0.0.1)",
            )
        if name == "serve":
            cmd.add_argument("--no-stdio", action="store_true", help="serve HTTP only (with --http)")
        if name == "daemon":
            cmd.add_argument(
                "--idle-exit",
                type=float,
                default=0.0,
                metavar="SECONDS",
                help="without --config/--project: exit after this long with no client and no "
                "configuration in use (default 0: never)",
            )
            cmd.add_argument(
                "--supersede",
                nargs="?",
                const="",
                default=None,
                metavar="BUILD",
                help="without --config/--project: take the sockets from the running daemon (only "
                "if it is of BUILD, when given), which finishes its calls in flight and stops",
            )
            cmd.add_argument(
                "--drain",
                type=float,
                default=DRAIN_DEADLINE,
                metavar="SECONDS",
                help=f"with --supersede: how long the old daemon's calls in flight may run on "
                f"(default {DRAIN_DEADLINE:g})",
            )
        if name == "list":
            cmd.add_argument("--json", action="store_true", help="machine-readable output")
            cmd.add_argument("--fresh", action="store_true", help="start the backends anew for this listing")
        cmd.add_argument("--log-level", default="info", help="debug, info, warning or error")
    args = parser.parse_args(argv)
    args.hint_args = serve_arguments(sys.argv[1:] if argv is None else argv)

    if args.command == "list":  # as `assernctl list`: the running instance first
        return _list(args)
    env = environ()
    if args.command == "daemon" and args.config is None and args.project is None and args.http is None:
        with configure_logging(default_assern_home(env) / "logs", level=args.log_level, quiet=CHATTY_LOGGERS):
            return workstation_daemon(args)
    if args.command == "demo":
        args.config, args.project = demo_config_path(), None
    load = loader(args.config, args.project, env)
    try:
        config = load()
    except ConfigError as exc:
        print(f"assern: configuration error\n{exc}", file=sys.stderr)
        return 2
    for warning in (*config.warnings, *config.trust.lines()):
        print(f"assern: warning: {warning}", file=sys.stderr)
    nothing = no_servers_line(config) if args.command in ("serve", "daemon") else None
    if nothing is not None:
        print(nothing, file=sys.stderr)
    if args.command in ("serve", "demo"):
        args.profile = given_profile(args.profile, env)
        problem = config.settings.profile_problem(args.profile)
        if problem is not None:
            print(f"assern: {problem}", file=sys.stderr)
            return 2
    log_dir = default_assern_home(env) / "logs"
    with configure_logging(log_dir, level=args.log_level, quiet=CHATTY_LOGGERS):
        if nothing is not None:
            looked = [str(path) for path in looked_at(config)]
            log.warning("config_no_servers", doctor=NO_SERVERS, looked=looked)
        commands = {"serve": cmd_serve, "daemon": cmd_daemon, "demo": cmd_demo}
        return commands[args.command](args, config, load)
