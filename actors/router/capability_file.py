"""The capability cache's file, read as plain JSON: no pydantic models.

`capabilities.json` (under `$ASSERN_HOME/cache/`) maps each backend's name to the
fingerprint of how it is started and the capabilities it offered when it last ran.
The router writes it through `CapabilityCache` (capabilities.py); the front door
(app/front_door.py) reads it here as raw dicts to answer a client's
`initialize` before the tree (and pydantic) is even imported. Both key entries with `fingerprint`.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from assern.actors.config.spec import ServerSpec


def cache_file(assern_home: Path) -> Path:
    """Where the capability cache of the instances under `assern_home` lives."""
    return assern_home / "cache" / "capabilities.json"


def fingerprint(spec: ServerSpec) -> str:
    """How the backend is started (never its env or headers: those may hold secrets)."""
    shape = [spec.transport, spec.command, list(spec.args), spec.cwd, spec.url, spec.protocol]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]


def read_entries(path: Path) -> dict[str, dict[str, Any]]:
    """The file's entries by server name; an absent or corrupt file has none."""
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(v, dict)}


#: The `ServerCapabilities` fields whose value is an object (or null) in a valid entry.
_OBJECT_FIELDS = (
    "experimental",
    "logging",
    "prompts",
    "resources",
    "tools",
    "completions",
    "extensions",
    "tasks",
)


def _well_formed(caps: object) -> bool:
    """Whether `caps` has the shape of a `ServerCapabilities` (an entry the session would
    also accept; the router only ever writes such entries)."""
    if not isinstance(caps, dict):
        return False
    if any(not isinstance(caps.get(key), dict | None) for key in _OBJECT_FIELDS):
        return False
    for key in ("prompts", "resources", "tools"):
        section = caps.get(key) or {}
        if any(not isinstance(section.get(flag), bool | None) for flag in ("listChanged", "subscribe")):
            return False
    return True


def remembered_raw(path: Path, servers: Mapping[str, ServerSpec]) -> dict[str, dict[str, Any]]:
    """The remembered capabilities (raw JSON objects) of the configured servers whose
    entry was recorded for the way they are started now; malformed entries are skipped."""
    entries = read_entries(path)
    found = {}
    for name, spec in servers.items():
        entry = entries.get(spec.name)
        if entry is None or entry.get("fingerprint") != fingerprint(spec):
            continue
        caps = entry.get("capabilities")
        if isinstance(caps, dict) and _well_formed(caps):
            found[name] = caps
    return found
