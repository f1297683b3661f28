"""The running instance's checks: it answers, it is the installed build, the daemon's
runtime file stands for it, its backends are up and serve tools, and the HTTP port is
free or its own."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from assern.actors.backend.status import doctor_id
from assern.app.ctl.doctor.finding import Finding, fail, ok, warn
from assern.app.daemon.hello import DAEMON_SLOT
from assern.app.daemon.runtime_file import Verified

if TYPE_CHECKING:
    from assern.app.ctl.doctor.facts import Facts

ANSWERS = "daemon.answers"
BUILD = "daemon.build"
RUNTIME = "daemon.runtime"
FAILED = "backend.failed"
CRASH_LOOP = "backend.crash_loop"
NO_TOOLS = "backend.no_tools"
HTTP = "http.port"


def running_build(hello: Mapping[str, Any]) -> str:
    """What build an instance says it is: its build id (the workstation daemon), else its
    version (an instance of one configuration says no build)."""
    return str(hello.get("build") or hello.get("version", "unknown"))


def installed_build(hello: Mapping[str, Any], facts: Facts) -> str:
    """The installed build, said as the instance that said `hello` says its own."""
    return facts.build if hello.get("build") else facts.version


def same_build(hello: Mapping[str, Any], facts: Facts) -> bool:
    """Whether the instance that said `hello` runs the installed build."""
    return running_build(hello) == installed_build(hello, facts)


def daemon_answers(facts: Facts) -> list[Finding]:
    """`daemon.answers`: the instance of this configuration, if one runs, answers its
    control socket; no socket of it is left hanging."""
    if not facts.sharing:
        return [ok(ANSWERS, "instance sharing is off (ASSERN_NO_INSTANCE_SHARING): no instance to ask")]
    if facts.run_dir is None:
        return []
    instance = facts.instance
    if instance is not None:
        if instance.status is None:
            summary = f"the instance (pid {instance.pid}) answers hello, not status: {instance.status_error}"
            return [fail(ANSWERS, summary, "assernctl logs --level warning")]
        up = instance.status.get("uptime_s")
        summary = f"the instance at {instance.control} (pid {instance.pid}) answers"
        return [ok(ANSWERS, summary + (f", up {up:.0f} s" if isinstance(up, int | float) else ""))]
    if facts.matches > 1:
        summary = f"{facts.matches} running instances match this configuration; doctor cannot tell which"
        return [warn(ANSWERS, summary, facts.command("status", "--all"))]
    ours = [slot for slot in facts.slots if slot.name in facts.candidates]
    found = []
    for slot in ours:
        control = shlex.quote(str(slot.control))
        if slot.liveness == "live" and slot.hello is None:
            summary = f"{slot.control} accepts connections but does not answer: {slot.error}"
            found.append(fail(ANSWERS, summary, f"lsof -t {control} | xargs kill"))
        elif slot.liveness == "stale":
            summary = f"{slot.control} is left from an instance that is gone (the next start removes it)"
            mcp = shlex.quote(str(slot.control.with_suffix(".sock")))
            found.append(warn(ANSWERS, summary, f"rm -f {control} {mcp}"))
    if found:
        return found
    return [ok(ANSWERS, "no instance runs for this configuration (the next `assern serve` starts one)")]


def daemon_build(facts: Facts) -> list[Finding]:
    """`daemon.build`: the running instance is the installed build."""
    instance = facts.instance
    if instance is None:
        return []
    theirs = running_build(instance.hello)
    if same_build(instance.hello, facts):
        return [ok(BUILD, f"the instance runs the installed build ({theirs})")]
    summary = (
        f"the instance (pid {instance.pid}) runs assern {theirs}, the installed one is "
        f"{installed_build(instance.hello, facts)}: its clients get the old code until it stops"
    )
    return [warn(BUILD, summary, facts.command("shutdown"))]


def daemon_runtime(facts: Facts) -> list[Finding]:
    """`daemon.runtime`: the workstation daemon's runtime file stands for the daemon that
    answers beside it; none is left from a daemon that is gone."""
    found = facts.runtime
    if isinstance(found, Verified):
        record = found.record
        return [
            ok(RUNTIME, f"{found.path} names the running daemon (pid {record.pid}, build {record.build})")
        ]
    if found is None:
        return []
    if found.found:
        summary = f"{found.reason}; it never passes for the daemon (the next daemon rewrites it)"
        return [warn(RUNTIME, summary, f"rm -f {shlex.quote(str(found.path))}")]
    daemon = next((slot.hello for slot in facts.slots if slot.name == DAEMON_SLOT and slot.hello), None)
    if daemon is None:
        return []
    summary = f"the daemon (pid {daemon.get('pid')}) answers but wrote no runtime file ({found.path})"
    return [warn(RUNTIME, summary, "assernctl logs --grep daemon_runtime_file")]


def _backends(facts: Facts) -> list[Mapping[str, Any]] | None:
    status = facts.instance.status if facts.instance is not None else None
    if status is None:
        return None
    backends = [b for b in status.get("backends") or () if isinstance(b, Mapping)]
    return [b for b in backends if facts.server is None or b.get("name") == facts.server]


def _problem(backend: Mapping[str, Any]) -> str | None:
    restarts, tools = backend.get("restarts", 0), backend.get("tools", 0)
    return doctor_id(
        str(backend.get("state")),
        restarts=restarts if isinstance(restarts, int) else 0,
        tools=tools if isinstance(tools, int) else 0,
    )


def _why(backend: Mapping[str, Any]) -> str:
    """The backend's last error, without the "server 'NAME'" it often starts with."""
    why = str(backend.get("last_error") or backend.get("last_exit") or "no error recorded")
    return why.removeprefix(f"server '{backend['name']}' ").removeprefix("failed: ")


