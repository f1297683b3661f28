"""What `assernctl config show` and `explain` print: plain documents and their text form.

The documents are JSON-ready dicts whose shape docs/configuration.md documents (`--json`); the
human form is rendered from the same document, so both always agree. Env values and
header values are redacted (`ab…(redacted)`) unless the caller asks to reveal them.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from assern.actors.backend.saved_catalog import backend_key
from assern.actors.gate.rules import combine, validate_mode
from assern.supervisor.io.logs import redact

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from assern.actors.config.spec import CallRules, Provenance, ResolvedConfig, ServerSpec, Settings

#: The layer word of an env key that no config layer set (it came from the system env).
SYSTEM_LAYER = "system-env"


def shown(value: str, *, reveal: bool) -> str:
    """A secret as output shows it: as it is when revealed, else `ab…(redacted)`."""
    return value if reveal else redact(value)


def env_entries(spec: ServerSpec, *, reveal: bool, system: bool) -> dict[str, dict[str, Any]]:
    """A server's process env, key by key, with the layer and file each value came from.

    Args:
        spec: The resolved server.
        reveal: Show the values themselves instead of redacting them.
        system: Include the keys that come from the system environment (layer
            "system-env", file None) after the configured ones.

    Returns:
        `{KEY: {"value", "layer", "file"}}`: the keys a config layer or .env file set, in
        resolution order, then (with `system`) the system keys sorted by name.
    """
    out: dict[str, dict[str, Any]] = {}
    for key, where in spec.env_keys_from.items():
        if key in spec.env:
            out[key] = _entry(spec.env[key], where, reveal=reveal)
    if system:
        for key in sorted(set(spec.env) - set(out)):
            out[key] = {"value": shown(spec.env[key], reveal=reveal), "layer": SYSTEM_LAYER, "file": None}
    return out


def _entry(value: str, where: Provenance, *, reveal: bool) -> dict[str, Any]:
    return {"value": shown(value, reveal=reveal), "layer": where.layer, "file": where.file}


def server_document(spec: ServerSpec, *, reveal: bool, system_env: bool) -> dict[str, Any]:
    """One server as `show` and `explain` print it (see docs/configuration.md, "assernctl config")."""
    policy = spec.policy
    return {
        "transport": spec.transport,
        "command": spec.command,
        "args": list(spec.args),
        "cwd": spec.cwd,
        "url": spec.url,
        "env": env_entries(spec, reveal=reveal, system=system_env),
        "headers": {key: shown(value, reveal=reveal) for key, value in spec.headers.items()},
        "allowed": list(spec.allowed) if spec.allowed is not None else None,
        "start": spec.start,
        "timeout": spec.timeout,
        "startup_timeout": spec.startup_timeout,
        "idle_timeout": spec.idle_timeout,
        "keep_alive": spec.keep_alive,
        "protocol": spec.protocol,
        "restart": {
            "restart": policy.restart.value,
            "max_restarts": policy.max_restarts,
            "restart_window": policy.restart_window,
            "backoff_initial": policy.backoff_initial,
            "backoff_max": policy.backoff_max,
        },
    }


def show_document(config: ResolvedConfig) -> dict[str, Any]:
    """The resolved configuration; each server's env lists only the configured keys."""
    return {
        "project": config.project,
        "files": [str(path) for path in config.files],
        "settings": {
            "naming": config.settings.naming,
            "max_name_length": config.settings.max_name_length,
            "initialize_wait": config.settings.initialize_wait,
            "exposure": config.settings.exposure,
            "pinned": list(config.settings.pinned),
        },
        "servers": {
            name: server_document(spec, reveal=False, system_env=False)
            for name, spec in config.servers.items()
        },
        "warnings": list(config.warnings),
        "trust": config.trust.document(),
    }


def explain_document(config: ResolvedConfig, spec: ServerSpec, *, reveal: bool) -> dict[str, Any]:
    """One server's final command, args, cwd and complete env with provenance, and how
    its tools are exposed and called in the settings' view and in each profile's."""
    return {
        "server": spec.name,
        "project": config.project,
        "revealed": reveal,
        **server_document(spec, reveal=reveal, system_env=True),
        "calls": calls_document(config.settings, spec),
        "middleware": middleware_document(config.settings, spec),
        "sharing": sharing_document(spec),
    }


def sharing_document(spec: ServerSpec) -> dict[str, Any]:
    """Whether the workstation daemon shares this server's process with other projects'
    configurations, and why (its backend key: docs/operations.md, "The workstation daemon")."""
    if spec.cwd is None:
        why = (
            "no cwd: it runs in the daemon's folder, so every configuration that starts it "
            "with the same command, args, configured env values, transport, URL and headers "
            "shares one process"
        )
    else:
        why = (
            f"it runs in {spec.cwd}: only configurations that start it there, with the same "
            "command, args, configured env values, transport, URL and headers, share its process"
        )
    return {"key": backend_key(spec)[:8], "shared_across_projects": spec.cwd is None, "why": why}


def middleware_document(settings: Settings, spec: ServerSpec) -> list[dict[str, Any]]:
    """The `[[middleware]]` entries around this server's calls, outermost first (the
    same in every view), each with the tools it takes (empty: all)."""
    return [
        {"name": entry.name, "use": entry.use, "tools": list(entry.tools), "asyncio": entry.asyncio}
        for entry in settings.middleware
        if not entry.servers or any(fnmatch.fnmatchcase(spec.name, glob) for glob in entry.servers)
    ]


