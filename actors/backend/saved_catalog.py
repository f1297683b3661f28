"""Each backend's listing kept on disk, so a client's first lists are answered at once.

A client's first `tools/list` used to wait for every backend to start (a second or more
for `npx` servers), and some clients treat a server whose list is pending as absent for
their whole first turn. A backend's tools, resources, resource templates, prompts,
capabilities and instructions are therefore saved each time it lists them, keyed by
what reaches its process (`backend_key`): the next start lists them from the saved file
while the backend starts, and a dormant backend (stopped after `idle_timeout`) keeps
them listed. When the live listing differs, the catalog changes and clients get
`list_changed`; when it is the same, they get nothing.

Files: `$ASSERN_HOME/cache/catalogs/KEY.json` (0600), one per backend key. A file that
is corrupt, of another format or written by another assern version is ignored (logged
once as `saved_catalog_ignored`) and rewritten when the backend next lists.

What is saved is what the backend reported, never the configuration's view of it
(`allowed`, rules): the listing is rebuilt with the current spec's view on load.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

import mcp_types as types
import structlog
from pydantic import ValidationError

from assern.actors.identity import __version__
from assern.actors.router.catalog import BackendListing

if TYPE_CHECKING:
    from pathlib import Path

    from assern.actors.config.spec import ServerSpec

log = structlog.get_logger()

#: The file format; a file of another format is ignored.
FORMAT = 1
#: Hex digits of the key in a file name.
KEY_CHARS = 32


def catalog_folder(assern_home: Path) -> Path:
    """Where the saved listings of the backends under `assern_home` live."""
    return assern_home / "cache" / "catalogs"


def backend_key(spec: ServerSpec) -> str:
    """What reaches a backend's process, hashed: its transport, command, args, the
    environment values the configuration gives it, working folder, URL, headers and
    protocol. Two servers with the same key are the same backend, whatever their names
    and views (`allowed`, rules, timeouts). The values (secrets among them) are only
    ever hashed."""
    env = {key: spec.env[key] for key in sorted(spec.env_keys_from) if key in spec.env}
    shape = {
        "transport": spec.transport,
        "command": spec.command,
        "args": list(spec.args),
        "env": env,
        "cwd": spec.cwd,
        "url": spec.url,
        "headers": dict(sorted(spec.headers.items())),
        "protocol": spec.protocol,
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def _dump(models: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [m.model_dump(by_alias=True, mode="json", exclude_none=True) for m in models]


def encode_listing(listing: BackendListing) -> dict[str, Any]:
    """The saved form of what a backend reported (its view's fields left out)."""
    caps = listing.capabilities
    return {
        "format": FORMAT,
        "assern": __version__,
        "tools": _dump(listing.tools),
        "resources": _dump(listing.resources),
        "templates": _dump(listing.templates),
        "prompts": _dump(listing.prompts),
        "capabilities": caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps else None,
        "instructions": listing.instructions,
    }


class NotSaved(ValueError):
    """A saved file that cannot serve: why, in words."""


def decode_listing(doc: object, spec: ServerSpec) -> BackendListing:
    """The listing a saved document holds, with `spec`'s view (name, allowed, rules).

    Raises:
        NotSaved: the document is not a saved listing of this format and version.
    """
    if not isinstance(doc, dict):
        raise NotSaved("not a JSON object")
    if doc.get("format") != FORMAT:
        raise NotSaved(f"format {doc.get('format')!r}, expected {FORMAT}")
    if doc.get("assern") != __version__:
        raise NotSaved(f"written by assern {doc.get('assern')!r}, this is {__version__}")
    try:
        caps = doc.get("capabilities")
        instructions = doc.get("instructions")
        if not isinstance(instructions, str | None):
            raise NotSaved("instructions is not a string")
        return BackendListing(
            server=spec.name,
            tools=tuple(types.Tool.model_validate(t) for t in doc["tools"]),
            resources=tuple(types.Resource.model_validate(r) for r in doc["resources"]),
            templates=tuple(types.ResourceTemplate.model_validate(t) for t in doc["templates"]),
            prompts=tuple(types.Prompt.model_validate(p) for p in doc["prompts"]),
            allowed=spec.allowed,
            rules=spec.rules,
            capabilities=types.ServerCapabilities.model_validate(caps) if caps is not None else None,
            instructions=instructions,
        )
    except (KeyError, TypeError, ValidationError) as exc:
        raise NotSaved(f"not a saved listing ({type(exc).__name__})") from None


class CatalogStore:
    """The saved listings under one folder (`$ASSERN_HOME/cache/catalogs`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        #: the text last written or read per key, so an unchanged listing is not rewritten
        self._known: dict[str, str] = {}

    def path(self, key: str) -> Path:
        return self.folder / f"{key[:KEY_CHARS]}.json"

    def load(self, spec: ServerSpec) -> BackendListing | None:
        """The saved listing of `spec`'s backend, or None (none saved, or unusable: logged)."""
        key = backend_key(spec)
        path = self.path(key)
        try:
            text = path.read_bytes().decode()
            listing = decode_listing(json.loads(text), spec)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # NotSaved and UnicodeDecodeError are ValueErrors
            log.warning("saved_catalog_ignored", server=spec.name, file=str(path), reason=str(exc))
            return None
        self._known[key] = text
        return listing

    def save(self, spec: ServerSpec, listing: BackendListing) -> bool:
        """Save `listing` for `spec`'s backend (atomically, 0600); False when it was
        already saved as it is, or could not be written (logged)."""
        key = backend_key(spec)
        text = json.dumps(encode_listing(listing), sort_keys=True, separators=(",", ":"))
        if self._known.get(key) == text:
            return False
        path = self.path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as file:
                file.write(text)
            tmp.replace(path)
        except OSError as exc:
            log.warning("saved_catalog_not_written", server=spec.name, file=str(path), error=str(exc))
            return False
        self._known[key] = text
        return True
