"""The documents the control socket answers with: instance status and the tool list.

Pure functions of published snapshots (the config, the backend directory, the catalog)
plus the clock readings passed in, so tests build them directly. The field names are
part of `assernctl status --json`'s documented, stable output (docs/operations.md, "assernctl").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.backend.status import dormant_since

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from assern.actors.backend.handle import BackendHandle
    from assern.actors.config.spec import ResolvedConfig
    from assern.actors.listener.stats import CallStats
    from assern.actors.router.catalog import Catalog

#: How many of a backend's last stderr lines a status shows.
STDERR_LINES = 10


@attrs.frozen(kw_only=True)
class InstanceInfo:
    """What an instance is, fixed at its start.

    Attributes:
        pid: The primary's process id.
        slot: Its socket name (`assern`, `work`, `work-3f9a0c1b2d4e`).
        mcp_socket: The MCP socket's path.
        control_socket: The control socket's path.
        started_at: When it started (epoch seconds).
        daemon: Whether it runs without a stdio client (`assern daemon`).
        version: assern's version.
    """

    pid: int
    slot: str
    mcp_socket: str
    control_socket: str
    started_at: float
    daemon: bool = False
    version: str = "unknown"


@attrs.frozen(kw_only=True)
class ClientView:
    """One connected MCP client, as status shows it.

    Attributes:
        id: The connection's id, e.g. "stdio-1", "socket-3".
        kind: "stdio" or "socket".
        name: The `clientInfo.name` it gave at initialize, if any.
        connected_at: When it connected (epoch seconds).
        profile: The profile serving it, or None for the settings' view.
        exposure: How its tools are listed ("all" or "search").
        list_tokens: About how many tokens its tools/list answer takes.
        roots: What it reported of its roots (`ClientRoots.document`, roots.py).
    """

    id: str
    kind: str
    name: str | None
    connected_at: float
    profile: str | None = None
    exposure: str = "all"
    list_tokens: int = 0
    roots: Mapping[str, Any] | None = None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def backend_report(handle: BackendHandle, stats: CallStats, *, now: float, clock: float) -> dict[str, Any]:
    """One backend's status entry.

    Args:
        handle: The backend.
        stats: The listener's call latencies.
        now: The wall clock (epoch seconds), for uptime.
        clock: trio's clock, for the time to the next restart.
    """
    status = handle.status
    uptime = now - status.ready_since if status.ready_since is not None else None
    pending = status.next_restart_at is not None and status.state.value in ("restarting", "starting")
    next_restart = status.next_restart_at - clock if pending and status.next_restart_at is not None else None
    return {
        "name": handle.name,
        "state": status.state.value,
        "state_since": round(status.state_since, 3),
        "transport": status.transport,
        "pid": status.pid,
        "uptime_s": _round(uptime),
        "restarts": status.restarts,
        "next_restart_in_s": _round(max(0.0, next_restart) if next_restart is not None else None, 2),
        "last_exit": status.last_exit,
        "last_error": status.last_error,
        "tools": status.tools,
        "resources": status.resources,
        "prompts": status.prompts,
        "in_flight": status.in_flight,
        "calls_total": status.calls_total,
        "idle_since": _round(status.idle_since, 3),
        "dormant_since": _round(dormant_since(status), 3),
        "latency_ms": {"median": stats.median(handle.name), "samples": stats.samples(handle.name)},
        "stderr_tail": list(status.stderr_tail[-STDERR_LINES:]),
    }


def instance_report(
    *,
    info: InstanceInfo,
    config: ResolvedConfig,
    fingerprint: str,
    directory: Mapping[str, BackendHandle],
    stats: CallStats,
    clients: Sequence[ClientView],
    reload_error: str | None,
    now: float,
    clock: float,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """The whole status document of one instance (`assernctl status --json`)."""
    invalid: dict[str, list[dict[str, str]]] = {}
    for name, (server, why) in (catalog.schema_problems() if catalog is not None else {}).items():
        invalid.setdefault(server, []).append({"tool": name, "problem": why})
    backends = [backend_report(handle, stats, now=now, clock=clock) for handle in directory.values()]
    for backend in backends:
        backend["invalid_schemas"] = invalid.get(backend["name"], [])
    return {
        "pid": info.pid,
        "slot": info.slot,
        "project": config.project,
        "version": info.version,
        "daemon": info.daemon,
        "fingerprint": fingerprint,
        "sockets": {"mcp": info.mcp_socket, "control": info.control_socket},
        "config_files": [str(path) for path in config.files],
        "started_at": round(info.started_at, 3),
        "uptime_s": _round(now - info.started_at),
        "reload_error": reload_error,
        "trust": config.trust.document(),
        "clients": [
            {
                "id": client.id,
                "kind": client.kind,
                "name": client.name,
                "connected_s": _round(now - client.connected_at),
                "profile": client.profile,
                "exposure": client.exposure,
                "list_tokens": client.list_tokens,
                "roots": dict(client.roots) if client.roots is not None else None,
            }
            for client in clients
        ],
        "backends": backends,
        "recent_calls": stats.recent_calls(),
    }


def tool_rows(catalog: Catalog) -> list[dict[str, str]]:
    """The aggregated tools as `assern list` prints them: name, server, description.

    A grouped view shows what it lists: each grouped tool with its actions, and the
    tools no group takes.
    """
    rows = []
    routes = list(catalog.tools.values())
    if catalog.exposure == "grouped":
        for group in catalog.groups.values():
            servers = ", ".join(dict.fromkeys(action.server for action in group.actions.values()))
            actions = ", ".join(group.actions)
            rows.append({"name": group.name, "server": servers, "description": f"actions: {actions}"})
        listed = set(catalog.listed_names)
        routes = [route for route in routes if route.name in listed]
    for route in routes:
        text = (route.definition.description or "").strip()
        first = text.splitlines()[0] if text else ""
        rows.append({"name": route.name, "server": route.server, "description": first})
    return rows


def problems(handles: Iterable[BackendHandle]) -> list[str]:
    """One line per backend that is neither ready nor waiting for its first use."""
    return [
        f"server '{h.name}' is {h.status.state.value}: "
        + (h.status.last_error or h.status.last_exit or "not ready")
        for h in handles
        if h.status.state.value not in ("ready", "lazy", "dormant")
    ]
