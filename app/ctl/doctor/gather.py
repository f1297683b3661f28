"""Gather the `Facts` once: the configuration as `assern serve` resolves it here, the
files and sockets as they are, and what the running instance says.

Nothing is changed: no file is written or removed, no log is opened, no socket is bound.
The instance is asked `hello` and `status`; an HTTP address that accepts connections is
asked `/healthz`. Each answer that does not come is kept as a fact, never raised.
"""

from __future__ import annotations

import grp
import http.client
import os
import pwd
import shutil
import socket
import ssl
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.config.home import default_assern_home
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.actors.identity import __version__
from assern.app.control_client import ControlError, ControlUnavailable, request
from assern.app.ctl.clients.survey import Survey, survey_clients
from assern.app.ctl.common import Instance, matching, views_of
from assern.app.ctl.doctor.facts import (
    Facts,
    HttpFact,
    InstanceFact,
    Launcher,
    PathFact,
    PathKind,
    SlotFact,
)
from assern.app.daemon.hello import DAEMON_SLOT
from assern.app.daemon.runtime_file import NotVerified, Verified, verify
from assern.app.instance import (
    InstanceError,
    Slot,
    candidate_slots,
    fingerprint,
    probe,
    sharing_enabled,
    slot_names,
    socket_directory,
)
from assern.app.running import environ, loader, this_build

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assern.actors.config.listen import Bind
    from assern.actors.config.spec import ServerSpec

#: Seconds to wait for a control socket's `hello` and `status`, and an HTTP answer.
HELLO_TIMEOUT = 3.0
STATUS_TIMEOUT = 10.0
HTTP_TIMEOUT = 2.0


def path_fact(path: Path, *, follow: bool = False) -> PathFact:
    """`path` as `lstat` sees it (`stat` with `follow`: a symlinked home or config is fine)."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return PathFact(path=path, kind="missing")
    except OSError as exc:
        return PathFact(path=path, kind="unreadable", error=exc.strerror or str(exc))
    mode = info.st_mode
    kind: PathKind = "other"
    if stat.S_ISLNK(mode):
        kind = "link"
    elif stat.S_ISDIR(mode):
        kind = "folder"
    elif stat.S_ISSOCK(mode):
        kind = "socket"
    elif stat.S_ISREG(mode):
        kind = "file"
    return PathFact(path=path, kind=kind, uid=info.st_uid, gid=info.st_gid, mode=stat.S_IMODE(mode))


def run_paths(directory: Path, *, fallback: bool) -> tuple[PathFact, ...]:
    """The socket folder (after its per-user parent, for the /tmp fallback) and, when it
    is a folder, everything in it and in its hints folder."""
    facts = [path_fact(directory.parent)] if fallback and directory.parent.name.startswith("assern-") else []
    folder = path_fact(directory)
    facts.append(folder)
    if folder.kind != "folder":
        return tuple(facts)
    for parent in (directory, directory / "hints"):
        try:
            names = sorted(os.listdir(parent))
        except FileNotFoundError:
            continue
        except OSError as exc:
            facts.append(PathFact(path=parent, kind="unreadable", error=exc.strerror or str(exc)))
            continue
        facts += [path_fact(parent / name) for name in names]
    return tuple(facts)


def home_paths(assern_home: Path, config: ResolvedConfig | None) -> tuple[PathFact, ...]:
    """`$ASSERN_HOME`, then every file of `config` (symlinks followed)."""
    files = config.files if config is not None else ()
    return (path_fact(assern_home, follow=True), *(path_fact(path, follow=True) for path in files))


def own_group() -> int | None:
    """Our primary group when nobody else is in it (a user private group), else None."""
    try:
        user = pwd.getpwuid(os.getuid())
        group = grp.getgrgid(user.pw_gid)
    except KeyError:
        return None
    alone = group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}
    return group.gr_gid if alone else None


def slot_fact(slot: Slot) -> SlotFact:
    """One slot: whether something listens at its control socket, and its `hello`."""
    liveness = probe(slot.control).value
    if liveness != "live":
        return SlotFact(name=slot.name, control=slot.control, liveness=liveness)
    try:
        hello = request(slot.control, "hello", timeout=HELLO_TIMEOUT)
    except (ControlUnavailable, ControlError) as exc:
        return SlotFact(name=slot.name, control=slot.control, liveness=liveness, error=str(exc))
    if not isinstance(hello, dict):
        return SlotFact(name=slot.name, control=slot.control, liveness=liveness, error="hello: not an object")
    return SlotFact(name=slot.name, control=slot.control, liveness=liveness, hello=hello)


def process_path(pid: int | None) -> str | None:
    """The PATH of process `pid`, where the platform shows it (Linux); None otherwise."""
    if pid is None:
        return None
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if item.startswith(b"PATH="):
            return item[5:].decode(errors="replace")
    return os.defpath  # what a process without PATH searches


def instance_fact(instance: Instance) -> InstanceFact:
    """The instance's `status` (or why it gave none) and its PATH."""
    status: Mapping[str, Any] | None = None
    error = None
    try:
        answer = instance.ask("status", timeout=STATUS_TIMEOUT)
    except (ControlUnavailable, ControlError) as exc:
        error = str(exc)
    else:
        if isinstance(answer, dict):
            status = answer
        else:
            error = "status was not an object"
    return InstanceFact(
        slot=instance.slot.name,
        control=instance.slot.control,
        hello=instance.hello,
        status=status,
        status_error=error,
        path=process_path(instance.pid),
    )


