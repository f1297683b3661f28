"""The status page's HTML, rendered from what `status` answers and the log's last lines.

Pure: `sections` turns a status document (actors/listener/report.py, the document of
`assernctl status --json`), the log tail and the clock into one HTML fragment per part
of the page; `document` wraps them into the whole page. The page a browser loads
without JavaScript and the fragments the event stream sends come from the same
functions, so both show the same. Every field of the document shows: the known ones
in their columns, anything else (a field added later) in a backend's "more" details,
an instance fact, or a table of its own. Every value is escaped.
"""

from __future__ import annotations

import html
import json
import time
from typing import TYPE_CHECKING, Any

from assern.actors.backend.status import doctor_id
from assern.actors.listener.context_index import progress_line

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

#: The page's parts, in order: (id, heading).
PARTS = (
    ("instance", "Instance"),
    ("backends", "Backends"),
    ("sessions", "Sessions"),
    ("calls", "Recent calls"),
    ("context", "Context indexes"),
    ("more", "More"),
    ("logs", "Log"),
)
#: The levels the log filter offers (and accepts), lowest first.
LEVELS = ("debug", "info", "warning", "error", "critical")
#: Top-level fields shown by a part of their own (the rest are instance facts or "more").
_LISTS = ("backends", "clients", "sessions", "recent_calls")
#: A backend's fields with a column of their own, and their headings.
_BACKEND_COLUMNS = (
    ("name", "backend"),
    ("state", "state"),
    ("state_since", "since"),
    ("pid", "pid"),
    ("restarts", "restarts"),
    ("last_exit", "last exit"),
    ("next_restart_in_s", "next retry"),
    ("tools", "tools"),
    ("latency_ms", "latency"),
    ("last_error", "last error"),
)
#: A session's columns (the client's name, else its connection id).
_SESSION_COLUMNS = (("client", "client"), ("kind", "via"), ("project", "project"), ("since", "since"))


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def age(seconds: float) -> str:
    """A duration for people: 4 s, 12 min, 3 h, 2 d."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def clock(epoch: float) -> str:
    """A wall-clock time of the day (UTC), as the log writes it."""
    return time.strftime("%H:%M:%S", time.gmtime(epoch))


def text(value: Any) -> str:
    """Any JSON value, in words (escaped)."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _e(f"{value:g}")
    if isinstance(value, list) and all(not isinstance(item, dict | list) for item in value):
        return "<br>".join(_e(item) for item in value)
    if isinstance(value, dict):
        return _details(value)
    if isinstance(value, dict | list):
        return f"<code>{_e(json.dumps(value, default=str, separators=(', ', ': ')))}</code>"
    return _e(value)


def _field(key: str, value: Any) -> str:
    """A field's value in words: a time (`…_at`, `…_since` in epoch seconds) as a date."""
    if key.endswith(("_at", "_since")) and isinstance(value, int | float) and not isinstance(value, bool):
        return _e(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value)))
    return text(value)


def _details(fields: Mapping[str, Any]) -> str:
    """Fields as a definition list."""
    rows = "".join(f"<dt>{_e(key)}</dt><dd>{_field(key, value)}</dd>" for key, value in fields.items())
    return f"<dl>{rows}</dl>" if rows else ""


def _table(name: str, heads: Sequence[str], rows: Iterable[str], empty: str) -> str:
    body = "".join(rows)
    if not body:
        return f'<p class="empty">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in heads)
    return f'<table class="{_e(name)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _generic_table(name: str, items: Sequence[Any], empty: str) -> str:
    """Rows of any objects: one column per key any of them has."""
    keys = list(dict.fromkeys(k for item in items if isinstance(item, dict) for k in item))
    if not keys:
        return _table(name, ["value"], (f"<tr><td>{text(item)}</td></tr>" for item in items), empty)
    rows = (
        "<tr>" + "".join(f"<td>{_field(k, item.get(k))}</td>" for k in keys) + "</tr>"
        for item in items
        if isinstance(item, dict)
    )
    return _table(name, keys, rows, empty)


# --------------------------------------------------------------------- parts