def _judge(
    facts: Facts, check: str, healthy: str, judge: Callable[[Facts, Mapping[str, Any]], Finding]
) -> list[Finding]:
    """A check over the running instance's backends: `judge` gives the finding of each
    backend with this problem; none with it gives one ok line saying `healthy`."""
    backends = _backends(facts)
    if backends is None:
        return []
    found = [judge(facts, backend) for backend in backends if _problem(backend) == check]
    return found or [ok(check, f"{healthy} ({len(backends)} backend(s))")]


def _failed(facts: Facts, backend: Mapping[str, Any]) -> Finding:
    name = backend["name"]
    summary = f"server '{name}' failed, out of restarts ({backend.get('restarts', 0)}): {_why(backend)}"
    return fail(FAILED, summary, f"assernctl logs --server {name} -n 50; {facts.command('restart', name)}")


def _crash_loop(facts: Facts, backend: Mapping[str, Any]) -> Finding:
    name = backend["name"]
    summary = f"server '{name}' keeps crashing ({backend.get('restarts', 0)} restarts): {_why(backend)}"
    return fail(CRASH_LOOP, summary, f"assernctl logs --server {name} -n 50; {facts.command('stop', name)}")


def _no_tools(facts: Facts, backend: Mapping[str, Any]) -> Finding:
    name = backend["name"]
    others = [f"{backend.get(kind, 0)} {kind}" for kind in ("resources", "prompts") if backend.get(kind)]
    summary = f"server '{name}' is up and lists no tools" + (f" ({', '.join(others)})" if others else "")
    return warn(NO_TOOLS, summary, facts.command("config", "explain", name))


def backend_failed(facts: Facts) -> list[Finding]:
    """`backend.failed`: no backend ran out of restarts."""
    return _judge(facts, FAILED, "no backend failed", _failed)


def backend_crash_loop(facts: Facts) -> list[Finding]:
    """`backend.crash_loop`: no backend keeps dying and restarting (see `doctor_id`)."""
    return _judge(facts, CRASH_LOOP, "no backend keeps crashing", _crash_loop)


def backend_no_tools(facts: Facts) -> list[Finding]:
    """`backend.no_tools`: every ready backend serves at least one tool."""
    return _judge(facts, NO_TOOLS, "every ready backend serves tools", _no_tools)


def http_port(facts: Facts) -> list[Finding]:
    """`http.port`: the address of `[listen] http` is free, or served by assern."""
    config = facts.config
    if config is None:
        return []
    if config.listen.http is None:
        return [ok(HTTP, "no HTTP front is configured ([listen] http)")]
    http = facts.http
    if http is None or http.port == 0:
        return [ok(HTTP, f"[listen] http = {config.listen.http}: any free port")]
    lookup = f"lsof -nP -iTCP:{http.port} -sTCP:LISTEN"
    if http.answer == "free":
        return [ok(HTTP, f"{http.address} is free")]
    if http.answer == "assern":
        if facts.instance is not None:
            return [ok(HTTP, f"{http.address} is served by assern (the instance, pid {facts.instance.pid})")]
        summary = f"{http.address} is served by an assern doctor cannot reach (an `assern serve --http`?)"
        return [warn(HTTP, summary, lookup)]
    if http.answer == "other":
        return [fail(HTTP, f"{http.address} is taken by another program ({http.detail})", lookup)]
    return [warn(HTTP, f"{http.address} could not be checked: {http.detail}", lookup)]