def calls_document(settings: Settings, spec: ServerSpec) -> dict[str, dict[str, Any]]:
    """Per view (`settings`, then each profile): the exposure, validation and safety
    rules that apply to this server's tools."""
    found = {"settings": _calls(settings.exposure, combine(settings.rules, spec.rules))}
    for profile in settings.profiles:
        if (profile.servers is not None and spec.name not in profile.servers) or (
            spec.name in profile.exclude_servers
        ):
            found[f"profile {profile.name}"] = {"shown": False}
            continue
        rules = combine(settings.rules, profile.rules, spec.rules)
        found[f"profile {profile.name}"] = _calls(profile.exposure or settings.exposure, rules)
    return found


def _calls(exposure: str, rules: CallRules) -> dict[str, Any]:
    return {
        "shown": True,
        "exposure": exposure,
        "validate": validate_mode(rules, grouped=exposure == "grouped"),
        "deny": list(rules.deny),
        "read_only": rules.read_only,
        "confirm": list(rules.confirm),
    }


# ----------------------------------------------------------------------- text


def render_show(document: Mapping[str, Any]) -> str:
    """The human form of `show_document`."""
    lines = [f"project: {document['project'] or '(none)'}"]
    files = document["files"]
    lines.append("files:" if files else "files: (none: no configuration file was found)")
    lines += [f"  {file}" for file in files]
    settings = document["settings"]
    lines.append(f"settings: naming = {settings['naming']}, max_name_length = {settings['max_name_length']}")
    servers = document["servers"]
    lines.append("")
    lines.append(f"servers ({len(servers)}):" if servers else "servers: (none)")
    for name, server in servers.items():
        lines.append(f"  {name}  [{server['transport']}]")
        lines += [f"    {line}" for line in _server_lines(server)]
    lines += [f"warning: {warning}" for warning in document["warnings"]]
    lines += [f"warning: {line}" for line in document["trust"]["lines"]]
    return "\n".join(lines)


def render_explain(document: Mapping[str, Any]) -> str:
    """The human form of `explain_document`."""
    lines = [
        f"server: {document['server']}",
        f"project: {document['project'] or '(none)'}",
        f"transport: {document['transport']}",
        *_server_lines(document, env=False),
        "",
    ]
    env = document["env"]
    configured = {k: v for k, v in env.items() if v["layer"] != SYSTEM_LAYER}
    system = [k for k, v in env.items() if v["layer"] == SYSTEM_LAYER]
    lines.append(
        f"env ({len(env)} keys: {len(configured)} configured, {len(system)} from the system environment):"
    )
    rows = [
        (key, str(entry["value"]), str(entry["layer"]), str(entry["file"] or "-"))
        for key, entry in env.items()
    ]
    lines += _table(("KEY", "VALUE", "LAYER", "FILE"), rows)
    if not document["revealed"]:
        lines.append("")
        lines.append("values are redacted; --reveal shows them when the output is a terminal")
    lines.append("")
    lines.append("calls (per view):")
    for view, calls in document["calls"].items():
        if not calls["shown"]:
            lines.append(f"  {view}: not shown")
            continue
        rules = [f"exposure {calls['exposure']}", f"validate {calls['validate']}"]
        if calls["deny"]:
            rules.append("deny " + ", ".join(calls["deny"]))
        if calls["read_only"]:
            rules.append("read-only tools only")
        if calls["confirm"]:
            rules.append("confirm " + ", ".join(calls["confirm"]))
        lines.append(f"  {view}: " + "; ".join(rules))
    sharing = document.get("sharing")
    if sharing is not None:
        lines.append("")
        lines.append(f"sharing (backend key {sharing['key']}): {sharing['why']}")
    chain = document["middleware"]
    lines.append("")
    lines.append("middleware (outermost first):" if chain else "middleware: none")
    for entry in chain:
        use = "" if entry["use"] == entry["name"] else f" [{entry['use']}]"
        tools = ", ".join(entry["tools"]) if entry["tools"] else "all tools"
        lines.append(f"  {entry['name']}{use}: {tools}" + (" (asyncio)" if entry["asyncio"] else ""))
    return "\n".join(lines)


def _server_lines(server: Mapping[str, Any], *, env: bool = True) -> list[str]:
    lines: list[str] = []
    if server["command"] is not None:
        lines.append(f"command: {server['command']}")
        lines.append(f"args: {_quoted(server['args'])}" if server["args"] else "args: (none)")
        lines.append(f"cwd: {server['cwd'] or '(inherited from assern)'}")
    if server["url"] is not None:
        lines.append(f"url: {server['url']}")
    for key, value in server["headers"].items():
        lines.append(f"header {key}: {value}")
    if env:
        for key, entry in server["env"].items():
            lines.append(f"env {key} = {entry['value']}  ({entry['layer']}: {entry['file']})")
    if server["allowed"] is not None:
        lines.append(f"allowed: {', '.join(server['allowed']) or '(nothing)'}")
    restart = server["restart"]
    lines.append(
        f"restart: {restart['restart']}, at most {restart['max_restarts']} in "
        f"{restart['restart_window']:g}s; start: {server['start']}; timeout: {server['timeout']:g}s"
    )
    return lines


def _quoted(args: list[str]) -> str:
    return " ".join(
        arg if arg and not any(c.isspace() or c in "'\"" for c in arg) else repr(arg) for arg in args
    )


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