def instance_part(doc: Mapping[str, Any]) -> str:
    """The instance's facts: every top-level field that is not a list of its own."""
    facts: dict[str, Any] = {}
    if "version" in doc:
        facts["version"] = doc["version"]
    if isinstance(doc.get("uptime_s"), int | float):
        facts["uptime"] = age(doc["uptime_s"])
    for key, value in doc.items():
        if key in _LISTS or key in ("version", "uptime_s") or _is_table(value):
            continue
        facts[key] = value
    return _details(facts)


def _is_table(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(item, dict) for item in value)


def finding(backend: Mapping[str, Any]) -> str | None:
    """The id of `assernctl doctor`'s finding for one backend's status entry, if any (the
    doctor's own rule, so the page, the log and the doctor name a problem alike)."""
    restarts, tools = backend.get("restarts"), backend.get("tools")
    return doctor_id(
        str(backend.get("state")),
        restarts=restarts if isinstance(restarts, int) else 0,
        tools=tools if isinstance(tools, int) else -1,  # not said: not "no tools"
    )


def _latency(value: Any) -> str:
    if isinstance(value, dict) and value.get("median") is not None:
        return _e(f"{value['median']:g} ms (of {value.get('samples', 0)})")
    return "—"


def _backend_cell(key: str, backend: Mapping[str, Any], now: float) -> str:
    value = backend.get(key)
    if key == "state":
        return f'<span class="state state-{_e(value)}">{_e(value)}</span>'
    if key == "state_since" and isinstance(value, int | float):
        return f"{_e(age(now - value))} ago"
    if key == "next_restart_in_s" and isinstance(value, int | float):
        return f"in {_e(f'{value:g}')} s"
    if key == "latency_ms":
        return _latency(value)
    if key == "last_error":
        found = finding(backend)
        badge = f'<code class="doctor-id">{_e(found)}</code> ' if found else ""
        return badge + text(value)
    return text(value)


def backends_part(doc: Mapping[str, Any], now: float) -> str:
    """One row per backend; fields without a column go in the row's details."""
    shown = {key for key, _ in _BACKEND_COLUMNS} | {"context"}
    rows = []
    for backend in doc.get("backends") or ():
        name = str(backend.get("name", ""))
        cells = "".join(
            f'<td class="{_e(key)}">{_backend_cell(key, backend, now)}</td>' for key, _ in _BACKEND_COLUMNS
        )
        more = {k: v for k, v in backend.items() if k not in shown}
        found = finding(backend) or ""
        rows.append(
            f'<tr id="backend-{_e(name)}" data-state="{_e(backend.get("state", ""))}" '
            f'data-doctor="{_e(found)}">{cells}'
            f'<td class="more"><details><summary>more</summary>{_details(more)}</details></td></tr>'
        )
    heads = [head for _, head in _BACKEND_COLUMNS] + ["more"]
    return _table("backends", heads, rows, "No backend is configured.")


def sessions_part(doc: Mapping[str, Any]) -> str:
    """The connected clients (`sessions` when status gives them, else `clients`)."""
    items = doc.get("sessions")
    if not isinstance(items, list):
        items = doc.get("clients") or []
    rows = []
    for item in items:
        if not isinstance(item, dict):
            continue
        since = item.get("connected_s")
        known = {
            "client": item.get("client") or item.get("name") or item.get("id"),
            "kind": item.get("kind"),
            "project": item.get("project", doc.get("project")),
            "since": f"{age(since)} ago" if isinstance(since, int | float) else item.get("since"),
        }
        skip = {"client", "name", "kind", "project", "connected_s", "since"}
        more = {k: v for k, v in item.items() if k not in skip}
        cells = "".join(f"<td>{text(known[key])}</td>" for key, _ in _SESSION_COLUMNS)
        rows.append(f"<tr>{cells}<td>{_details(more)}</td></tr>")
    heads = [head for _, head in _SESSION_COLUMNS] + ["more"]
    return _table("sessions", heads, rows, "No client is connected.")


