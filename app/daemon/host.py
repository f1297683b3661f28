"""The workstation daemon: every project's clients, one tree per configuration, one pool.

```
assern daemon (DaemonHost)
├── pool          actors/backend/pool.py: one process per backend key, for every view
├── views         one Tree per configuration the clients resolve to (config actor,
│                 router, catalog, listener of its own), its backends drawn from the pool;
│                 stopped `view_grace` seconds after its last session left
└── sockets       daemon.sock (MCP: each connection starts with `assern/hello`) and
                  daemon.ctl (control: daemon-wide hello, status, shutdown, supersede and
                  contexts; any other command names its view by fingerprint)
```

A connection's hello (app/daemon/hello.py) gives its working folder, environment and
flags; the daemon resolves its configuration exactly as an instance started there would,
answers `assern/welcome` (or `assern/refused` with the configuration error, and hangs
up), then serves the rest of the connection in that configuration's view. A connection
can reach only its own view's servers; its stated context decides nothing else.

The daemon knows its build (app/daemon/identity.py): its welcome, its refusals and its
control `hello` carry it with the socket's protocol, and a client of another build that
speaks a protocol it reads joins (`daemon_build_differs` in the log). Once its sockets
are claimed it writes its runtime file (app/daemon/runtime_file.py), and at exit removes
it while it is still its own.

The daemon sweeps what a killed predecessor left (its pid registry) and runs the
watchdog that kills its backends' process groups if it dies, as a primary does.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from assern.actors.backend.pool import BackendPool, short_key
from assern.actors.backend.saved_catalog import CatalogStore, catalog_folder
from assern.actors.backend.status import dormant_since
from assern.actors.config.resolve import resolve_config
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.actors.identity import __version__
from assern.actors.jsonrpc import framing
from assern.actors.listener import control_protocol as proto
from assern.actors.listener.actor import contained, refusal_for
from assern.actors.listener.control import ControlPlane, answer, web_reply
from assern.actors.listener.page.actor import OpenPage, PageActor, PageAddress
from assern.actors.listener.report import InstanceInfo
from assern.actors.listener.roots_check import config_folder
from assern.actors.listener.session import ClientConnection
from assern.actors.listener.socket_basics import PROTOCOL_VERSION, peer_credentials
from assern.actors.listener.stats import RECENT
from assern.actors.listener.unix_socket import UnixListener, refuse
from assern.app.daemon.hello import MAX_HELLO, PROTOCOL, PROTOCOLS, BadHello, read_hello
from assern.app.daemon.launch import DRAIN_DEADLINE, alive
from assern.app.daemon.runtime_file import DaemonRecord, new_record, remove_own, write_record
from assern.app.daemon.supersede import Predecessor, Takeover, command_line
from assern.app.daemon.warm import (
    WARM_BOUND,
    Plan,
    WarmTarget,
    plan,
    running_backends,
    stated_context,
    unready,
    warm_backends,
)
from assern.app.front_door import Replay
from assern.app.hint import config_environ, resolution_stamp
from assern.app.instance import InstanceError, fingerprint
from assern.app.no_servers import DOCTOR_ID as NO_SERVERS
from assern.app.no_servers import looked_at, no_servers_line
from assern.app.tree import Tree, log_reader
from assern.supervisor.io.logs import LOG_FILE
from assern.supervisor.io.process import PidRegistry, sweep_orphans
from assern.supervisor.io.reader import LineTooLong
from assern.supervisor.mailbox import call, open_mailbox

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Mapping

    from assern.actors.listener.roots_check import SessionFolder

log = structlog.get_logger()

#: Seconds a client has to send its hello.
HELLO_TIMEOUT = 10.0
#: What a daemon being superseded tells each session whose `assern serve` resumes sessions.
SUPERSEDED = "assern/superseded"
#: Seconds the requests cut at the drain deadline have to be answered and written.
CUT_LIMIT = 2.0
#: Seconds between two looks at what a draining daemon still runs.
DRAIN_POLL = 0.05
#: Seconds the daemon's status waits for its predecessor's answer.
PREDECESSOR_TIMEOUT = 1.0
#: Seconds a view stays after its last session left (a client that reconnects at once
#: finds its backends and catalog as they were).
VIEW_GRACE = 30.0


@attrs.define(eq=False)
class View:
    """One configuration the daemon serves: its tree and who uses it."""

    tree: Tree
    label: str
    scope: trio.CancelScope
    plane: ControlPlane
    created_at: float
    sessions: int = 0
    #: trio time the last session left (None while any session is connected)
    idle_since: float | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.tree.config.value)


@attrs.define(kw_only=True, eq=False)
class Session:
    """One connected client, for status."""

    id: str
    view: str
    project: str | None
    cwd: str
    connected_at: float
    #: its `assern serve` moves the session to a successor when told (`resumes` in its hello)
    resumes: bool = False
    #: its connection in the view's listener, once it is served
    connection: ClientConnection | None = None
    #: what its hello stated to resolve its view (environment values: for a successor's
    #: `contexts` alone, never logged nor in status)
    context: dict[str, Any] = attrs.field(factory=dict, repr=False)

    def opened(self, connection: ClientConnection) -> None:
        self.connection = connection

    def document(self, now: float) -> dict[str, Any]:
        """The session's entry in the daemon's status."""
        connection = self.connection
        return {
            "id": self.id,
            # the connection's id, as the log's `client` field names it
            "connection": connection.client_id if connection is not None else None,
            "client": connection.client_name if connection is not None else None,
            "client_version": connection.client_version if connection is not None else None,
            "project": self.project,
            "view": self.view,
            "cwd": self.cwd,
            "connected_s": round(now - self.connected_at, 1),
            "roots": connection.roots.document() if connection is not None else None,
        }


def view_label(config: ResolvedConfig, digest: str) -> str:
    """How status and the log name a view: its project (or `-`) and a short fingerprint."""
    return f"{config.project or '-'}@{digest[:8]}"


def loader(params: dict[str, Any], assern_home: Path) -> Callable[[], ResolvedConfig]:
    """Resolves the configuration of a connection's hello, each time it is called."""
    environ = config_environ(params["env"])
    config = Path(params["config"]) if params["config"] else None
    cwd = Path(params["cwd"])
    if config is not None and not config.is_absolute():
        config = cwd / config

    def load() -> ResolvedConfig:
        return resolve_config(
            config_path=config, project=params["project"], cwd=cwd, environ=environ, assern_home=assern_home
        )

    return load


