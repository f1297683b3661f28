"""The readable forms of what `assernctl` prints: tables, durations, an instance's status."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from assern.actors.backend.status import doctor_id
from assern.actors.listener.context_index import progress_line
from assern.actors.listener.roots_check import root_folder
from assern.app.no_servers import DOCTOR_ID as NO_SERVERS

if TYPE_CHECKING:
    from collections.abc import Sequence


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return lines


def duration(seconds: float | None) -> str:
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


def clock_time(epoch: float, now: float) -> str:
    """A moment as the local clock shows it: `12:03` today, with its date when older."""
    shape = "%H:%M" if now - epoch < 86400 else "%Y-%m-%d %H:%M"
    return time.strftime(shape, time.localtime(epoch))


def activity(backend: Mapping[str, Any], now: float) -> str:
    """What a backend did last, in words: "dormant since 12:03", "busy", "idle 4m02s"."""
    asleep = backend.get("dormant_since")
    if backend.get("state") == "dormant" and asleep is not None:
        return f"dormant since {clock_time(asleep, now)}"
    if backend.get("in_flight"):
        return "busy"
    idle = backend.get("idle_since")
    if idle is not None and backend.get("state") == "ready":
        return f"idle {duration(max(0.0, now - idle))}"
    return "-"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _short(text: str | None, width: int = 60) -> str:
    if not text:
        return "-"
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def roots_words(roots: Mapping[str, Any] | None) -> str | None:
    """What a session's client reported of its roots, in words (None: it offers none)."""
    if not roots or not roots.get("supported"):
        return None
    if roots.get("error"):
        return f"roots unknown ({roots['error']})"
    listed = roots.get("roots")
    if listed is None:
        return "roots asked"
    if not listed:
        return "roots none"
    return "roots " + ", ".join(str(root_folder(uri) or uri) for uri in listed)


def client_line(client: Mapping[str, Any]) -> str:
    """One connected client: its id, name, profile, what its tool list costs, its roots."""
    facts = [client["name"]] if client.get("name") else []
    facts.append(f"profile {client['profile']}" if client.get("profile") else "no profile")
    facts.append(f"{client.get('exposure', 'all')} exposure")
    facts.append(f"tools/list ~{client.get('list_tokens', 0)} tokens")
    roots = roots_words(client.get("roots"))
    if roots is not None:
        facts.append(roots)
    return f"{client['id']}: {', '.join(facts)}"


def roots_warning(entry: Mapping[str, Any]) -> str | None:
    """`! ID: WARNING` when a session's folder is outside its client's roots."""
    warning = (entry.get("roots") or {}).get("warning")
    return f"! {entry['id']}: {warning}" if warning else None


def context_line(index: Mapping[str, Any], *, running: bool) -> str:
    """A context server's index in one line: files, pending, watcher, where it stands."""
    if not index.get("indexed"):
        return "index none yet"
    if "error" in index:
        return f"index {progress_line(index)}"
    watcher = index.get("watcher", "-") if running else "not running"
    facts = [f"{index.get('files', 0)} files", f"{index.get('chunks', 0)} chunks"]
    facts += [f"{index.get('pending', 0)} pending", f"watcher {watcher}"]
    vectors = index.get("vectors")
    if running and isinstance(vectors, dict):  # the semantic extra's (context/vectors.py)
        waiting = vectors.get("pending_files", 0)
        if vectors.get("state") in ("loading", "waiting") or waiting:
            facts.append(f"vectors {vectors.get('state')}, {waiting} files by words alone")
        else:
            facts.append("vectors current")
    where = progress_line(index) if running else "as the last run left it"
    return f"index {', '.join(facts)}; {where}"


