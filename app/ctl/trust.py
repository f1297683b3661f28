"""`assernctl trust [PATH]`, `assernctl trust --list` and `assernctl untrust PATH`.

A folder's own configuration (`.assern/`, an `mcpServers` file found in it) runs only
once the user trusts it here (actors/config/trust.py, docs/security.md). `trust` shows
what the folder's files would start (each server's command, args, env keys, cwd and
`root`; what changed since the last grant), asks, and records the digest of exactly
what it showed: if the files change after they were shown, the grant does not cover
them. `--yes` grants without asking (for scripts); without it, a terminal is needed.
Every running instance of this `$ASSERN_HOME` is then asked to reload, so a grant or a
revoke applies at once.

Exit codes: 0 trusted (or already); 1 not trusted (declined, nothing to trust, the store
unusable); 2 a configuration error or a wrong argument.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assern.actors.config.home import default_assern_home
from assern.actors.config.sources import read_sources, trust_file
from assern.actors.config.spec import ConfigError
from assern.actors.config.trust import (
    ProjectFiles,
    TrustRecord,
    TrustStoreError,
    assess,
    grant,
    read_store,
    revoke,
)
from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.ctl.common import Usage, all_instances, print_json
from assern.app.running import environ

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

#: How long one running instance may take to reload after a grant or a revoke.
RELOAD_TIMEOUT = 60.0


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _folder(path: str | None) -> Path:
    folder = Path(os.path.abspath(path or os.getcwd()))
    if not folder.is_dir():
        raise Usage(f"{folder} is not a folder")
    return folder


def _projects(folder: Path, args: argparse.Namespace, env: Mapping[str, str]) -> tuple[ProjectFiles, ...]:
    """What a session started in `folder` would read of folders' own files.

    Raises:
        Usage: a file cannot be read or parsed (nothing broken is trusted).
    """
    try:
        found = read_sources(
            config_path=args.config, cwd=folder, environ=env, assern_home=default_assern_home(env)
        )
    except ConfigError as exc:
        raise Usage(f"configuration error (nothing is trusted until it reads)\n{exc}") from None
    return found.projects


def cmd_trust(args: argparse.Namespace) -> int:
    env = environ()
    store_path = trust_file(default_assern_home(env))
    if args.list:
        return _list(args, env)
    folder = _folder(args.path)
    projects = _projects(folder, args, env)
    if not projects:
        print(
            f"assernctl: {folder} holds no project configuration to trust: no .assern/config.toml "
            "or .assern/.env in it or above it, and no mcp-config.json of its own in use",
            file=sys.stderr,
        )
        return 1
    store = read_store(store_path)
    if store.problem is not None:
        print(f"assernctl: the trust store {store_path} cannot be used: {store.problem}", file=sys.stderr)
        return 1
    report = assess(projects, store)
    pending = [item.project for item in report.untrusted]
    if args.json:
        document = {"folder": str(folder), "projects": [_document(p, store.records) for p in projects]}
    else:
        for item in report.untrusted:
            _show(item.project, store.records.get(item.project.folder), item.changes)
        for trusted in report.trusted:
            print(f"{trusted}: trusted since {store.records[trusted].trusted_at}; nothing changed")
    granted = False
    if pending and (args.yes or (not args.json and _ask())):
        try:
            grant(store_path, pending, now=_now())
        except TrustStoreError as exc:
            print(f"assernctl: {exc}", file=sys.stderr)
            return 1
        granted = True
    if args.json:
        print_json({**document, "granted": granted, "trusted": not pending or granted})
    elif granted:
        print("trusted: " + ", ".join(project.folder for project in pending))
    elif pending:
        print("nothing trusted", file=sys.stderr)
    if granted:
        _reload_instances(quiet=args.json)
    return 0 if not pending or granted else 1


def _ask() -> bool:
    if not sys.stdin.isatty():
        print(
            "assernctl: not asking: stdin is not a terminal. Review the above, then run "
            "`assernctl trust --yes` with the same folder",
            file=sys.stderr,
        )
        return False
    try:
        answer = input("Let assern run this folder's configuration? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _show(project: ProjectFiles, record: TrustRecord | None, changes: tuple[str, ...]) -> None:
    if record is None:
        print(f"{project.folder} is not trusted. Its configuration would start:")
    else:
        print(f"{project.folder} changed since it was trusted ({record.trusted_at}):")
        print("\n".join(f"  {line}" for line in changes))
        print("Its configuration would now start:")
    print("\n".join(project.describe()))
    if not project.servers:
        print("  (no server: only the settings and .env above)")


def _document(project: ProjectFiles, records: Mapping[str, TrustRecord]) -> dict[str, Any]:
    record = records.get(project.folder)
    state = "new" if record is None else "trusted" if record.digest == project.digest else "changed"
    return {
        "folder": project.folder,
        "state": state,
        "files": project.file_names(),
        "servers": {name: sketch.to_json() for name, sketch in project.servers.items()},
        "env_keys": list(project.env_keys),
        "sections": list(project.sections),
        "trusted_at": record.trusted_at if record is not None else None,
    }


def _list(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    store_path = trust_file(default_assern_home(env))
    store = read_store(store_path)
    if store.problem is not None:
        print(f"assernctl: the trust store {store_path} cannot be used: {store.problem}", file=sys.stderr)
        return 1
    rows = [
        {
            "folder": folder,
            "trusted_at": record.trusted_at,
            "servers": list(record.servers),
            "state": _state(folder, record, args, env),
        }
        for folder, record in store.records.items()
    ]
    if args.json:
        print_json({"store": str(store_path), "folders": rows})
        return 0
    if not rows:
        print("no folder is trusted")
    for row in rows:
        servers = ", ".join(row["servers"]) or "no server"
        print(f"{row['folder']}  ({row['state']}; trusted {row['trusted_at']}; {servers})")
    return 0


def _state(folder: str, record: TrustRecord, args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """Whether the folder's files are still what was trusted: current, changed, gone."""
    if not os.path.isdir(folder):
        return "gone: the folder is not there (moved or removed)"
    try:
        projects = _projects(Path(folder), args, env)
    except Usage:
        return "changed: its files do not read now"
    now = next((project for project in projects if project.folder == folder), None)
    if now is None:
        return "gone: the folder holds no configuration now"
    return "current" if now.digest == record.digest else "changed: run `assernctl trust` there"


