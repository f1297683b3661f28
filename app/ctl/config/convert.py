"""`assernctl config import`: other config formats converted into assern's TOML.

Two sources: an `mcpServers` JSON file (Claude Desktop, Cursor, Claude Code, cllm-mcp),
and the original Assern layout's `config.yaml` (with the `mcp.json` beside it, which
held its servers) when PyYAML is installed. The result is checked with the same strict
converter that reads config.toml, so an import never writes a file assern rejects.
Values are carried over as written: `${VAR}` references stay references.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import tomli_w

from assern.actors.config.home import LOCAL_DIR, ORIGINAL_SERVERS_FILE
from assern.actors.config.layers import read_text
from assern.actors.config.model import ConfigFile, LocalConfigFile, ServerConfig
from assern.actors.config.spec import ConfigError
from assern.actors.config.structure import structure
from assern.actors.config.yaml_layout import YAML_SUFFIXES, convert_global, convert_local, parse_yaml
from assern.supervisor.io.logs import redact

if TYPE_CHECKING:
    from pathlib import Path

#: A value that refers to a variable (`${VAR}` or `$VAR`) rather than holding a literal.
_REFERENCE = re.compile(r"\$(\{|[A-Za-z_])")


@attrs.frozen(kw_only=True)
class Imported:
    """A converted file.

    Attributes:
        document: Plain data in the layout of `config.toml` (or a local one).
        local: It is a project's `.assern/` config rather than a global one.
        notes: What could not be carried over, one line per key (never a value).
    """

    document: dict[str, Any]
    local: bool = False
    notes: tuple[str, ...] = ()


def import_file(path: Path) -> Imported:
    """Convert an `mcpServers` JSON file or an original-layout `config.yaml`.

    Args:
        path: The file; `.json` is read as `mcpServers` JSON, `.yaml`/`.yml` as the
            original Assern layout (a `.assern/config.yaml` as its local layout).

    Returns:
        The converted document, checked against assern's schema.

    Raises:
        ConfigError: the file is missing, of another kind, or holds values assern
            cannot take; every problem is listed.
    """
    text = read_text(path)
    if text is None:
        raise ConfigError(str(path), ("file not found",))
    suffix = path.suffix.lower()
    if suffix == ".json":
        servers = ServerConfig.from_mcp_servers_json(text, file=str(path))
        imported = Imported(document={"servers": _server_tables(servers)} if servers else {})
    elif suffix in YAML_SUFFIXES:
        imported = _from_yaml(path, text)
    else:
        raise ConfigError(
            str(path),
            ("expected an mcpServers JSON file (.json) or the original Assern config.yaml (.yaml, .yml)",),
        )
    _check(imported, str(path))
    return imported


def _from_yaml(path: Path, text: str) -> Imported:
    data = parse_yaml(text, file=str(path))
    local = path.parent.name == LOCAL_DIR
    converted = convert_local(data, file=str(path)) if local else convert_global(data, file=str(path))
    document = converted.document
    beside = path.parent / ORIGINAL_SERVERS_FILE
    beside_text = read_text(beside)
    if beside_text is not None:
        servers = _server_tables(ServerConfig.from_mcp_servers_json(beside_text, file=str(beside)))
        overrides = document.get("servers")
        if isinstance(overrides, Mapping):
            for name, table in overrides.items():
                base = servers.get(name, {})
                servers[name] = {**base, **table} if isinstance(table, Mapping) else table
        document = {**document, "servers": servers}
    return Imported(document=document, local=local, notes=converted.notes)


def _server_tables(servers: Mapping[str, ServerConfig]) -> dict[str, dict[str, Any]]:
    return {name: server_table(config) for name, config in servers.items()}


def server_table(config: ServerConfig) -> dict[str, Any]:
    """A server as a TOML table: only the fields it sets, lists and tables as plain data."""
    table: dict[str, Any] = {}
    for field in attrs.fields(ServerConfig):
        value = getattr(config, field.name)
        if value is None:
            continue
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        table[field.name] = value
    return table


def _check(imported: Imported, file: str) -> None:
    """Structure the document as assern would read it; raise on any problem."""
    if imported.local:
        structure(imported.document, LocalConfigFile, file=file)
        return
    model = structure(imported.document, ConfigFile, file=file)
    problems = model.problems(included=())
    if problems:
        raise ConfigError(file, tuple(problems))


def hide_literal_secrets(document: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Redact env and header values that hold a literal (not a `${VAR}` reference).

    Used when the converted file goes to a screen or a pipe rather than to a file.

    Returns:
        A copy of the document, and how many values were redacted.
    """
    hidden = 0

    def secrets(table: object) -> object:
        nonlocal hidden
        if not isinstance(table, Mapping):
            return table
        out: dict[str, Any] = {}
        for key, value in table.items():
            if isinstance(value, str) and not _REFERENCE.search(value):
                out[key] = redact(value)
                hidden += 1
            else:
                out[key] = value
        return out

    def server(table: object) -> object:
        if not isinstance(table, Mapping):
            return table
        return {k: secrets(v) if k in ("env", "headers") else v for k, v in table.items()}

    def servers(tables: object) -> object:
        return {n: server(t) for n, t in tables.items()} if isinstance(tables, Mapping) else tables

    def project(table: object) -> object:
        if not isinstance(table, Mapping):
            return table
        return {
            k: secrets(v) if k == "env" else servers(v) if k == "servers" else v for k, v in table.items()
        }

    out = dict(document)
    if "servers" in out:
        out["servers"] = servers(out["servers"])
    if isinstance(out.get("projects"), Mapping):
        out["projects"] = {name: project(table) for name, table in out["projects"].items()}
    return out, hidden


def to_toml(
    document: Mapping[str, Any], *, source: Path, notes: tuple[str, ...] = (), hidden: int = 0
) -> str:
    """The TOML text of a converted document, with a header saying where it came from.

    Args:
        document: The converted document.
        source: The file it was converted from.
        notes: What could not be carried over; each becomes a comment.
        hidden: How many values were redacted (then the header says how to keep them).
    """
    header = [f"# Converted by `assernctl config import` from {source}"]
    header += [f"# note: {note}" for note in notes]
    if hidden:
        header.append(
            f"# {hidden} literal env or header value(s) are redacted here: "
            "write the file with --output to keep them"
        )
    body = tomli_w.dumps(dict(document))
    return "\n".join(header) + "\n" + ("\n" + body if body else "")