def interpreter_of(path: str) -> str | None:
    """What a script's `#!` line runs: the program after `env` (and its -S), or the path."""
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [word for word in words[1:] if not word.startswith("-")]
        return rest[0] if rest else None
    return words[0]


def launcher(spec: ServerSpec, instance: InstanceFact | None, shell_path: str | None) -> Launcher:
    """Where `spec`'s command is, as its backend looks for it (backend/transport.py
    `resolve_command`): on the PATH of the server's env. That PATH is the one the
    configuration sets, else the running instance's own, else this shell's."""
    assert spec.command is not None
    command = spec.command
    if os.sep in command:
        base = spec.cwd or os.getcwd()
        full = os.path.join(base, command)
        found = full if os.path.isfile(full) and os.access(full, os.X_OK) else None
        return Launcher(server=spec.name, command=command, searched=None, origin="its path", found=found)
    if "PATH" in spec.env_keys_from:
        searched, origin = spec.env["PATH"], "the PATH its configuration sets"
    elif instance is not None and instance.path is not None:
        searched, origin = instance.path, f"the PATH of the running instance (pid {instance.pid})"
    else:
        searched, origin = spec.env.get("PATH", os.defpath), "this shell's PATH"
    found = shutil.which(command, path=searched)
    if found is None:
        here = shutil.which(command, path=shell_path if shell_path is not None else os.defpath)
        return Launcher(
            server=spec.name, command=command, searched=searched, origin=origin, found=None, elsewhere=here
        )
    interpreter = interpreter_of(found)
    located = None
    if interpreter is not None:
        located = interpreter if os.sep in interpreter else shutil.which(interpreter, path=searched)
        if located is not None and not os.access(located, os.X_OK):
            located = None
    return Launcher(
        server=spec.name,
        command=command,
        searched=searched,
        origin=origin,
        found=found,
        interpreter=interpreter,
        interpreter_found=located,
    )


def http_fact(bind: Bind, *, tls: bool) -> HttpFact:
    """Who holds `bind`: nobody, an assern front (its `/healthz`), or another program."""
    address = str(bind)
    try:
        sock = socket.create_connection((bind.host, bind.port), timeout=HTTP_TIMEOUT)
    except ConnectionRefusedError:
        return HttpFact(address=address, port=bind.port, answer="free")
    except OSError as exc:
        return HttpFact(address=address, port=bind.port, answer="unknown", detail=exc.strerror or str(exc))
    sock.close()
    connection: http.client.HTTPConnection
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # who answers is the question here, not whether to trust it
        connection = http.client.HTTPSConnection(bind.host, bind.port, timeout=HTTP_TIMEOUT, context=context)
    else:
        connection = http.client.HTTPConnection(bind.host, bind.port, timeout=HTTP_TIMEOUT)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        body = response.read(4096)
    except (OSError, http.client.HTTPException) as exc:
        return HttpFact(address=address, port=bind.port, answer="other", detail=f"not an HTTP answer: {exc}")
    finally:
        connection.close()
    if response.status == 200 and body.replace(b" ", b"") == b'{"status":"alive"}':
        return HttpFact(address=address, port=bind.port, answer="assern")
    server = response.getheader("server") or "no server header"
    detail = f"/healthz: {response.status}, {server}"
    return HttpFact(address=address, port=bind.port, answer="other", detail=detail)