def render_status(doc: Mapping[str, Any]) -> list[str]:
    """The readable form of one instance's status document."""
    project = doc.get("project") or "(no project)"
    head = f"assern {doc['slot']}: pid {doc['pid']}, {project}, up {duration(doc.get('uptime_s'))}"
    if doc.get("daemon"):
        head += ", daemon"
    lines = [head]
    lines.append(f"  socket   {doc['sockets']['mcp']}")
    lines.append(f"  config   {', '.join(doc.get('config_files') or []) or '(no file)'}")
    clients = doc.get("clients") or []
    lines.append(f"  clients  {len(clients)}")
    for client in clients:
        lines.append(f"    {client_line(client)}")
        if (warning := roots_warning(client)) is not None:
            lines.append(f"    {warning}")
    lines.extend(f"  ! {line}" for line in (doc.get("trust") or {}).get("lines") or ())
    if doc.get("reload_error"):
        lines.append("  ! the last reload failed; the configuration before it stays in force:")
        lines += [f"    {line}" for line in str(doc["reload_error"]).splitlines()]
    backends = doc.get("backends") or []
    if not backends:
        lines.append(f"  no servers are configured (doctor: {NO_SERVERS}): see `assernctl doctor`")
        return lines
    now = time.time()
    rows = [
        [
            b["name"],
            b["state"],
            activity(b, now),
            _cell(b.get("pid")),
            duration(b.get("uptime_s")),
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
    headers = ["SERVER", "STATE", "ACTIVITY", "PID", "UPTIME", "RESTARTS", "TOOLS", "RES", "PROMPTS"]
    headers += ["TRANSPORT", "IN FLIGHT", "CALLS", "MEDIAN MS"]
    lines.append("")
    lines += ["  " + line for line in table(rows, [*headers, "LAST EXIT / ERROR"])]
    for b in backends:
        problem = doctor_id(b["state"], restarts=b.get("restarts", 0), tools=b.get("tools", 0))
        if problem is not None:
            lines.append(f"  {b['name']}: doctor: {problem}, see `assernctl doctor --server {b['name']}`")
        if b.get("context") is not None:
            lines.append(f"  {b['name']}: {context_line(b['context'], running=b['state'] == 'ready')}")
        if b.get("next_restart_in_s") is not None:
            lines.append(f"  {b['name']}: next restart in {b['next_restart_in_s']:.1f} s")
        for invalid in b.get("invalid_schemas") or ():
            lines.append(
                f"  {b['name']}: {invalid['tool']} has an invalid schema, served unvalidated: "
                f"{_short(invalid['problem'])}"
            )
        if b["state"] in ("failed", "restarting") and b.get("stderr_tail"):
            lines.append(f"  {b['name']}: last stderr lines:")
            lines += [f"    {line}" for line in b["stderr_tail"][-5:]]
    return lines


def identity_lines(daemon: Mapping[str, Any], doc: Mapping[str, Any]) -> list[str]:
    """The daemon's build (and a hint when this install is another build) and whether its
    runtime file stands for it."""
    build = daemon.get("build")
    lines = [f"  build    {build or 'unknown'} (protocol {daemon.get('protocol', '-')})"]
    ours = doc.get("this_build")
    if ours is not None and build != ours:
        lines.append(
            f"  ! the running daemon is build {build or 'unknown'}; this install is build {ours} "
            "(its clients run the daemon's code until it stops: `assernctl shutdown`)"
        )
    runtime = doc.get("runtime_file")
    if runtime is not None and runtime.get("verified"):
        lines.append(f"  runtime  {runtime['path']}")
    elif runtime is not None:
        lines.append(f"  ! runtime file: {runtime.get('reason')}")
    return lines


def generation_lines(daemon: Mapping[str, Any]) -> list[str]:
    """The daemon's generation, the one it superseded (still draining, and its calls), and
    whether a successor supersedes this one."""
    lines = []
    generation = daemon.get("generation")
    predecessor = daemon.get("predecessor")
    if isinstance(generation, int) and (generation > 1 or predecessor):
        line = f"  generation {generation}"
        if isinstance(predecessor, Mapping):
            line += f"; last restart: {predecessor.get('reason') or '-'}"
            if predecessor.get("draining"):
                calls = predecessor.get("calls_in_flight")
                still = f"{calls} call(s) still in flight" if isinstance(calls, int) else "calls unknown"
                line += (
                    f"; generation {predecessor.get('generation')} (pid {predecessor.get('pid')}, "
                    f"build {predecessor.get('build')}) draining: {still}"
                )
        lines.append(line)
    lines += warmed_lines(daemon.get("warmed"))
    superseded = daemon.get("superseded")
    if isinstance(superseded, Mapping):
        lines.append(
            f"  superseded by build {superseded.get('build')} (pid {superseded.get('pid')}): draining, "
            f"{daemon.get('calls_in_flight', 0)} call(s) in flight, at most {superseded.get('deadline_s')} s"
        )
    return lines


def warmed_lines(warmed: object) -> list[str]:
    """What a successor warmed before it took the sockets, and what was not warm."""
    if not isinstance(warmed, Mapping):
        return []
    lines = [
        f"  warmed before the takeover: {warmed.get('sessions')} session(s)' views ({warmed.get('views')}), "
        f"{warmed.get('backends')} backend(s) ready, in {warmed.get('warm_s')} s"
    ]
    lines.extend(
        f"    not warm: {entry.get('server')} of {entry.get('view')} "
        f"({entry.get('state')}: {entry.get('why')})"
        for entry in warmed.get("not_warm") or ()
        if isinstance(entry, Mapping)
    )
    return lines


def render_daemon(doc: Mapping[str, Any]) -> list[str]:
    """The readable form of the workstation daemon's own status: itself, its sessions,
    its views (one per configuration in use) and the backends they share."""
    daemon = doc["daemon"]
    lines = [
        f"assern daemon: pid {daemon['pid']}, version {daemon['version']}, "
        f"up {duration(daemon.get('uptime_s'))}, started by {daemon.get('started_by', '-')}",
        f"  socket   {daemon['sockets']['mcp']}",
    ]
    lines += identity_lines(daemon, doc)
    lines += generation_lines(daemon)
    sessions = doc.get("sessions") or []
    lines.append(f"  sessions {len(sessions)}")
    if sessions:
        rows = [
            [
                s["id"],
                " ".join(filter(None, [s.get("client"), s.get("client_version")])) or "-",
                s.get("project") or "-",
                s.get("cwd", "-"),
                duration(s.get("connected_s")),
            ]
            for s in sessions
        ]
        lines += ["    " + line for line in table(rows, ["SESSION", "CLIENT", "PROJECT", "FOLDER", "SINCE"])]
        for session in sessions:
            if (roots := roots_words(session.get("roots"))) is not None:
                lines.append(f"    {session['id']}: {roots}")
            if (warning := roots_warning(session)) is not None:
                lines.append(f"    {warning}")
    views = doc.get("views") or []
    lines.append(f"  views    {len(views)} (one per configuration in use)")
    for view in views:
        servers = ", ".join(view.get("servers") or []) or "none"
        lines.append(f"    {view['label']}: {view.get('sessions', 0)} session(s); servers {servers}")
    backends = doc.get("backends") or []
    if backends:
        now = time.time()
        rows = [
            [
                b["name"],
                b["key"],
                b["state"],
                activity(b, now),
                _cell(b.get("pid")),
                ", ".join(sorted(b.get("views") or {})) or "-",
                str(b.get("sessions", 0)),
                str(b.get("tools", 0)),
                _short(b.get("last_error")),
            ]
            for b in backends
        ]
        headers = ["BACKEND", "KEY", "STATE", "ACTIVITY", "PID", "VIEWS", "SESSIONS", "TOOLS", "LAST ERROR"]
        lines.append("")
        lines += ["  " + line for line in table(rows, headers)]
    return lines
