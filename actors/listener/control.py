"""The control socket's server side: `assernctl`'s commands against the running tree.

Each control connection is served by the listener actor, one command at a time, in
the wire format of `control_protocol`. The commands read published snapshots (status,
list), call tools through an in-process client connection (inproc.py: exactly what an
MCP client would get, without loading the `mcp` SDK), send `ServerCommand`s to the
backends supervisor's mailbox, and ask the tree to reload or shut down. A bad line or a
failing command gets an error reply; the connection and the instance go on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from assern.actors.backend.backends import BackendsMsg, ServerCommand
from assern.actors.config.spec import ResolvedConfig
from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener import control_protocol as proto
from assern.actors.listener.control_context import add_context, context_reindex
from assern.actors.listener.control_protocol import Command, ControlFailure
from assern.actors.listener.inproc import call_tool
from assern.actors.listener.page.actor import PageAddress
from assern.actors.listener.report import ClientView, InstanceInfo, instance_report, problems, tool_rows
from assern.actors.listener.session import SessionContext
from assern.actors.listener.socket_basics import PROTOCOL_VERSION
from assern.actors.router.views import estimate_tokens
from assern.supervisor.cell import Cell
from assern.supervisor.io.reader import LineTooLong
from assern.supervisor.mailbox import ActorGone, Pending, Reply, new_reply

if TYPE_CHECKING:
    from assern.actors.router.catalog import Catalog

log = structlog.get_logger()

#: Extra seconds a restart or start may take beyond the backend's own startup timeout.
COMMAND_SLACK = 10.0


@attrs.frozen(kw_only=True, eq=False)
class ControlPlane:
    """What the control socket may see and steer; the tree builds it.

    Attributes:
        info: The instance's fixed facts.
        shared: The snapshots every client session reads (catalog, directory, stats).
        config: The configuration in force.
        fingerprint: The identity of a configuration (instance sharing matches on it).
        clients: The MCP clients connected now.
        reload_error: The error of the last failed reload, if the last one failed.
        backends: The backends supervisor's mailbox (for `ServerCommand`s).
        reload: Resolves the configuration again; returns the error, or None when applied.
        shutdown: Stops the instance.
        page: Serves the status page (once) and mints a sign-in address; None when
            this instance serves none.
    """

    info: InstanceInfo
    shared: SessionContext
    config: Cell[ResolvedConfig]
    fingerprint: Callable[[ResolvedConfig], str]
    clients: Callable[[], Sequence[ClientView]]
    reload_error: Callable[[], str | None]
    backends: trio.MemorySendChannel[BackendsMsg]
    reload: Callable[[], Awaitable[str | None]]
    shutdown: Callable[[], None]
    page: Callable[[], Awaitable[PageAddress]] | None = None


Handler = Callable[[ControlPlane, Command], Awaitable[Any]]


async def _hello(plane: ControlPlane, command: Command) -> dict[str, Any]:
    config = plane.config.value
    return {
        "protocol": PROTOCOL_VERSION,
        "pid": plane.info.pid,
        "slot": plane.info.slot,
        "project": config.project,
        "fingerprint": plane.fingerprint(config),
        "config_files": [str(path) for path in config.files],
        "started_at": plane.info.started_at,
        "version": plane.info.version,
    }


async def _status(plane: ControlPlane, command: Command) -> dict[str, Any]:
    return await status_document(plane)


async def status_document(plane: ControlPlane) -> dict[str, Any]:
    """What `status` answers (the status page renders the same document)."""
    config = plane.config.value
    doc = instance_report(
        info=plane.info,
        config=config,
        fingerprint=plane.fingerprint(config),
        directory=plane.shared.directory(),
        stats=plane.shared.stats,
        clients=plane.clients(),
        reload_error=plane.reload_error(),
        now=time.time(),
        clock=trio.current_time(),
        catalog=plane.shared.catalog.value,
    )
    await add_context(doc, config)
    return doc


async def _settled(plane: ControlPlane) -> None:
    """Wait (bounded, as a client's list would) for starting backends' first listing."""
    with trio.move_on_after(plane.shared.list_wait):
        await plane.shared.settled.wait()
        cell = plane.shared.catalog
        version = cell.version
        while not all(
            name in cell.value.servers
            for name, handle in plane.shared.directory().items()
            if handle.status.state.value == "ready"
        ):
            version, _ = await cell.changed(version)


def _view(plane: ControlPlane, command: Command) -> Catalog:
    """The catalog of the view the command names with `profile` (else the settings')."""
    profile = proto.string_arg(command, "profile", required=False)
    problem = plane.config.value.settings.profile_problem(profile)
    if problem is not None:
        raise ControlFailure(proto.INVALID_ARGUMENTS, problem, {"profile": profile}, command.id)
    return plane.shared.views.cell(profile).value


async def _list(plane: ControlPlane, command: Command) -> dict[str, Any]:
    _view(plane, command)  # a wrong profile is refused before any wait
    await _settled(plane)
    catalog = _view(plane, command)
    return {
        "tools": tool_rows(catalog),
        "problems": problems(plane.shared.directory().values()),
        "profile": catalog.profile,
        "exposure": catalog.exposure,
        "switched": catalog.switched,
        "list_tokens": estimate_tokens(catalog.tools_json),
    }


async def _search(plane: ControlPlane, command: Command) -> dict[str, Any]:
    from assern.actors.listener import exposure  # the index: loaded by the first search
    from assern.actors.search.explain import explain_search

    arguments = {key: command.args[key] for key in ("query", "limit", "server") if key in command.args}
    catalog, directory = _view(plane, command), plane.shared.directory()
    semantic = plane.shared.semantic.value
    plane.shared.searched.set()
    learned = plane.shared.learned.value if plane.shared.learning() else None
    after = proto.string_arg(command, "after", required=False)
    found = exposure.search_anyway(catalog, directory, arguments, semantic, learned, after)
    doc = exposure.search_document(found)
    if command.args.get("explain") and not found.is_error:
        names = [tool["name"] for tool in doc.get("tools", [])]
        doc["explain"] = explain_search(catalog, directory, arguments, names, semantic, learned, after)
    return doc


def _tool_name(plane: ControlPlane, command: Command, server: str, tool: str) -> str:
    """The exposed name of `server`'s own tool `tool`."""
    directory = plane.shared.directory()
    if server not in directory:
        known = ", ".join(directory) or "none"
        raise ControlFailure(
            proto.UNKNOWN_SERVER,
            f"unknown server '{server}' (configured: {known})",
            {"servers": list(directory)},
            command.id,
        )
    routes = [r for r in plane.shared.catalog.value.tools.values() if r.server == server]
    for route in routes:
        if route.original == tool:
            return route.name
    own = sorted(route.original for route in routes)
    raise ControlFailure(
        proto.UNKNOWN_TOOL,
        f"server '{server}' has no tool '{tool}'" + (f"; its tools: {', '.join(own)}" if own else ""),
        {"server": server, "tools": own},
        command.id,
    )


async def _call(plane: ControlPlane, command: Command) -> dict[str, Any]:
    tool = proto.string_arg(command, "tool")
    assert tool is not None
    server = proto.string_arg(command, "server", required=False)
    arguments = proto.object_arg(command, "arguments")
    if server is not None:
        await _settled(plane)
        tool = _tool_name(plane, command, server, tool)
    try:
        result = await call_tool(plane.shared, tool, arguments, "control")
    except RpcError as exc:
        details = {"code": exc.code, "data": exc.data}
        raise ControlFailure(proto.CALL_FAILED, exc.message, details, command.id) from None
    return {"tool": tool, "result": result}


async def _server_command(plane: ControlPlane, command: Command) -> dict[str, Any]:
    server = proto.string_arg(command, "server")
    assert server is not None
    handle = plane.shared.directory().get(server)
    limit = (handle.spec.startup_timeout if handle is not None else 0) + COMMAND_SLACK
    reply: Reply[str]
    pending: Pending[str]
    reply, pending = new_reply()
    try:
        with trio.fail_after(limit):
            await plane.backends.send(ServerCommand(action=command.name, server=server, reply=reply))
            message: str = await pending.result()
    except KeyError as exc:
        raise ControlFailure(
            proto.UNKNOWN_SERVER, str(exc.args[0]), {"servers": list(plane.shared.directory())}, command.id
        ) from None
    except trio.TooSlowError:
        raise ControlFailure(
            proto.TIMEOUT, f"{command.name} {server} did not finish within {limit:g} s", None, command.id
        ) from None
    except ActorGone:
        raise ControlFailure(
            proto.COMMAND_FAILED, "the backends supervisor went away (the instance stops)", None, command.id
        ) from None
    except (ValueError, trio.ClosedResourceError) as exc:
        raise ControlFailure(proto.COMMAND_FAILED, str(exc), None, command.id) from None
    handle = plane.shared.directory().get(server)
    return {
        "server": server,
        "action": command.name,
        "message": message,
        "state": handle.status.state.value if handle is not None else None,
    }


async def _reload(plane: ControlPlane, command: Command) -> dict[str, Any]:
    error = await plane.reload()
    if error is not None:
        raise ControlFailure(proto.RELOAD_FAILED, error, None, command.id)
    config = plane.config.value
    return {
        "project": config.project,
        "servers": list(config.servers),
        "config_files": [str(path) for path in config.files],
    }


async def _context_reindex(plane: ControlPlane, command: Command) -> dict[str, Any]:
    return await context_reindex(command, plane.config.value, plane.shared.directory())


async def _web(plane: ControlPlane, command: Command) -> dict[str, Any]:
    return await web_reply(plane.page, command)


async def web_reply(page: Callable[[], Awaitable[PageAddress]] | None, command: Command) -> dict[str, Any]:
    """What `web` answers: the status page's address and a one-time sign-in address.

    Raises:
        ControlFailure: there is no page here, or it cannot be served.
    """
    if page is None:
        raise ControlFailure(proto.COMMAND_FAILED, "this instance serves no status page", None, command.id)
    try:
        address = await page()
    except OSError as exc:
        message = f"the status page cannot be served: {exc}"
        raise ControlFailure(proto.COMMAND_FAILED, message, None, command.id) from None
    except ActorGone:
        message = "the status page's server went away (the instance stops)"
        raise ControlFailure(proto.COMMAND_FAILED, message, None, command.id) from None
    return {"url": address.url, "login": address.login, "expires_in_s": address.expires_in}


async def _shutdown(plane: ControlPlane, command: Command) -> dict[str, Any]:
    return {"stopping": True, "pid": plane.info.pid}


HANDLERS: dict[str, Handler] = {
    "hello": _hello,
    "status": _status,
    "list": _list,
    "search": _search,
    "call": _call,
    "restart": _server_command,
    "stop": _server_command,
    "start": _server_command,
    "reload": _reload,
    "shutdown": _shutdown,
    "context_reindex": _context_reindex,
    "web": _web,
}


async def answer(plane: ControlPlane, line: bytes) -> tuple[bytes, Command | None]:
    """The reply line to one request line, and the command when it succeeded."""
    try:
        command = proto.parse_command(line)
    except ControlFailure as failure:
        return proto.error_line(failure.request_id, failure.code, failure.message, failure.data), None
    try:
        result = await HANDLERS[command.name](plane, command)
    except ControlFailure as failure:
        return proto.error_line(command.id, failure.code, failure.message, failure.data), None
    except Exception as exc:
        log.exception("control_command_failed", command=command.name)
        message = f"{command.name} failed: {type(exc).__name__}: {exc}"
        return proto.error_line(command.id, proto.INTERNAL_ERROR, message), None
    return proto.ok_line(command.id, result), command


async def serve_control(plane: ControlPlane, stream: trio.abc.Stream) -> None:
    """Answer one control connection's commands, in order, until it hangs up."""
    reader = framing.line_reader(stream)
    try:
        while True:
            try:
                line = await reader.receive()
            except LineTooLong as exc:  # answered, and the connection goes on after it
                log.warning("control_message_refused", error=str(exc))
                await stream.send_all(proto.error_line(None, proto.INVALID_REQUEST, str(exc)))
                continue
            if line is None:
                return
            if not line.strip():
                continue
            reply, command = await answer(plane, line)
            await stream.send_all(reply)
            if command is not None:
                log.info("control_command", command=command.name, server=command.args.get("server"))
                if command.name == "shutdown":
                    plane.shutdown()
                    return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