def _epoch(seconds: float | None) -> float | None:
    return round(seconds, 3) if seconds is not None else None


def _notice(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode() + b"\n"


class DaemonHost:
    """Runs the daemon until `shutdown()`, SIGTERM or SIGINT (see the module)."""

    def __init__(
        self,
        *,
        assern_home: Path,
        mcp: UnixListener | None,
        control: UnixListener | None,
        mcp_path: Path,
        control_path: Path,
        idle_exit: float = 0.0,
        view_grace: float = VIEW_GRACE,
        build: str,
        started_by: str = "command",
        generation: int = 1,
        takeover: Takeover | None = None,
    ) -> None:
        """`mcp` and `control` are the daemon's sockets, bound; None with `takeover`: a
        takeover begun (supersede.py), which the daemon completes once it warmed."""
        self.assern_home = assern_home
        self.mcp = mcp
        self.control = control
        self.mcp_path = mcp_path
        self.control_path = control_path
        self.idle_exit = idle_exit
        self.view_grace = view_grace
        self.started_by = started_by
        #: 1 for a daemon that superseded none; each successor counts one more
        self.generation = generation
        #: the daemon this one superseded, while it drains (and what it last said)
        self.predecessor = takeover.predecessor if takeover is not None else None
        #: a takeover begun, until it completes (then the sockets are ours)
        self.takeover = takeover
        #: what warming for the takeover did (for status: no environment value)
        self.warmed: dict[str, Any] | None = None
        #: why the daemon could not take the sockets over (it stops: the exit status says so)
        self.failure: str | None = None
        #: set once a successor superseded this daemon: its build, pid and the drain's deadline
        self.superseded: dict[str, Any] | None = None
        self.started_at = time.time()
        self.build = build
        self.record: DaemonRecord = new_record(build, started_at=self.started_at)
        self._runtime_written = False
        run = assern_home / "run"
        self.pids = PidRegistry(run / "pids")
        self.pool = BackendPool(pids=self.pids, catalogs=CatalogStore(catalog_folder(assern_home)))
        self.views: dict[int, View] = {}
        self.sessions: dict[str, Session] = {}
        self._view_ids = 0
        self._session_ids = 0
        self._cancel = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._view_lock = trio.Lock()
        self._changed = trio.Event()
        #: the daemon's status page, served from the first `assernctl web` on
        self.page_send, page_recv = open_mailbox[OpenPage](4)
        self.page = PageActor(
            page_recv, status=self._page_status, logs=log_reader(assern_home / "logs" / LOG_FILE)
        )

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="daemon"):
            log.info(
                "daemon_starting",
                pid=os.getpid(),
                version=__version__,
                build=self.build,
                protocol=PROTOCOL,
                socket=str(self.mcp_path),
            )
            swept = sweep_orphans(self.pids.path.parent)
            if swept:
                log.warning("orphans_swept", pids=swept)
            log.info("watchdog_started", pid=self.pids.guard())
            try:
                with self._cancel:
                    async with trio.open_nursery() as nursery:
                        self._nursery = nursery
                        nursery.start_soon(self._signals)
                        await nursery.start(self.pool.run)
                        nursery.start_soon(self._retire_views)
                        if self.takeover is not None and not await self._warm_and_take_over(self.takeover):
                            return
                        assert self.mcp is not None
                        assert self.control is not None
                        self._write_runtime_file()
                        nursery.start_soon(self._accept, self.mcp, self._serve_mcp, False)
                        nursery.start_soon(self._accept, self.control, self._serve_control, True)
                        if self.predecessor is not None:
                            nursery.start_soon(self._follow_predecessor, self.predecessor)
                        await nursery.start(self.page.run)
                        task_status.started()
            finally:
                if self.takeover is not None:  # stopped before it took the sockets
                    self.takeover.abandon()
                    self.takeover = None
                self.page.close()
                self._remove_runtime_file()
                self._withdraw()
                self.pids.close()
                log.info("daemon_stopped")

    def shutdown(self, reason: str = "requested") -> None:
        """Stop taking connections, then stop every view and backend (each gracefully)."""
        log.info("daemon_stopping", reason=reason)
        self.pool.close()
        self._remove_runtime_file()
        self._withdraw()
        self._cancel.cancel()

    def _withdraw(self) -> None:
        """Close this daemon's listening sockets (their files only while still its own)."""
        if self.mcp is not None:
            self.mcp.withdraw()
        if self.control is not None:
            self.control.withdraw()

    # ------------------------------------------------------------------ supersede

    async def _warm_and_take_over(self, takeover: Takeover) -> bool:
        """Warm what the running daemon's moving sessions use (app/daemon/warm.py), then
        take its sockets; False when they could not be taken (the daemon stops)."""
        answer, why = await trio.to_thread.run_sync(takeover.contexts)
        if answer is None:
            log.info("daemon_warm_skipped", predecessor_pid=takeover.predecessor.pid, reason=why)
        else:
            await self._warm(plan(answer))
        try:
            self.mcp, self.control = await trio.to_thread.run_sync(takeover.complete)
        except InstanceError as exc:
            self.takeover = None
            self.failure = str(exc)
            log.error("daemon_takeover_failed", error=str(exc))
            self.shutdown("the takeover failed")
            return False
        self.takeover = None
        now = trio.current_time()
        for view in self.views.values():
            if view.sessions == 0:  # a warmed view's grace counts from the takeover
                view.idle_since = now
        self._note_change()
        return True

    async def _warm(self, warm_plan: Plan) -> None:
        """Start the views of `warm_plan` and the backends that ran in them, waiting at
        most `WARM_BOUND` s in all; log and keep (for status) what it did."""
        for reason in warm_plan.skipped:
            log.warning("daemon_warm_skipped", reason=reason)
        started = trio.current_time()
        warmed: list[tuple[WarmTarget, View]] = []
        with trio.move_on_after(WARM_BOUND) as bound:
            async with trio.open_nursery() as nursery:
                for target in warm_plan.targets:
                    nursery.start_soon(self._warm_view, target, warmed)
        not_warm = [
            entry.document()
            for target, view in warmed
            for entry in unready(view.tree.directory.value, view.label, target.running)
        ]
        self.warmed = {
            "views": len(warmed),
            "sessions": sum(target.sessions for target, _ in warmed),
            "backends": sum(len(target.running) for target, _ in warmed) - len(not_warm),
            "not_warm": not_warm,
            "skipped": len(warm_plan.targets) - len(warmed),
            "bound_passed": bound.cancelled_caught,
            "warm_s": round(trio.current_time() - started, 3),
        }
        log.info("daemon_warmed", **{k: v for k, v in self.warmed.items() if k != "not_warm"})
        if not_warm:
            log.warning("daemon_warm_incomplete", not_warm=not_warm)

    async def _warm_view(self, target: WarmTarget, warmed: list[tuple[WarmTarget, View]]) -> None:
        """Resolve `target`'s context as a new connection's, start its view and the
        backends that ran in it (a context that no longer resolves is skipped)."""
        params = dict(target.context)
        if not await trio.Path(params["cwd"]).is_dir():
            gone = "its folder is gone"
            log.warning("daemon_warm_skipped", view=target.view, cwd=params["cwd"], reason=gone)
            return
        load = loader(params, self.assern_home)
        try:
            config = await trio.to_thread.run_sync(load)
        except ConfigError as exc:
            log.warning("daemon_warm_skipped", view=target.view, cwd=params["cwd"], reason=str(exc))
            return
        view = await self._view_for(config, load)
        warmed.append((target, view))
        await warm_backends(view.tree, view.label, target.running)

    def contexts(self) -> dict[str, Any]:
        """For a successor (the `contexts` command): what each session stated in its hello,
        and which backends of each view run (app/daemon/warm.py). It carries environment
        values: only ever sent on the control socket, to its same-user peer."""
        sessions = [
            {
                "session": session.id,
                "view": session.view,
                "resumes": session.resumes,
                "context": session.context,
            }
            for session in self.sessions.values()
        ]
        views = [
            {"label": view.label, "running": running_backends(view.tree.directory.value)}
            for view in self.views.values()
        ]
        return {"sessions": sessions, "views": views}

    def supersede(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """A successor took the sockets: stop accepting, tell the sessions that resume,
        let the calls in flight finish (at most `deadline` s), then stop.

        Raises:
            ValueError: the successor's `build`, `pid` or `deadline` is not what it must be.
        """
        build, pid, deadline = args.get("build"), args.get("pid"), args.get("deadline", DRAIN_DEADLINE)
        if not isinstance(build, str) or not isinstance(pid, int) or isinstance(pid, bool):
            raise ValueError("supersede needs the successor's build (a string) and pid (an integer)")
        if not isinstance(deadline, int | float) or isinstance(deadline, bool) or not 0 <= deadline <= 3600:
            raise ValueError("deadline must be a number of seconds from 0 to 3600")
        if self.superseded is None:
            assert self._nursery is not None
            self.superseded = {"build": build, "pid": pid, "deadline_s": float(deadline)}
            told = self._tell_sessions({"build": build, "pid": pid})
            log.info(
                "daemon_superseded",
                by=build,
                successor_pid=pid,
                drain_deadline_s=float(deadline),
                calls_in_flight=self.calls_in_flight(),
                sessions=len(self.sessions),
                sessions_told=len(told),
            )
            self._remove_runtime_file()
            self._withdraw()  # the files are the successor's now: only our sockets close
            self._nursery.start_soon(self._drain, build, float(deadline), told)
        return {"draining": True, "pid": os.getpid(), "calls_in_flight": self.calls_in_flight()}

    def _tell_sessions(self, params: dict[str, Any]) -> set[str]:
        told = set()
        for session in self.sessions.values():
            connection = session.connection
            if session.resumes and connection is not None and connection.tell(SUPERSEDED, params):
                told.add(session.id)
        return told

    def _connections(self) -> list[ClientConnection]:
        return [c for view in self.views.values() for c in view.tree.listener.connections.values()]

    def calls_in_flight(self) -> int:
        """The requests of every session not answered yet."""
        return sum(connection.in_flight() for connection in self._connections())

    async def _drain(self, build: str, deadline: float, told: set[str]) -> None:
        """Wait until no call runs and every session told has moved on; then stop."""
        started = trio.current_time()
        with trio.move_on_after(deadline) as waited:
            while self.calls_in_flight() or told & set(self.sessions):  # noqa: ASYNC110 - counts kept elsewhere
                await trio.sleep(DRAIN_POLL)
        left = self.calls_in_flight()
        if waited.cancelled_caught:
            log.warning("daemon_drain_deadline", deadline_s=deadline, calls_in_flight=left)
            await self._cut_all(
                f"the assern daemon was superseded by build {build} and its drain deadline of "
                f"{deadline:g} s passed while this request ran; it was not retried"
            )
        log.info("daemon_drained", drain_s=round(trio.current_time() - started, 3), calls_cut=left)
        self.shutdown(f"superseded by {build}")

    async def _follow_predecessor(self, predecessor: Predecessor) -> None:
        """Ask the daemon this one superseded, on the connection kept to it, how many calls
        it still runs, until it is gone (for status and the log)."""
        log.info(
            "daemon_superseding",
            predecessor_pid=predecessor.pid,
            predecessor_build=predecessor.build,
            generation=self.generation,
            reason=predecessor.reason,
        )
        sock, predecessor.sock = predecessor.sock, None
        if sock is None:
            return
        sock.setblocking(False)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        reader = framing.line_reader(stream)
        asked = 10
        try:
            async with stream:
                while True:
                    asked += 1
                    await stream.send_all(command_line("hello", asked))
                    with trio.fail_after(PREDECESSOR_TIMEOUT * 5):
                        line = await reader.receive()
                    if line is None:
                        break
                    found = json.loads(line).get("result")
                    if isinstance(found, dict) and isinstance(found.get("calls_in_flight"), int):
                        predecessor.calls_in_flight = found["calls_in_flight"]
                    await trio.sleep(PREDECESSOR_TIMEOUT)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError, ValueError):
            pass
        predecessor.draining = False
        predecessor.calls_in_flight = 0
        log.info("daemon_predecessor_gone", predecessor_pid=predecessor.pid)

    async def _cut_all(self, reason: str) -> None:
        """Answer every request still running with `reason` and let the answers go out."""
        connections = self._connections()
        for connection in connections:
            connection.cut(reason)
        with trio.move_on_after(CUT_LIMIT):
            while self.calls_in_flight():  # noqa: ASYNC110 - counts kept elsewhere
                await trio.sleep(DRAIN_POLL)
            await trio.lowlevel.checkpoint()  # the cut requests' own answers are written by now
            for connection in connections:
                await connection.flushed(CUT_LIMIT)

    def _predecessor_doc(self) -> dict[str, Any] | None:
        predecessor = self.predecessor
        if predecessor is None:
            return None
        return {
            "pid": predecessor.pid,
            "build": predecessor.build,
            "generation": predecessor.generation,
            "reason": predecessor.reason,
            "draining": predecessor.draining and alive(predecessor.pid),
            "calls_in_flight": predecessor.calls_in_flight,
        }

    def _write_runtime_file(self) -> None:
        try:
            path = write_record(self.mcp_path.parent, self.record)
        except OSError as exc:
            log.warning("daemon_runtime_file_failed", folder=str(self.mcp_path.parent), error=str(exc))
            return
        self._runtime_written = True
        log.info("daemon_runtime_file", path=str(path))

    def _remove_runtime_file(self) -> None:
        """Remove the runtime file while it is this daemon's own (before the sockets go:
        a successor claims them, and writes its own file, only after)."""
        if self._runtime_written:
            self._runtime_written = False
            remove_own(self.mcp_path.parent, self.record)

    def _refusal(self, error: str) -> bytes:
        return _notice("assern/refused", {"error": error, "build": self.build, "protocol": PROTOCOL})

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    for view in list(self.views.values()):
                        view.tree.reload("SIGHUP")
                else:
                    self.shutdown(f"signal {signal.Signals(signum).name}")

    def _note_change(self) -> None:
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    # ------------------------------------------------------------------ sockets

    async def _accept(
        self, listener: UnixListener, serve: Callable[[socket.socket], Any], control: bool
    ) -> None:
        assert self._nursery is not None
        while (sock := await listener.accept()) is not None:
            try:
                uid, pid = peer_credentials(sock)
            except OSError:
                uid = pid = None
            if (refusal := refusal_for(uid, os.getuid(), control=control)) is not None:
                log.warning(
                    "connection_refused", socket="control" if control else "mcp", peer_uid=uid, peer_pid=pid
                )
                refuse(sock, refusal)
                continue
            self._nursery.start_soon(serve, sock)
            await trio.lowlevel.checkpoint()

    async def _serve_mcp(self, sock: socket.socket) -> None:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        async with stream:
            first, rest = await self._first_line(stream)
            if first is None:
                return
            try:
                params = read_hello(first, daemon_build=self.build)
            except BadHello as exc:
                log.warning("daemon_hello_refused", error=str(exc))
                await self._say(stream, self._refusal(str(exc)))
                return
            load = loader(params, self.assern_home)
            try:
                config, stamp = await trio.to_thread.run_sync(self._resolve, params, load)
            except ConfigError as exc:
                log.warning("daemon_config_refused", cwd=params["cwd"], error=str(exc))
                await self._say(stream, self._refusal(f"configuration error\n{exc}"))
                return
            profile = params["profile"] or None
            problem = config.settings.profile_problem(profile)
            if problem is not None:
                await self._say(stream, self._refusal(problem))
                return
            view = await self._view_for(config, load)
            nothing = no_servers_line(config)
            welcome = {
                "build": self.build,
                "protocol": PROTOCOL,
                "started_at": self.started_at,
                "pid": os.getpid(),
                "python": sys.executable,
                "view": view.label,
                "project": config.project,
                "warnings": [*config.warnings, *config.trust.lines()],
                # lines the client's `assern serve` prints on stderr as they are
                "notices": [nothing] if nothing is not None else [],
            }
            if stamp is not None:
                welcome["stamp"] = stamp
                # an `initialize` answered before then may lack what a backend offers
                welcome["capabilities_known"] = view.tree.capabilities_known()
            if not await self._say(stream, _notice("assern/welcome", welcome)):
                return
            if params["build"] != self.build:
                log.warning(
                    "daemon_build_differs",
                    daemon_build=self.build,
                    client_build=params["build"],
                    cwd=params["cwd"],
                )
            await self._serve_session(
                view, params, Replay(rest, stream, eof=False), stream, profile, config_folder(config)
            )

    def _resolve(
        self, params: dict[str, Any], load: Callable[[], ResolvedConfig]
    ) -> tuple[ResolvedConfig, dict[str, Any] | None]:
        """A connection's configuration, and for a resuming shim what its resolution
        depended on (the shim keeps its session's first answers under it:
        app/first_answers.py). In a worker thread: both read files."""
        config = load()
        if not params.get("resumes"):
            return config, None
        args = ["--config", params["config"]] if params["config"] else []
        stamp = resolution_stamp(
            config,
            cwd=params["cwd"],
            args=args,
            environ=config_environ(params["env"]),
            assern_home=self.assern_home,
        )
        return config, stamp

    async def _first_line(self, stream: trio.SocketStream) -> tuple[bytes | None, bytes]:
        """The connection's first line and the bytes read past it (None: none came)."""
        buffer = b""
        with trio.move_on_after(HELLO_TIMEOUT):
            while b"\n" not in buffer:
                try:
                    chunk = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return None, b""
                if not chunk:
                    return None, b""
                buffer += chunk
                if len(buffer) > MAX_HELLO and b"\n" not in buffer:
                    too_long = f"the hello line exceeded {MAX_HELLO} bytes"
                    await self._say(stream, self._refusal(too_long))
                    return None, b""
            line, _, rest = buffer.partition(b"\n")
            return line, rest
        log.warning("daemon_hello_timeout", timeout_s=HELLO_TIMEOUT)
        return None, b""

    @staticmethod
    async def _say(stream: trio.SocketStream, line: bytes) -> bool:
        try:
            await stream.send_all(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _serve_session(
        self,
        view: View,
        params: dict[str, Any],
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        profile: str | None,
        folder: SessionFolder | None,
    ) -> None:
        self._session_ids += 1
        session_id = f"session-{self._session_ids}"
        listener = view.tree.listener
        session = self.sessions[session_id] = Session(
            id=session_id,
            view=view.label,
            project=view.tree.config.value.project,
            cwd=params["cwd"],
            connected_at=time.time(),
            resumes=params.get("resumes") is True,
            context=stated_context(params),
        )
        view.sessions += 1
        view.idle_since = None
        log.info("daemon_session", session=session_id, view=view.label, cwd=params["cwd"])
        try:
            await listener.serve_connection(
                "socket",
                receive,
                send,
                profile=profile,
                folder=folder,
                opened=session.opened,
            )
        finally:
            del self.sessions[session_id]
            view.sessions -= 1
            if view.sessions == 0:
                view.idle_since = trio.current_time()
            self._note_change()
            log.info("daemon_session_ended", session=session_id, view=view.label)

    # -------------------------------------------------------------------- views

    async def _view_for(self, config: ResolvedConfig, load: Callable[[], ResolvedConfig]) -> View:
        """The running view of `config` (the same fingerprint), started when there is none."""
        digest = fingerprint(config)
        async with self._view_lock:
            for view in self.views.values():
                if view.fingerprint == digest:
                    return view
            assert self._nursery is not None
            label = view_label(config, digest)
            tree = Tree(
                config,
                load,
                stdio=False,
                handle_signals=False,
                pool=self.pool,
                label=label,
                state_home=self.assern_home,
            )
            self._view_ids += 1
            view_id = self._view_ids
            scope = trio.CancelScope()
            info = InstanceInfo(
                pid=os.getpid(),
                slot="daemon",
                mcp_socket=str(self.mcp_path),
                control_socket=str(self.control_path),
                started_at=self.started_at,
                daemon=True,
                version=__version__,
            )
            view = View(
                tree=tree,
                label=label,
                scope=scope,
                plane=tree.control_plane(info),
                created_at=time.time(),
                idle_since=trio.current_time(),
            )
            self.views[view_id] = view
            log.info("daemon_view_started", view=label, project=config.project, servers=list(config.servers))
            if not config.servers:
                looked = [str(path) for path in looked_at(config)]
                log.warning("config_no_servers", doctor=NO_SERVERS, view=label, looked=looked)
            await self._nursery.start(self._run_view, view_id, view)
            return view

    async def _run_view(self, view_id: int, view: View, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            with view.scope:
                await view.tree.run(task_status=task_status)
        finally:
            self.views.pop(view_id, None)
            self._note_change()
            log.info("daemon_view_stopped", view=view.label)

    async def _retire_views(self) -> None:
        """Stop views `view_grace` s after their last session; the daemon after `idle_exit`
        s with no view left (0: never)."""
        empty_since: float | None = trio.current_time()
        while True:
            now = trio.current_time()
            deadline = now + 3600.0
            for view in list(self.views.values()):
                if view.sessions or view.idle_since is None:
                    continue
                if now - view.idle_since >= self.view_grace:
                    log.info("daemon_view_idle", view=view.label, grace_s=self.view_grace)
                    view.idle_since = None
                    view.scope.cancel()
                else:
                    deadline = min(deadline, view.idle_since + self.view_grace)
            if self.views or self.sessions:
                empty_since = None
            elif empty_since is None:
                empty_since = now
            if self.idle_exit > 0 and empty_since is not None:
                if now - empty_since >= self.idle_exit:
                    self.shutdown(f"idle for {self.idle_exit:g} s")
                    return
                deadline = min(deadline, empty_since + self.idle_exit)
            with trio.move_on_at(deadline):
                await self._changed.wait()

    # ------------------------------------------------------------------ control

    async def _serve_control(self, sock: socket.socket) -> None:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        async with stream:
            await contained("control", self._control(stream))

    async def _control(self, stream: trio.SocketStream) -> None:
        reader = framing.line_reader(stream)
        try:
            while True:
                try:
                    line = await reader.receive()
                except LineTooLong as exc:
                    await stream.send_all(proto.error_line(None, proto.INVALID_REQUEST, str(exc)))
                    continue
                if line is None:
                    return
                if not line.strip():
                    continue
                reply, stop = await self._control_answer(line)
                await stream.send_all(reply)
                if stop:
                    self.shutdown("assernctl shutdown")
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _control_answer(self, line: bytes) -> tuple[bytes, bool]:
        """The reply to one control line, and whether the daemon now stops."""
        try:
            command = proto.parse_command(line)
        except proto.ControlFailure as failure:
            return proto.error_line(failure.request_id, failure.code, failure.message, failure.data), False
        wanted = command.args.get("view")
        if wanted is None:
            if command.name == "hello":
                return proto.ok_line(command.id, self.hello()), False
            if command.name == "status":
                return proto.ok_line(command.id, self.status()), False
            if command.name == "contexts":
                return proto.ok_line(command.id, self.contexts()), False
            if command.name == "shutdown":
                return proto.ok_line(command.id, {"stopping": True, "pid": os.getpid()}), True
            if command.name == "supersede":
                try:
                    draining = self.supersede(command.args)
                except ValueError as exc:
                    return proto.error_line(command.id, proto.INVALID_ARGUMENTS, str(exc)), False
                return proto.ok_line(command.id, draining), False
            if command.name == "web":
                try:
                    page = await web_reply(self._open_page, command)
                except proto.ControlFailure as failure:
                    return proto.error_line(command.id, failure.code, failure.message, failure.data), False
                return proto.ok_line(command.id, page), False
            message = f"{command.name} needs a view: the daemon serves several configurations"
            return proto.error_line(
                command.id, proto.INVALID_ARGUMENTS, message, {"views": self._view_docs()}
            ), False
        view = next((v for v in self.views.values() if v.fingerprint == wanted), None)
        if view is None:
            message = f"no view {wanted!r} runs in this daemon (a client of that configuration starts it)"
            return proto.error_line(
                command.id, proto.INVALID_ARGUMENTS, message, {"views": self._view_docs()}
            ), False
        if command.name == "shutdown":  # a view's shutdown stops that view, not the daemon
            view.scope.cancel()
            return proto.ok_line(command.id, {"stopping": True, "view": view.label}), False
        reply, _ = await answer(view.plane, line)
        return reply, False

    async def _open_page(self) -> PageAddress:
        return await call(self.page_send, lambda reply: OpenPage(reply=reply))

    async def _page_status(self) -> dict[str, Any]:
        """What the status page shows: the daemon's status and every view's last calls."""
        doc = self.status()
        calls = [call for view in self.views.values() for call in view.tree.shared.stats.recent_calls()]
        doc["recent_calls"] = sorted(calls, key=lambda call: call["at"], reverse=True)[:RECENT]
        return doc

    def _refused(self, command: proto.Command, message: str) -> bytes:
        return proto.error_line(command.id, proto.INVALID_ARGUMENTS, message, {"views": self._view_docs()})

    # ------------------------------------------------------------------- status

    def _view_docs(self) -> list[dict[str, Any]]:
        docs = []
        for view in self.views.values():
            config = view.tree.config.value
            docs.append(
                {
                    "label": view.label,
                    "fingerprint": view.fingerprint,
                    "project": config.project,
                    "config_files": [str(path) for path in config.files],
                    "servers": list(config.servers),
                    "sessions": view.sessions,
                }
            )
        return docs

    def hello(self) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL_VERSION,  # this control socket's, as every instance's hello
            "socket_protocol": PROTOCOL,  # the MCP socket's (its hello), as the runtime file's
            "socket_protocols": list(PROTOCOLS),
            "pid": os.getpid(),
            "slot": "daemon",
            "workstation": True,
            "version": __version__,
            "build": self.build,
            "cookie": self.record.cookie,
            "started_at": self.started_at,
            "generation": self.generation,
            "superseded": self.superseded,
            "calls_in_flight": self.calls_in_flight(),
            "views": self._view_docs(),
        }

    def status(self) -> dict[str, Any]:
        """The daemon's whole status: itself, every session, view and shared backend."""
        now = time.time()
        sessions = [session.document(now) for session in self.sessions.values()]
        backends = []
        for shared in self.pool.shared():
            status = shared.handle.status
            backends.append(
                {
                    "name": shared.name,
                    "key": short_key(shared.key),
                    "state": status.state.value,
                    "state_since": round(status.state_since, 3),
                    "idle_since": _epoch(status.idle_since),
                    "dormant_since": _epoch(dormant_since(status)),
                    "in_flight": status.in_flight,
                    "pid": status.pid,
                    "views": dict(shared.users),
                    "sessions": sum(v.sessions for v in self.views.values() if v.label in shared.users),
                    "tools": status.tools,
                    "restarts": status.restarts,
                    "last_error": status.last_error,
                    "idle_timeout": shared.handle.spec.idle_timeout,
                }
            )
        return {
            "daemon": {
                "pid": os.getpid(),
                "version": __version__,
                "build": self.build,
                "protocol": PROTOCOL,
                "started_at": round(self.started_at, 3),
                "uptime_s": round(now - self.started_at, 1),
                "started_by": self.started_by,
                "generation": self.generation,
                "predecessor": self._predecessor_doc(),
                "warmed": self.warmed,
                "superseded": self.superseded,
                "calls_in_flight": self.calls_in_flight(),
                "sockets": {"mcp": str(self.mcp_path), "control": str(self.control_path)},
            },
            "views": self._view_docs(),
            "sessions": sessions,
            "backends": backends,
        }
