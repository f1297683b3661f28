"""The control socket's view of builtin context servers: their index state in `status`,
and `context_reindex`.

A context server publishes its index state in its own database (context_index.py):
`status` reads it (read-only, in a worker thread) for each context backend and adds it
to the backend's entry as `context`, so neither the instance nor `assernctl` ever waits
on the context process. `context_reindex` forwards a reindex to the running process as a
signal (SIGUSR1: re-check every file; SIGUSR2 with `full`: rebuild from scratch) and
answers at once with where `assernctl` can follow it: no tool is added to what agents see.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import trio

from assern.actors.listener import control_protocol as proto
from assern.actors.listener.context_index import context_servers, index_entry
from assern.actors.listener.control_protocol import Command, ControlFailure

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assern.actors.backend.handle import BackendHandle
    from assern.actors.config.spec import ResolvedConfig


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
    running: dict[str, int] = {}
    for name in names:  # every one is checked before any is asked
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
        running[name] = pid
    asked = []
    for name, pid in running.items():
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
