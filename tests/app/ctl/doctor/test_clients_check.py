"""clients.reach: what doctor says of each MCP client `assernctl clients` finds."""

from __future__ import annotations

from pathlib import Path

from doctor_facts import facts, lines

from assern.app.ctl.clients.formats import ClientServer
from assern.app.ctl.clients.locations import Location
from assern.app.ctl.clients.survey import Backends, ClientFinding, ServerFinding, Survey
from assern.app.ctl.doctor.checks.clients import clients_reach

CLAUDE = Location(
    client="claude-code", path=Path("/home/me/.claude.json"), scope="user", key=("mcpServers",), syntax="json"
)


def entry(name: str, reach: str, backend: str | None = None) -> ServerFinding:
    server = ClientServer(location=CLAUDE, name=name, entry={"command": name})
    return ServerFinding(server=server, reach=reach, backend=backend)  # type: ignore[arg-type]  # a literal


def survey(*servers: ServerFinding) -> Survey:
    client = ClientFinding(client="claude-code", files=(), servers=servers)
    return Survey(clients=(client,), backends=Backends())


def test_a_client_through_assern_is_ok_and_what_it_runs_beside_is_named() -> None:
    found = clients_reach(facts(clients=survey(entry("assern", "assern"), entry("notes", "bypass"))))
    assert lines(found) == [("ok", "clients.reach", "claude-code reaches assern; beside it: notes")]


def test_a_client_that_starts_assern_s_servers_itself_is_warned_with_the_wire_command() -> None:
    found = clients_reach(
        facts(clients=survey(entry("assern", "assern"), entry("gh", "duplicate", "github")))
    )
    assert lines(found) == [
        ("warn", "clients.reach", "claude-code starts assern's servers itself too: gh (= github)")
    ]
    assert found[0].fix == "assernctl clients wire claude-code"


def test_a_client_that_bypasses_assern_is_warned_with_import_and_wire() -> None:
    found = clients_reach(facts(clients=survey(entry("notes", "bypass"))))
    assert lines(found) == [
        ("warn", "clients.reach", "claude-code does not reach assern; its servers: notes")
    ]
    assert found[0].fix == "assernctl clients import claude-code && assernctl clients wire claude-code"


def test_no_client_found_is_ok_and_unreadable_clients_say_nothing() -> None:
    empty = Survey(clients=(), backends=Backends())
    assert lines(clients_reach(facts(clients=empty))) == [
        ("ok", "clients.reach", "no MCP client configuration found for this user and folder")
    ]
    assert clients_reach(facts()) == []