def calls_part(doc: Mapping[str, Any]) -> str:
    """The last calls, newest first (never their arguments: status has none)."""
    rows = []
    for call in doc.get("recent_calls") or ():
        at = call.get("at")
        when = clock(at) if isinstance(at, int | float) else "—"
        duration = call.get("duration_ms")
        took = f"{duration:g} ms" if isinstance(duration, int | float) else "—"
        outcome = str(call.get("outcome", ""))
        rows.append(
            f"<tr><td>{_e(when)}</td><td>{text(call.get('client'))}</td>"
            f"<td>{text(call.get('server'))}</td><td>{text(call.get('tool'))}</td><td>{_e(took)}</td>"
            f'<td><span class="outcome outcome-{_e(outcome)}">{_e(outcome)}</span></td></tr>'
        )
    heads = ["time (UTC)", "client", "server", "tool", "duration", "outcome"]
    return _table("calls", heads, rows, "No call since the instance started.")


def context_part(doc: Mapping[str, Any], now: float) -> str:
    """Each context server's index: files, pending, where it stands."""
    rows = []
    for backend in doc.get("backends") or ():
        index = backend.get("context")
        if not isinstance(index, dict):
            continue
        rows.append(
            f"<tr><td>{text(backend.get('name'))}</td><td>{text(index.get('root'))}</td>"
            f"<td>{text(index.get('files'))}</td><td>{text(index.get('pending'))}</td>"
            f"<td>{_e(progress_line(index, now=now))}</td></tr>"
        )
    heads = ["server", "root", "files", "pending", "last update"]
    return _table("context", heads, rows, "No context server is configured.")


def more_part(doc: Mapping[str, Any]) -> str:
    """Any other list of objects the status gives, as a table of its own."""
    parts = [
        f"<h3>{_e(key)}</h3>{_generic_table(key, value, 'none')}"
        for key, value in doc.items()
        if key not in _LISTS and _is_table(value)
    ]
    return "".join(parts) or '<p class="empty">Nothing else.</p>'


def logs_part(events: Sequence[Mapping[str, Any]]) -> str:
    """The log's last lines (given oldest first), newest first."""
    fixed = ("ts", "level", "event", "server")
    rows = []
    for event in reversed(events):
        level = str(event.get("level", ""))
        ts = str(event.get("ts", ""))
        rest = " ".join(
            f"{key}={json.dumps(value, default=str, ensure_ascii=False)}"
            for key, value in event.items()
            if key not in fixed
        )
        rows.append(
            f'<tr class="level-{_e(level)}"><td>{_e(ts.partition("T")[2][:12] or ts)}</td>'
            f"<td>{_e(level)}</td><td>{_e(event.get('event', ''))}</td>"
            f"<td>{text(event.get('server'))}</td><td><code>{_e(rest)}</code></td></tr>"
        )
    heads = ["time (UTC)", "level", "event", "server", "details"]
    return _table("logs", heads, rows, "No line at this level.")


def sections(doc: Mapping[str, Any], events: Sequence[Mapping[str, Any]], now: float) -> dict[str, str]:
    """Each part's HTML by its id (`PARTS`)."""
    return {
        "instance": instance_part(doc),
        "backends": backends_part(doc, now),
        "sessions": sessions_part(doc),
        "calls": calls_part(doc),
        "context": context_part(doc, now),
        "more": more_part(doc),
        "logs": logs_part(events),
    }


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """The parts of `after` that differ from `before`."""
    return {key: value for key, value in after.items() if before.get(key) != value}


def _level_form(level: str | None) -> str:
    options = "".join(
        f'<option value="{name}"{" selected" if name == (level or "info") else ""}>{name} and above</option>'
        for name in LEVELS
    )
    return (
        '<form class="filter" method="get" action="/"><label>level '
        f'<select name="level">{options}</select></label> <button type="submit">show</button></form>'
    )


def document(parts: Mapping[str, str], *, level: str | None, now: float, title: str) -> str:
    """The whole page: every part as it is now, the live script and the style."""
    body = []
    for key, heading in PARTS:
        form = _level_form(level) if key == "logs" else ""
        part = f'<div id="{key}">{parts.get(key, "")}</div>'
        body.append(f"<section><h2>{_e(heading)}</h2>{form}{part}</section>")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_e(title)}</title><link rel="icon" href="/favicon.svg">'
        '<link rel="stylesheet" href="/page.css">'
        '<script src="/page.js" defer></script></head><body>'
        f'<header><h1>{_e(title)}</h1><p id="live" class="live off">as of {_e(clock(now))} UTC; '
        "reload the page for newer figures</p></header>"
        f"<main>{''.join(body)}</main></body></html>"
    )
