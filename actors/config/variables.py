"""The `${VAR}` references of a config document that nothing defines, found without a model.

Resolution (merge.py) expands a server's `command`, `url`, `cwd`, `args`, `headers` and
`env` once the files structure into their models. When a file does not (a type error),
resolution cannot run, yet the user asked for every problem: `undefined_references`
reads the same fields of the raw document and reports each reference that the
environment and the .env files leave undefined, with its key path. An `env` value may
use the keys of its own table (as a layered server env may), so those count as defined.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterator, Mapping
from typing import Any

from assern.actors.config.env import ExpansionError, expand_vars
from assern.actors.config.keypath import KeyPath, at

#: The string fields of a server table that are expanded.
SCALARS = ("command", "url", "cwd")


def _server_tables(document: Mapping[str, Any]) -> Iterator[tuple[KeyPath, Mapping[str, Any]]]:
    servers = document.get("servers")
    if isinstance(servers, Mapping):
        for name, table in servers.items():
            if isinstance(table, Mapping):
                yield ("servers", name), table
    projects = document.get("projects")
    if isinstance(projects, Mapping):
        for project, body in projects.items():
            overrides = body.get("servers") if isinstance(body, Mapping) else None
            if isinstance(overrides, Mapping):
                for name, table in overrides.items():
                    if isinstance(table, Mapping):
                        yield ("projects", project, "servers", name), table


def _check(value: object, lookup: Mapping[str, str], path: KeyPath) -> Iterator[str]:
    if not isinstance(value, str):
        return
    try:
        expand_vars(value, lookup)
    except ExpansionError as exc:
        yield at(str(exc), path)


def undefined_references(document: Mapping[str, Any], lookup: Mapping[str, str]) -> list[str]:
    """Every "problem @ key.path" line for a reference `lookup` cannot expand."""
    problems: list[str] = []
    for prefix, table in _server_tables(document):
        for field in SCALARS:
            problems += _check(table.get(field), lookup, (*prefix, field))
        args = table.get("args")
        if isinstance(args, list):
            for index, arg in enumerate(args):
                problems += _check(arg, lookup, (*prefix, "args", index))
        headers = table.get("headers")
        if isinstance(headers, Mapping):
            for key, value in headers.items():
                problems += _check(value, lookup, (*prefix, "headers", key))
        env = table.get("env")
        if isinstance(env, Mapping):
            own = {key: "" for key in env if isinstance(key, str)}
            for key, value in env.items():
                problems += _check(value, ChainMap(own, dict(lookup)), (*prefix, "env", key))
    return problems
