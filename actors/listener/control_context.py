"""The control socket's view of builtin context servers: their index state in `status`,
and `context_reindex`.

A context server publishes its index state in its own database (assern.context.state):
`status` reads it (read-only, in a worker thread) for each context backend and adds it
to the backend's entry as `context`, so neither the instance nor `assernctl` ever waits
on the context process. `context_reindex` forwards a reindex to the running process as a
signal (SIGUSR1: re-check every file; SIGUSR2 with `full`: rebuild from scratch) and
answers at once with where `assernctl` can follow it: no tool is added to what agents see.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from assern.actors.config.home import default_assern_home
from assern.actors.config.merge import database_path
from assern.actors.listener import control_protocol as proto
from assern.actors.listener.control_protocol import Command, ControlFailure
from assern.context.state import ContextArgs, context_args, read_index

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assern.actors.backend.handle import BackendHandle
    from assern.actors.config.spec import ResolvedConfig


def context_servers(config: ResolvedConfig) -> dict[str, ContextArgs]:
    """The builtin context servers of `config`, by name."""
    found = {}
    for name, spec in config.servers.items():
        args = context_args(spec.args)
        if args is not None:
            found[name] = args
    return found


def database_of(args: ContextArgs, environ: Mapping[str, str]) -> Path:
    """The database a context server keeps its index in (the path it was given, else
    the one it computes itself under `$ASSERN_HOME`)."""
    if args.db is not None:
        return Path(args.db)
    return database_path(default_assern_home(environ), Path(args.root))


def index_entry(args: ContextArgs, environ: Mapping[str, str]) -> dict[str, Any]:
    """One context server's `context` entry: its root, database and what it holds (blocking)."""
    db = database_of(args, environ)
    found = read_index(db)
    if found is None:
        return {"root": args.root, "database": str(db), "indexed": False}
    return {"root": args.root, **found, "indexed": True}


async def add_context(doc: dict[str, Any], config: ResolvedConfig) -> None:
    """Add each context backend's index state to its entry of a status document."""
    servers = context_servers(config)
    environ = dict(os.environ)
    for backend in doc.get("backends") or ():
        args = servers.get(backend.get("name", ""))
        if args is not None:
            backend["context"] = await trio.to_thread.run_sync(index_entry, args, environ)


async def context_reindex(
    command: Command, config: ResolvedConfig, directory: Mapping[str, BackendHandle]
) -> dict[str, Any]:
    """Ask the running context server `server` (else every one) to reindex its root."""
    server = proto.string_arg(command, "server", required=False)
    full = command.args.get("full", False)
    if not isinstance(full, bool):
        raise ControlFailure(proto.INVALID_ARGUMENTS, '"full" must be true or false', None, command.id)
    servers = context_servers(config)
    if not servers:
        raise ControlFailure(
            proto.UNKNOWN_SERVER,
            'no context server is configured (a [servers.NAME] table with builtin = "context")',
            {"servers": []},
            command.id,
        )
    if server is not None and server not in servers:
        raise ControlFailure(
            proto.UNKNOWN_SERVER,
            f"'{server}' is not a context server (context servers: {', '.join(servers)})",
            {"servers": list(servers)},
            command.id,
        )
    names = [server] if server is not None else list(servers)
    environ = dict(os.environ)
    asked = []
    for name in names:
        handle = directory.get(name)
        state = handle.status.state.value if handle is not None else "not started"
        pid = handle.status.pid if handle is not None else None
        if state != "ready" or pid is None:
            raise ControlFailure(
                proto.COMMAND_FAILED,
                f"the context server '{name}' is not running (state: {state}); "
                f"start it with `assernctl start {name}`",
                {"server": name, "state": state},
                command.id,
            )
        entry = await trio.to_thread.run_sync(index_entry, servers[name], environ)
        # a process that has not written its state yet counts its reindexes from 0
        before = int(entry.get("reindex_asked") or 0) if entry.get("pid") == pid else 0
        os.kill(pid, signal.SIGUSR2 if full else signal.SIGUSR1)
        asked.append(
            {
                "server": name,
                "pid": pid,
                "root": entry["root"],
                "database": entry["database"],
                "full": full,
                # the reindex is done once the database's reindex_done reaches this
                "reindex": before + 1,
            }
        )
    return {"servers": asked}
