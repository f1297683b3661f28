"""daemon.answers, daemon.build, the backend checks and http.port, over what the socket
folder, the control socket and the HTTP address gave."""

from __future__ import annotations

import attrs
from doctor_facts import RUN, backend, config, facts, instance, lines

from assern.actors.config.listen import ListenSpec, parse_bind
from assern.app.ctl.doctor.checks.instance import (
    backend_crash_loop,
    backend_failed,
    backend_no_tools,
    daemon_answers,
    daemon_build,
    daemon_runtime,
    http_port,
    same_build,
)
from assern.app.ctl.doctor.facts import HttpFact, SlotFact
from assern.app.ctl.doctor.finding import Finding, Status
from assern.app.daemon.runtime_file import DaemonRecord, NotVerified, Verified


def test_a_running_instance_that_answers_is_ok() -> None:
    assert lines(daemon_answers(facts(instance=instance()))) == [
        ("ok", "daemon.answers", f"the instance at {RUN}/assern.ctl (pid 4242) answers, up 61 s")
    ]


def test_no_instance_is_fine_and_says_the_next_start_makes_one() -> None:
    found = daemon_answers(
        facts(
            candidates=("assern",),
            slots=(SlotFact(name="other", control=RUN / "other.ctl", liveness="live"),),
        )
    )
    assert lines(found) == [
        (
            "ok",
            "daemon.answers",
            "no instance runs for this configuration (the next `assern serve` starts one)",
        )
    ]


def test_an_instance_that_answers_hello_but_not_status_fails() -> None:
    found = daemon_answers(facts(instance=instance(status=None, status_error="timed out")))
    assert lines(found) == [
        ("fail", "daemon.answers", "the instance (pid 4242) answers hello, not status: timed out")
    ]


def test_a_hung_or_stale_socket_of_this_configuration_is_found() -> None:
    slots = (
        SlotFact(name="assern", control=RUN / "assern.ctl", liveness="live", error="timed out"),
        SlotFact(name="assern-3f9a0c1b2d4e", control=RUN / "assern-3f9a0c1b2d4e.ctl", liveness="stale"),
        SlotFact(name="work", control=RUN / "work.ctl", liveness="stale"),  # another configuration's
    )
    found = daemon_answers(facts(slots=slots, candidates=("assern", "assern-3f9a0c1b2d4e")))
    assert found == [
        Finding(
            "daemon.answers",
            Status.FAIL,
            f"{RUN}/assern.ctl accepts connections but does not answer: timed out",
            f"lsof -t {RUN}/assern.ctl | xargs kill",
        ),
        Finding(
            "daemon.answers",
            Status.WARN,
            f"{RUN}/assern-3f9a0c1b2d4e.ctl is left from an instance that is gone "
            "(the next start removes it)",
            f"rm -f {RUN}/assern-3f9a0c1b2d4e.ctl {RUN}/assern-3f9a0c1b2d4e.sock",
        ),
    ]


def test_several_matching_instances_are_a_warning() -> None:
    found = daemon_answers(facts(matches=2, flags=("--project", "work")))
    assert found[0].status is Status.WARN
    assert found[0].fix == "assernctl status --all --project work"


def test_without_sharing_or_a_socket_folder_there_is_nothing_to_ask() -> None:
    assert daemon_answers(facts(sharing=False))[0].summary.startswith("instance sharing is off")
    assert daemon_answers(facts(run_dir=None, run_dir_error="too long")) == []


def test_the_build_is_compared_in_one_function() -> None:
    """The daemon says its build id; an instance of one configuration only its version."""
    here = facts()
    assert same_build({"version": "1.2.0"}, here)
    assert not same_build({"version": "1.1.0"}, here)
    assert not same_build({}, here)
    assert same_build({"version": "1.2.0", "build": "1.2.0+3f9a1c2b4d5e"}, here)
    assert not same_build({"version": "1.2.0", "build": "1.2.0+000000000000"}, here)
    assert lines(daemon_build(facts(instance=instance()))) == [
        ("ok", "daemon.build", "the instance runs the installed build (1.2.0)")
    ]
    old = daemon_build(facts(instance=instance(version="1.1.0")))
    assert old[0].status is Status.WARN
    assert old[0].summary.startswith("the instance (pid 4242) runs assern 1.1.0, the installed one is 1.2.0")
    assert old[0].fix == "assernctl shutdown"
    assert daemon_build(facts()) == []


def test_a_daemon_of_another_build_of_the_same_version_is_not_the_installed_one() -> None:
    daemon = instance(hello={"pid": 4242, "version": "1.2.0", "build": "1.2.0+000000000000"})
    found = daemon_build(facts(instance=daemon))
    assert lines(found) == [
        (
            "warn",
            "daemon.build",
            "the instance (pid 4242) runs assern 1.2.0+000000000000, the installed one is "
            "1.2.0+3f9a1c2b4d5e: its clients get the old code until it stops",
        )
    ]


RUNTIME_FILE = RUN / "daemon.json"
RECORD = DaemonRecord(pid=4242, started_at=1.0, build="1.2.0+3f9a1c2b4d5e", protocol=2, cookie="c")
DAEMON_SLOT = SlotFact(name="daemon", control=RUN / "daemon.ctl", liveness="live", hello={"pid": 4242})


