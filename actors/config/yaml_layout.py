"""The original Assern layout in YAML, turned into the documents our TOML files hold.

The original Assern kept its servers in `mcp.json` (the `mcpServers` format) and its
projects and settings in `config.yaml`:

```yaml
projects:
  work:
    directories: [~/work/*]
    env: {GITHUB_TOKEN: "${WORK_GITHUB_TOKEN}"}
    servers:
      github: {merge_mode: overlay, env: {GITHUB_TOKEN: "${WORK_GITHUB_TOKEN}"}}
      slack: {disabled: true}
settings: {log_level: info, timeout: 60s}
```

and a project's `.assern/config.yaml` held `project`, `servers` and `env`. The
functions here convert such a document into the shape of our `config.toml` (or local
`.assern/config.toml`) as plain data; the caller structures it with the same strict
converter as a TOML file, so every error still names the file and the key path. What
has no equivalent here (OAuth, retries, most settings) is dropped with a note that names
the key, never its value.

Reading YAML needs PyYAML, the optional `yaml` extra (`pip install 'assern[yaml]'`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

import attrs

from assern.actors.config.keypath import KeyPath, format_key_path
from assern.actors.config.spec import ConfigError

YAML_SUFFIXES = (".yaml", ".yml")

#: Server keys of the original layout that map onto ours under another name.
_RENAMED = {"work_dir": "cwd", "workDir": "cwd"}
#: Server keys of the original layout that assern has no equivalent for.
_UNSUPPORTED_SERVER_KEYS = ("oauth", "oauth_ref", "retry")
#: Transport words of the original layout and ours (None: not supported).
_TRANSPORTS: Mapping[str, str | None] = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "oauth-http": None,
    "oauth-sse": None,
}
#: Settings both layouts share; the original's other settings are dropped.
_OUR_SETTINGS = ("naming", "max_name_length")


@attrs.frozen(kw_only=True)
class Converted:
    """A document in our TOML layout and what could not be carried over.

    Attributes:
        document: Plain data shaped like `config.toml` (or a local `.assern/config.toml`).
        notes: One line per dropped key, naming its key path (never its value).
    """

    document: dict[str, Any]
    notes: tuple[str, ...] = ()


def yaml_available() -> bool:
    """Whether PyYAML (the `yaml` extra) is installed."""
    return importlib.util.find_spec("yaml") is not None


def parse_yaml(text: str, *, file: str) -> object:
    """Parse YAML text with PyYAML's safe loader.

    Raises:
        ConfigError: PyYAML is not installed, or the text is not valid YAML (the
            message gives the problem, line and column, never the text itself).
    """
    try:
        import yaml  # the optional `yaml` extra
    except ImportError:
        raise ConfigError(
            file,
            (
                "reading YAML needs PyYAML: install it with pip install 'assern[yaml]' "
                "(or convert the file once with `assernctl config import`)",
            ),
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" (at line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(file, (f"invalid YAML: {exc.problem or 'syntax error'}{where}",)) from None
    except yaml.YAMLError:
        raise ConfigError(file, ("invalid YAML",)) from None


def convert_global(data: object, *, file: str) -> Converted:
    """Convert an original-layout global `config.yaml` into our `config.toml` layout.

    Args:
        data: The parsed YAML (None for an empty file).
        file: Its name, for errors.

    Returns:
        `projects` (with their server overrides), the settings we share, and any other
        top-level key as it is (so the strict converter reports it as unknown).

    Raises:
        ConfigError: the document is not a mapping.
    """
    top = _top_mapping(data, file)
    notes: list[str] = []
    document: dict[str, Any] = {}
    for key, value in top.items():
        if key == "projects" and isinstance(value, Mapping):
            document["projects"] = {
                name: _project(project, ("projects", name), notes) for name, project in value.items()
            }
        elif key == "servers" and isinstance(value, Mapping):
            document["servers"] = _servers(value, ("servers",), notes)
        elif key == "settings" and isinstance(value, Mapping):
            settings = {k: v for k, v in value.items() if k in _OUR_SETTINGS}
            notes += [_dropped(("settings", k)) for k in value if k not in _OUR_SETTINGS]
            if settings:
                document["settings"] = settings
        elif key == "auth":
            notes.append(_dropped(("auth",), "OAuth profiles are not supported"))
        else:
            document[key] = value
    return Converted(document=document, notes=tuple(notes))


def convert_local(data: object, *, file: str) -> Converted:
    """Convert an original-layout `.assern/config.yaml` into our local `config.toml` layout.

    Its top-level `env` has no place in a local config.toml (the local `.assern/.env`
    plays that part), so it is dropped with a note.

    Raises:
        ConfigError: the document is not a mapping.
    """
    top = _top_mapping(data, file)
    notes: list[str] = []
    document: dict[str, Any] = {}
    for key, value in top.items():
        if key == "servers" and isinstance(value, Mapping):
            document["servers"] = _servers(value, ("servers",), notes)
        elif key == "env":
            notes.append(_dropped(("env",), "put these variables in .assern/.env"))
        else:
            document[key] = value
    return Converted(document=document, notes=tuple(notes))


def _top_mapping(data: object, file: str) -> Mapping[Any, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(file, ("expected a YAML mapping at the top level",))
    return data


def _dropped(path: KeyPath, why: str = "assern has no such setting") -> str:
    return f"dropped {format_key_path(path)}: {why}"


def _project(project: object, path: KeyPath, notes: list[str]) -> object:
    if not isinstance(project, Mapping):
        return project
    out = dict(project)
    if isinstance(out.get("env"), Mapping):
        out["env"] = _strings(out["env"])
    if isinstance(out.get("servers"), Mapping):
        out["servers"] = _servers(out["servers"], (*path, "servers"), notes)
    return out


def _servers(servers: Mapping[Any, Any], path: KeyPath, notes: list[str]) -> dict[Any, Any]:
    return {name: _server(table, (*path, name), notes) for name, table in servers.items()}


def _server(table: object, path: KeyPath, notes: list[str]) -> object:
    """One server table: renamed keys, our transport words, scalar env values as text."""
    if not isinstance(table, Mapping):
        return table
    out: dict[Any, Any] = {}
    for key, value in table.items():
        if key in _UNSUPPORTED_SERVER_KEYS:
            notes.append(_dropped((*path, key), "not supported by assern"))
        elif key == "transport" and isinstance(value, str) and value in _TRANSPORTS:
            ours = _TRANSPORTS[value]
            if ours is None:
                notes.append(_dropped((*path, key), f"transport {value!r} (OAuth) is not supported"))
            else:
                out[key] = ours
        elif key in ("env", "headers") and isinstance(value, Mapping):
            out[key] = _strings(value)
        elif key == "args" and isinstance(value, list):
            out[key] = [_scalar_text(item) for item in value]
        else:
            out[_RENAMED.get(key, key)] = value
    return out


def _strings(table: Mapping[Any, Any]) -> dict[Any, Any]:
    """YAML reads `PORT: 8080` as a number; an environment value is always text."""
    return {key: _scalar_text(value) for key, value in table.items()}


def _scalar_text(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value