@attrs.frozen(kw_only=True)
class Running:
    """What the socket folder holds: its slots, the ones this configuration may have,
    and its instance."""

    slots: tuple[SlotFact, ...] = ()
    candidates: tuple[str, ...] = ()
    instance: InstanceFact | None = None
    runtime: Verified | NotVerified | None = None
    matches: int = 0


def running(
    directory: Path, config: ResolvedConfig | None, *, project: str | None, config_path: Path | None
) -> Running:
    """Every slot in `directory`, and the instance of `config` (as `assernctl` finds it)."""
    try:
        names = slot_names(os.listdir(directory))
    except OSError:
        return Running()
    slots = tuple(slot_fact(Slot(directory, name)) for name in names)
    answering: list[Instance] = []
    for slot in slots:
        if slot.hello is not None and slot.hello.get("workstation"):
            answering += views_of(Slot(directory, slot.name), slot.hello)  # the daemon's views
        elif slot.hello is not None:
            answering.append(Instance(Slot(directory, slot.name), slot.hello))
    same = matching(answering, config, project=project, config_path=config_path)
    if config is not None:
        slots_of = candidate_slots(directory, config.project, fingerprint(config), names)
        candidates = [slot.name for slot in slots_of] + [DAEMON_SLOT]
    else:
        candidates = names
    daemon = next((slot.hello for slot in slots if slot.name == DAEMON_SLOT), None)
    return Running(
        slots=slots,
        candidates=tuple(candidates),
        runtime=verify(directory, lambda _slot: daemon),
        instance=instance_fact(same[0]) if len(same) == 1 else None,
        matches=len(same),
    )


def gather(*, config_path: Path | None, project: str | None, server: str | None) -> Facts:
    """Everything `assernctl doctor` checks, as it is now.

    Args:
        config_path: `--config`, as `assern serve` takes it.
        project: `--project`.
        server: `--server`: only that server's launcher and backend are looked at.
    """
    env = environ()
    home = default_assern_home(env)
    flags: tuple[str, ...] = ()
    if config_path is not None:
        flags += ("--config", str(config_path))
    if project is not None:
        flags += ("--project", project)
    config: ResolvedConfig | None = None
    error: ConfigError | None = None
    try:
        config = loader(config_path, project, env)()
    except ConfigError as exc:
        error = exc
    run_dir, run_error = None, None
    in_run: tuple[PathFact, ...] = ()
    try:
        directory = socket_directory(home, env)
    except InstanceError as exc:
        run_error = str(exc)
    else:
        run_dir = directory.path
        in_run = run_paths(run_dir, fallback=directory.fallback)
    found = Running()
    if run_dir is not None and os.path.isdir(run_dir):
        found = running(run_dir, config, project=project, config_path=config_path)
    specs = [] if config is None else [s for s in config.servers.values() if s.transport == "stdio"]
    http = None
    if config is not None and config.listen.http is not None and config.listen.http.port != 0:
        http = http_fact(config.listen.http, tls=config.listen.tls)
    return Facts(
        version=__version__,
        build=this_build(keep=False),  # doctor changes nothing
        uid=os.getuid(),
        own_group=own_group(),
        flags=flags,
        server=server,
        cwd=Path.cwd(),
        assern_home=home,
        path=env.get("PATH"),
        config=config,
        config_error=error,
        sharing=sharing_enabled(env),
        run_dir=run_dir,
        run_dir_error=run_error,
        run_paths=in_run,
        home_paths=home_paths(home, config),
        slots=found.slots,
        candidates=found.candidates,
        instance=found.instance,
        runtime=found.runtime,
        matches=found.matches,
        launchers=tuple(
            launcher(spec, found.instance, env.get("PATH"))
            for spec in specs
            if server is None or spec.name == server
        ),
        http=http,
        clients=_clients(env, home),
    )


def _clients(env: Mapping[str, str], home: Path) -> Survey | None:
    """What `assernctl clients` finds here, or None when it cannot read it."""
    try:
        return survey_clients(env, Path.cwd(), assern_home=home)
    except (OSError, ValueError) as exc:
        print(f"assernctl doctor: the clients' files could not be read: {exc}", file=sys.stderr)
        return None