def test_the_runtime_file_of_the_running_daemon_is_ok() -> None:
    found = daemon_runtime(facts(runtime=Verified(RUNTIME_FILE, RECORD, {"pid": 4242})))
    assert lines(found) == [
        (
            "ok",
            "daemon.runtime",
            f"{RUNTIME_FILE} names the running daemon (pid 4242, build 1.2.0+3f9a1c2b4d5e)",
        )
    ]


def test_a_stale_runtime_file_is_a_warning_with_its_removal() -> None:
    stale = NotVerified(RUNTIME_FILE, f"{RUNTIME_FILE} is stale: pid 4242 no longer runs")
    found = daemon_runtime(facts(runtime=stale))
    assert found == [
        Finding(
            "daemon.runtime",
            Status.WARN,
            f"{RUNTIME_FILE} is stale: pid 4242 no longer runs; it never passes for the daemon "
            "(the next daemon rewrites it)",
            f"rm -f {RUNTIME_FILE}",
        )
    ]


def test_no_runtime_file_matters_only_when_a_daemon_answers() -> None:
    none = NotVerified(RUNTIME_FILE, "there is no runtime file", found=False)
    assert daemon_runtime(facts(runtime=none)) == []
    assert daemon_runtime(facts()) == []
    found = daemon_runtime(facts(runtime=none, slots=(DAEMON_SLOT,)))
    assert lines(found) == [
        (
            "warn",
            "daemon.runtime",
            f"the daemon (pid 4242) answers but wrote no runtime file ({RUNTIME_FILE})",
        )
    ]


def test_healthy_backends_give_one_ok_line_per_check() -> None:
    running = facts(
        instance=instance(backend("a"), backend("b", "lazy", tools=0), backend("c", "starting", restarts=1))
    )
    assert lines(backend_failed(running) + backend_crash_loop(running) + backend_no_tools(running)) == [
        ("ok", "backend.failed", "no backend failed (3 backend(s))"),
        ("ok", "backend.crash_loop", "no backend keeps crashing (3 backend(s))"),
        ("ok", "backend.no_tools", "every ready backend serves tools (3 backend(s))"),
    ]


def test_each_backend_problem_has_its_id_and_fix() -> None:
    running = facts(
        instance=instance(
            backend("gone", "failed", restarts=5, last_error="server 'gone' exited with code 1: boom"),
            backend("loop", "restarting", restarts=4, last_exit="exited with code 3"),
            backend("empty", tools=0, resources=2),
        ),
        flags=("--config", "c.toml"),
    )
    assert backend_failed(running) == [
        Finding(
            "backend.failed",
            Status.FAIL,
            "server 'gone' failed, out of restarts (5): exited with code 1: boom",
            "assernctl logs --server gone -n 50; assernctl restart gone --config c.toml",
        )
    ]
    assert backend_crash_loop(running) == [
        Finding(
            "backend.crash_loop",
            Status.FAIL,
            "server 'loop' keeps crashing (4 restarts): exited with code 3",
            "assernctl logs --server loop -n 50; assernctl stop loop --config c.toml",
        )
    ]
    assert backend_no_tools(running) == [
        Finding(
            "backend.no_tools",
            Status.WARN,
            "server 'empty' is up and lists no tools (2 resources)",
            "assernctl config explain empty --config c.toml",
        )
    ]


def test_server_narrows_the_backend_checks_and_no_instance_gives_none() -> None:
    running = instance(backend("gone", "failed"), backend("fine"))
    assert lines(backend_failed(facts(instance=running, server="fine"))) == [
        ("ok", "backend.failed", "no backend failed (1 backend(s))")
    ]
    assert backend_failed(facts()) == []
    assert backend_no_tools(facts(instance=instance(status=None, status_error="x"))) == []


def http(address: str, answer: str, detail: str = "") -> HttpFact:
    bind = parse_bind(address)
    return HttpFact(address=str(bind), port=bind.port, answer=answer, detail=detail)  # type: ignore[arg-type]  # each answer in turn


def with_http(address: str, fact: HttpFact | None, **changes: object) -> list[Finding]:
    listening = config("a", listen=ListenSpec(http=parse_bind(address)))
    return http_port(facts(config=listening, http=fact, **changes))


def test_the_http_port_is_free_ours_or_taken() -> None:
    assert lines(http_port(facts())) == [("ok", "http.port", "no HTTP front is configured ([listen] http)")]
    assert lines(with_http("0", None)) == [("ok", "http.port", "[listen] http = 127.0.0.1:0: any free port")]
    assert lines(with_http("8080", http("8080", "free"))) == [("ok", "http.port", "127.0.0.1:8080 is free")]
    ours = with_http("8080", http("8080", "assern"), instance=instance())
    assert lines(ours) == [("ok", "http.port", "127.0.0.1:8080 is served by assern (the instance, pid 4242)")]
    stray = with_http("8080", http("8080", "assern"))
    assert stray[0].status is Status.WARN
    taken = with_http("8080", http("8080", "other", "/healthz: 404, nginx"))
    assert taken == [
        Finding(
            "http.port",
            Status.FAIL,
            "127.0.0.1:8080 is taken by another program (/healthz: 404, nginx)",
            "lsof -nP -iTCP:8080 -sTCP:LISTEN",
        )
    ]
    unknown = with_http("8080", http("8080", "unknown", "Network is unreachable"))
    assert unknown[0].status is Status.WARN
    assert http_port(attrs.evolve(facts(), config=None)) == []