def cmd_untrust(args: argparse.Namespace) -> int:
    env = environ()
    path = os.path.abspath(args.path)
    folders = [os.path.realpath(path)]
    if os.path.isdir(path):
        try:
            folders += [project.folder for project in _projects(Path(path), args, env)]
        except Usage:
            pass  # the folder's own record is removed all the same
    try:
        removed = revoke(trust_file(default_assern_home(env)), folders)
    except TrustStoreError as exc:
        print(f"assernctl: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json({"removed": removed})
    elif removed:
        print("no longer trusted: " + ", ".join(removed))
    else:
        print(f"assernctl: {path} is not trusted", file=sys.stderr)
    if removed:
        _reload_instances(quiet=args.json)
    return 0 if removed else 1


def _reload_instances(*, quiet: bool) -> None:
    """Ask every running instance of this `$ASSERN_HOME` to resolve its configuration again
    (each watches the store too: this only makes the change apply before we return)."""
    try:
        instances = all_instances()
    except Usage:
        return
    for instance in instances:
        try:
            request(instance.slot.control, "reload", timeout=RELOAD_TIMEOUT)
        except (ControlUnavailable, ControlError) as exc:
            print(f"assernctl: the instance (pid {instance.pid}) did not reload: {exc}", file=sys.stderr)
            continue
        if not quiet:
            print(f"reloaded the running instance (pid {instance.pid})", file=sys.stderr)
