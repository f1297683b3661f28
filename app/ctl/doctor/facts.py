"""What `assernctl doctor` knows, gathered once (gather.py) before any check runs.

Plain frozen values: the checks (checks/) are pure functions of a `Facts`, so each one is
tested by building the facts it reads, without files, processes or sockets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.app.ctl.clients.survey import Survey
from assern.app.daemon.runtime_file import NotVerified, Verified

PathKind = Literal["missing", "folder", "file", "socket", "link", "other", "unreadable"]


@attrs.frozen(kw_only=True)
class PathFact:
    """One file or folder as `lstat` (or `stat`, for paths that may be symlinks) saw it.

    Attributes:
        path: The path.
        kind: What it is; "unreadable" when it could not be looked at (see `error`).
        uid: Its owner.
        gid: Its group.
        mode: Its permission bits (`stat.S_IMODE`).
        error: Why it could not be looked at.
    """

    path: Path
    kind: PathKind
    uid: int | None = None
    gid: int | None = None
    mode: int | None = None
    error: str | None = None


@attrs.frozen(kw_only=True)
class Launcher:
    """Where a stdio server's command is found, on the PATH its instance will use.

    Attributes:
        server: The server's name.
        command: Its `command`, expanded.
        searched: The PATH searched; None for a command with a folder in it.
        origin: Whose PATH that is ("the PATH its configuration sets", "the PATH of the
            running instance (pid 4242)", "this shell's PATH").
        found: Where the command is; None when it is not there (or not executable).
        interpreter: What the found file's `#!` line runs (`node` for npx), if anything.
        interpreter_found: Where that interpreter is; None when it is not there.
        elsewhere: Where this shell's PATH finds the command when `searched` does not.
    """

    server: str
    command: str
    searched: str | None
    origin: str
    found: str | None
    interpreter: str | None = None
    interpreter_found: str | None = None
    elsewhere: str | None = None


@attrs.frozen(kw_only=True)
class SlotFact:
    """One slot of the socket folder (`NAME.ctl` / `NAME.sock`) and what its control socket said.

    Attributes:
        name: The slot's name.
        control: Its control socket.
        liveness: "live" (something accepts connections), "stale" (nobody listens) or
            "absent" (no control socket, only the MCP one).
        hello: The `hello` answer, when it gave one.
        error: Why it gave none.
    """

    name: str
    control: Path
    liveness: str
    hello: Mapping[str, Any] | None = None
    error: str | None = None


@attrs.frozen(kw_only=True)
class InstanceFact:
    """The running instance of this configuration.

    Attributes:
        slot: Its slot's name.
        control: Its control socket.
        hello: Its `hello` answer.
        status: Its `status` document, or None when it gave none (see `status_error`).
        status_error: Why it gave no status.
        path: Its process's PATH, when this platform lets us read it (Linux /proc).
    """

    slot: str
    control: Path
    hello: Mapping[str, Any]
    status: Mapping[str, Any] | None = None
    status_error: str | None = None
    path: str | None = None

    @property
    def pid(self) -> int | None:
        pid = self.hello.get("pid")
        return pid if isinstance(pid, int) else None


HttpAnswer = Literal["free", "assern", "other", "unknown"]


@attrs.frozen(kw_only=True)
class HttpFact:
    """Who holds the address of `[listen] http`.

    Attributes:
        address: `HOST:PORT`.
        port: The port.
        answer: "free" (nothing accepts connections), "assern" (an assern front answers
            `/healthz`), "other" (something else does) or "unknown" (see `detail`).
        detail: What was seen.
    """

    address: str
    port: int
    answer: HttpAnswer
    detail: str = ""


@attrs.frozen(kw_only=True)
class Facts:
    """Everything the checks read.

    Attributes:
        version: The installed assern's version.
        build: The installed assern's build id (app/daemon/identity.py).
        uid: Our user id.
        own_group: Our primary group when it is ours alone (a user private group: named
            after us, no other member), whose permission bits give nobody else access.
        flags: The `--config PATH` / `--project NAME` given, to repeat in fix commands.
        server: `--server NAME`: the per-server checks look at that server alone.
        cwd: The working folder the configuration was resolved from.
        assern_home: `$ASSERN_HOME`.
        path: This shell's PATH (None: unset).
        config: The configuration as `assern serve` resolves it here, or None.
        config_error: Why it does not resolve.
        sharing: Whether instance sharing is on (`ASSERN_NO_INSTANCE_SHARING` unset).
        run_dir: The socket folder, or None when no folder can hold the sockets.
        run_dir_error: Why none can.
        run_paths: The socket folder (its per-user parent first, for the /tmp fallback),
            then every socket, lock, hint folder and hint in it.
        home_paths: `$ASSERN_HOME`, then each configuration and .env file in effect.
        slots: Every slot in the socket folder.
        candidates: The slot names this configuration's instance may have (every slot
            when the configuration does not resolve).
        instance: The running instance of this configuration, if one answered.
        runtime: The workstation daemon's runtime file, checked against the daemon that
            answers beside it; None when there is no socket folder.
        matches: How many running instances match this configuration (more than one:
            doctor cannot tell which one serves it).
        launchers: Each stdio server's command, looked up.
        http: Who holds `[listen] http`, when the configuration sets it.
        clients: The MCP clients found for this user and folder (`assernctl clients`),
            or None when they could not be read.
    """

    version: str
    build: str
    uid: int
    own_group: int | None = None
    flags: tuple[str, ...] = ()
    server: str | None = None
    cwd: Path
    assern_home: Path
    path: str | None
    config: ResolvedConfig | None
    config_error: ConfigError | None = None
    sharing: bool = True
    run_dir: Path | None = None
    run_dir_error: str | None = None
    run_paths: tuple[PathFact, ...] = ()
    home_paths: tuple[PathFact, ...] = ()
    slots: tuple[SlotFact, ...] = ()
    candidates: tuple[str, ...] = ()
    instance: InstanceFact | None = None
    runtime: Verified | NotVerified | None = None
    matches: int = 0
    launchers: tuple[Launcher, ...] = ()
    http: HttpFact | None = None
    clients: Survey | None = None

    def command(self, *words: str) -> str:
        """An `assernctl` command line with this run's `--config`/`--project`."""
        return " ".join(("assernctl", *words, *self.flags))
