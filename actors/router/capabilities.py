"""What each backend offered the last time it ran, remembered across runs.

A client's `initialize` is answered at once, often before the backends are ready. So
that assern still advertises only what its backends really offer (resource
subscriptions, logging, completions), the router records every ready backend's
capabilities here, keyed by a fingerprint of how it is started; the next run uses them
until the backend is ready again. The file's format and its reading as plain JSON
are in capability_file.py (the front door reads it before the tree is imported).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import mcp_types as types
import structlog
from pydantic import ValidationError

from assern.actors.router.capability_file import fingerprint, read_entries

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from assern.actors.config.spec import ServerSpec

__all__ = ["CapabilityCache", "fingerprint"]

log = structlog.get_logger()


class CapabilityCache:
    """`capabilities.json` under the cache folder: server name -> fingerprint and capabilities."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict[str, object]] = dict(read_entries(path))

    def get(self, spec: ServerSpec) -> types.ServerCapabilities | None:
        entry = self._entries.get(spec.name)
        if entry is None or entry.get("fingerprint") != fingerprint(spec):
            return None
        try:
            return types.ServerCapabilities.model_validate(entry.get("capabilities"))
        except ValidationError:
            return None

    def remember(
        self, specs: Mapping[str, ServerSpec], ready: Mapping[str, types.ServerCapabilities]
    ) -> None:
        """Record the ready backends' capabilities; writes only when something changed."""
        changed = False
        for name, caps in ready.items():
            spec = specs.get(name)
            if spec is None:
                continue
            entry: dict[str, object] = {
                "fingerprint": fingerprint(spec),
                "capabilities": caps.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
            if self._entries.get(name) != entry:
                self._entries[name] = entry
                changed = True
        if not changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._entries, indent=1))
            tmp.replace(self.path)
        except OSError as exc:
            log.warning("capability_cache_not_written", error=str(exc))
