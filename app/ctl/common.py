"""What every `assernctl` command group shares: finding the running instance of the
current directory's configuration, asking it one command, and the errors that set the
exit status."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.config.home import default_assern_home
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.daemon.hello import DAEMON_SLOT
from assern.app.daemon.runtime_file import describe, verify
from assern.app.instance import InstanceError, Slot, fingerprint, slot_names, socket_directory
from assern.app.running import environ, loader, this_build

if TYPE_CHECKING:
    import argparse
    from pathlib import Path


class Usage(Exception):
    """A mistake on the command line or in the configuration: exit status 2."""


@attrs.frozen
class Instance:
    """A running instance that answered `hello`: a primary of one configuration, or one
    view (one configuration) of the workstation daemon (`view`: its fingerprint)."""

    slot: Slot
    hello: Mapping[str, Any]
    view: str | None = None

    @property
    def pid(self) -> int | None:
        pid = self.hello.get("pid")
        return pid if isinstance(pid, int) else None

    def ask(self, command: str, *, timeout: float | None = 10.0, **fields: Any) -> Any:
        """One control command to this instance (to its view, on the daemon).

        Raises:
            ControlUnavailable: it does not answer.
            ControlError: it refused or failed the command.
        """
        if self.view is not None:
            fields["view"] = self.view
        return request(self.slot.control, command, timeout=timeout, **fields)


def views_of(slot: Slot, hello: Mapping[str, Any]) -> list[Instance]:
    """The workstation daemon's views, each as an instance of its configuration."""
    found = []
    for view in hello.get("views") or ():
        if isinstance(view, dict) and isinstance(view.get("fingerprint"), str):
            doc = {
                "pid": hello.get("pid"),
                "slot": slot.name,
                "daemon": True,
                "fingerprint": view["fingerprint"],
                "project": view.get("project"),
                "config_files": view.get("config_files") or [],
                "version": hello.get("version"),
                "build": hello.get("build"),
            }
            found.append(Instance(slot, doc, view=view["fingerprint"]))
    return found


def workstation_daemon() -> tuple[Slot, Mapping[str, Any]] | None:
    """The workstation daemon of this `$ASSERN_HOME` (its slot and hello), if one answers."""
    directory = socket_dir()
    slot = Slot(directory, DAEMON_SLOT)
    if not slot.control.exists():
        return None
    answer = hello(slot)
    if answer is None or not answer.get("workstation"):
        return None
    return slot, answer


def daemon_identity(slot: Slot, hello: Mapping[str, Any]) -> dict[str, Any]:
    """What `assernctl status` adds to the daemon's own status: this install's build, and
    whether the runtime file beside its sockets stands for the daemon that said `hello`."""
    found = verify(slot.directory, lambda _slot: hello)
    return {"this_build": this_build(), "runtime_file": describe(found)}


def load_config(args: argparse.Namespace) -> tuple[ResolvedConfig, Callable[[], ResolvedConfig]]:
    """The configuration `list` and `call` use on their own (direct mode).

    Without `--config` and without a global assern config, cllm-mcp's files are found as
    cllm-mcp finds them (./mcp-config.json, ./.mcp-config.json, ~/.config/cllm-mcp/), as
    `assern serve` finds them (actors/config/discover.py); the working folder's own
    file applies once the folder is trusted.
    """
    load = loader(args.config, args.project, environ())
    try:
        return load(), load
    except ConfigError as exc:
        raise Usage(f"configuration error\n{exc}") from None


def socket_dir() -> Path:
    env = environ()
    try:
        return socket_directory(default_assern_home(env), env).path
    except InstanceError as exc:
        raise Usage(str(exc)) from None


def hello(slot: Slot) -> Mapping[str, Any] | None:
    try:
        hello = request(slot.control, "hello", timeout=5.0)
    except (ControlUnavailable, ControlError):
        return None
    return hello if isinstance(hello, dict) else None


def all_instances() -> list[Instance]:
    """Every instance of this `$ASSERN_HOME` that answers."""
    directory = socket_dir()
    if not directory.is_dir():
        return []
    found = []
    for name in slot_names(os.listdir(directory)):
        slot = Slot(directory, name)
        answer = hello(slot)
        if answer is not None and answer.get("workstation"):
            found += views_of(slot, answer)
        elif answer is not None:
            found.append(Instance(slot, answer))
    return found


def _files(paths: Any) -> set[str]:
    return {os.path.realpath(str(p)) for p in paths} if isinstance(paths, list | tuple) else set()


def matching(
    instances: list[Instance], config: ResolvedConfig | None, *, project: str | None, config_path: Path | None
) -> list[Instance]:
    """The instances that serve `config`: the one with its fingerprint when one has it;
    else those with the same project and config files (an edited configuration not
    reloaded yet). When `config` does not resolve (None): those matching `project` and
    `config_path` when given, else every one."""
    if config is not None:
        digest = fingerprint(config)
        exact = [i for i in instances if i.hello.get("fingerprint") == digest]
        if exact:
            return exact[:1]
        files = _files(config.files)
        return [
            i
            for i in instances
            if i.hello.get("project") == config.project and _files(i.hello.get("config_files")) == files
        ]
    same = instances
    if project:
        same = [i for i in same if i.hello.get("project") == project]
    if config_path:
        same = [i for i in same if os.path.realpath(config_path) in _files(i.hello.get("config_files"))]
    return same


def find_instance(args: argparse.Namespace) -> tuple[ResolvedConfig | None, Instance | None]:
    """The running instance for the current directory's configuration.

    First the instance whose configuration fingerprint is the one resolved here. A
    configuration edited since the instance loaded it (not reloaded yet, or broken) has
    another fingerprint; then the one instance with the same project and config files
    (or, when the files do not resolve now, matching `--project` and `--config`).

    Returns:
        (the configuration, or None when it does not resolve; the instance, or None).

    Raises:
        Usage: the configuration does not resolve and no single instance matches.
        LookupError: several instances match; the message says how to choose.
    """
    load = loader(args.config, args.project, environ())
    try:
        config: ResolvedConfig | None = load()
        problem = None
    except ConfigError as exc:
        config, problem = None, exc
    same = matching(all_instances(), config, project=args.project, config_path=args.config)
    if len(same) == 1:
        if problem is not None:
            print(f"assernctl: warning: the configuration does not resolve now:\n{problem}", file=sys.stderr)
        return config, same[0]
    if problem is not None:
        raise Usage(f"configuration error\n{problem}")
    if len(same) > 1:
        pids = ", ".join(str(i.pid) for i in same)
        raise LookupError(f"several instances match (pids {pids}); choose with --project or --config")
    return config, None


def no_instance(config: ResolvedConfig | None) -> str:
    if config is None:
        return "no assern instance runs for this configuration"
    project = f"project {config.project!r}" if config.project else "no project"
    text = f"no assern instance runs for this configuration ({project})"
    others = len(all_instances())
    if others:
        text += f"; {others} other instance(s) run: see `assernctl status --all`"
    return text


def require(args: argparse.Namespace) -> Instance:
    config, instance = find_instance(args)
    if instance is None:
        raise LookupError(no_instance(config))
    return instance


FAILED = object()


def ask(args: argparse.Namespace, command: str, *, failure: str = "", **fields: Any) -> Any:
    """One command to the running instance; prints why and returns `FAILED` when it fails."""
    try:
        instance = require(args)
        return instance.ask(command, **fields)
    except LookupError as exc:
        print(f"assernctl: {exc.args[0]}", file=sys.stderr)
    except ControlError as exc:
        print(f"assernctl: {failure}{exc.message}", file=sys.stderr)
    return FAILED


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))
