"""The roots a client reports: asked after `initialized`, kept per connection, checked.

The pure parts (parsing, and the folder check of roots_check.py) directly; the asking on a virtual clock
(the timeout holds nothing); and over a real connection with raw JSON lines: nothing
the client asked for waits on our question, and a backend's own `roots/list` still
reaches the calling client without mixing with ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from fake_backend import Wire, setup

from assern.actors.config.spec import ResolvedConfig, Settings
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.roots import ROOTS_TIMEOUT, ClientRoots, parse_roots
from assern.actors.listener.roots_check import SessionFolder, config_folder, disagreement, root_folder
from assern.actors.listener.session import ClientConnection

LIMIT = 30  # a guard against a hung test, never an assertion about speed
PROJECT = SessionFolder(path="/srv/app", kind="project root")


def listed(*uris: str) -> dict[str, Any]:
    return {"roots": [{"uri": uri} for uri in uris]}


# ------------------------------------------------------------------- pure parts


def test_roots_are_parsed_from_a_list_roots_result() -> None:
    result = {"roots": [{"uri": "file:///srv/app", "name": "app"}, {"uri": "file:///tmp"}]}
    assert parse_roots(result) == ("file:///srv/app", "file:///tmp")
    assert parse_roots({"roots": []}) == ()


@pytest.mark.parametrize(
    ("result", "said"),
    [
        ({}, "roots: Field required"),
        ({"roots": "file:///x"}, "roots: Input should be a valid list"),
        ({"roots": [{"name": "no uri"}]}, "roots.0.uri: Field required"),
        ([1, 2], "Input should be a valid dictionary"),
    ],
)
def test_a_result_that_is_no_roots_says_what_is_wrong(result: Any, said: str) -> None:
    with pytest.raises(ValueError, match="^" + said):
        parse_roots(result)


@pytest.mark.parametrize(
    ("uri", "folder"),
    [
        ("file:///srv/app", "/srv/app"),
        ("file://localhost/srv/my%20app", "/srv/my app"),
        ("file://otherhost/srv", None),
        ("https://example.com/repo", None),
        ("file:relative", None),
    ],
)
def test_a_root_names_a_local_folder_only_as_a_file_uri(uri: str, folder: str | None) -> None:
    found = root_folder(uri)
    assert (str(found) if found is not None else None) == folder


@pytest.mark.parametrize(
    "roots",
    [
        ("file:///srv/app",),
        ("file:///srv",),
        ("file:///elsewhere", "file:///srv/"),
        (),  # no roots named: nothing to disagree with
    ],
)
def test_a_folder_inside_some_root_agrees(roots: tuple[str, ...]) -> None:
    assert disagreement(PROJECT, roots) is None


def test_a_folder_outside_every_root_is_a_warning_that_says_which_configuration_serves() -> None:
    roots = ("file:///srv/app-old", "file:///home/me/notes", "https://example.com/repo")
    assert disagreement(PROJECT, roots) == (
        "project root /srv/app is outside the client's roots /srv/app-old, /home/me/notes, "
        "https://example.com/repo: this session is served the configuration of /srv/app"
    )


def test_the_folder_of_a_configuration_is_its_project_root_else_its_working_folder() -> None:
    bare = ResolvedConfig(settings=Settings(), servers={}, project=None, files=())
    assert config_folder(bare) is None
    in_folder = ResolvedConfig(settings=Settings(), servers={}, project=None, files=(), cwd=Path("/w/x"))
    assert config_folder(in_folder) == SessionFolder(path="/w/x", kind="working folder")
    in_project = ResolvedConfig(
        settings=Settings(), servers={}, project="w", files=(), cwd=Path("/w/x/src"), local_root=Path("/w/x")
    )
    assert config_folder(in_project) == SessionFolder(path="/w/x", kind="project root")


def test_only_a_client_that_declares_roots_offers_them() -> None:
    roots = ClientRoots(PROJECT)
    for capabilities in (None, {}, {"roots": True}, "roots"):
        roots.declared(capabilities)
        assert not roots.supported
    roots.declared({"roots": {"listChanged": True}})
    assert roots.supported
    roots.declared({"roots": {}})
    assert roots.supported


# ----------------------------------------------------------- asking (virtual time)


class Client:
    """A client's answers to roots/list, one per question, and the questions it got."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        assert method == "roots/list"
        self.asked += 1
        answer = self.answers.pop(0)
        if answer == "silent":
            await trio.sleep_forever()
        if isinstance(answer, Exception):
            raise answer
        await trio.sleep(1)
        result: dict[str, Any] = answer
        return result


async def asked(roots: ClientRoots, client: Client) -> None:
    async with trio.open_nursery() as nursery:
        roots.refresh(nursery, client.ask)


async def test_a_client_that_never_answers_holds_nothing(autojump_clock: trio.testing.MockClock) -> None:
    roots = ClientRoots(PROJECT)
    roots.declared({"roots": {}})
    client = Client("silent")
    with trio.fail_after(LIMIT), structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            started = trio.current_time()
            roots.refresh(nursery, client.ask)
            assert trio.current_time() == started  # refresh itself waits for nothing
        assert trio.current_time() - started == ROOTS_TIMEOUT
    assert roots.roots is None
    assert roots.error == f"no answer to roots/list within {ROOTS_TIMEOUT:g} s"
    assert {"event": "session_roots_unknown", "error": roots.error, "log_level": "warning"} in logs


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            RpcError(-32601, "Method not found"),
            "roots/list was answered with an error: -32601 Method not found",
        ),
        ({"roots": [{"name": "x"}]}, "roots/list was answered with something else than roots: roots.0.uri"),
    ],
)
async def test_an_error_or_garbage_is_noted_not_fatal(
    autojump_clock: trio.testing.MockClock, answer: Any, error: str
) -> None:
    roots = ClientRoots(PROJECT)
    roots.declared({"roots": {}})
    with trio.fail_after(LIMIT):
        await asked(roots, Client(answer))
    assert roots.error is not None
    assert roots.error.startswith(error)
    assert roots.document()["roots"] is None
    # The next report is taken as usual.
    with trio.fail_after(LIMIT):
        await asked(roots, Client(listed("file:///srv")))
    assert roots.document() == {"supported": True, "roots": ["file:///srv"], "error": None, "warning": None}


async def test_a_client_that_does_not_offer_roots_is_never_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    roots = ClientRoots(PROJECT)
    client = Client(listed("file:///srv"))
    with trio.fail_after(LIMIT):
        await asked(roots, client)
    assert client.asked == 0
    assert roots.document() == {"supported": False, "roots": None, "error": None, "warning": None}


async def test_changes_while_asking_make_one_more_question(autojump_clock: trio.testing.MockClock) -> None:
    roots = ClientRoots(PROJECT)
    roots.declared({"roots": {"listChanged": True}})
    client = Client(listed("file:///a"), listed("file:///srv"))
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            for _ in range(3):  # reported before the question went out: one question
                roots.refresh(nursery, client.ask)
            await trio.testing.wait_all_tasks_blocked()
            assert client.asked == 1
            for _ in range(3):  # three changes reported while it is out: one more
                roots.refresh(nursery, client.ask)
    assert client.asked == 2
    assert roots.roots == ("file:///srv",)


async def test_a_disagreement_is_logged_once_until_it_changes(autojump_clock: trio.testing.MockClock) -> None:
    roots = ClientRoots(PROJECT)
    roots.declared({"roots": {"listChanged": True}})
    reports = [listed("file:///x"), listed("file:///x"), listed("file:///y"), listed("file:///srv")]
    client = Client(*reports)
    with trio.fail_after(LIMIT), structlog.testing.capture_logs() as logs:
        for _ in reports:
            await asked(roots, client)
            if roots.roots == ("file:///x",):
                assert roots.warning is not None
                assert roots.warning.startswith("project root /srv/app is outside the client's roots /x:")
    disagreeing = [entry for entry in logs if entry["event"] == "session_roots_disagree"]
    assert [entry["roots"] for entry in disagreeing] == [["file:///x"], ["file:///y"]]
    assert disagreeing[0]["folder"] == "/srv/app"
    assert roots.warning is None


# ------------------------------------------------------------ over a connection


@contextlib.asynccontextmanager
async def connection(folder: SessionFolder | None = PROJECT) -> AsyncIterator[tuple[Wire, ClientConnection]]:
    parts = setup("echo", "roots", "gate")
    ours, theirs = trio.socket.socketpair()
    client = trio.SocketStream(ours)
    served = ClientConnection("test-1", parts.shared, folder=folder)

    async def run(stream: trio.SocketStream) -> None:
        async with stream:
            await served.serve(stream, stream)

    with trio.fail_after(LIMIT):
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            nursery.start_soon(run, trio.SocketStream(theirs))
            yield Wire(client, client), served
            nursery.cancel_scope.cancel()


def initialize(roots: bool) -> dict[str, Any]:
    capabilities = {"roots": {"listChanged": True}} if roots else {}
    return {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "c", "version": "1"},
    }


async def test_the_client_is_asked_after_initialized_and_nothing_waits_for_its_answer() -> None:
    async with connection() as (wire, served):
        assert "result" in await wire.ask(0, "initialize", initialize(roots=True))
        await wire.notify("notifications/initialized")
        question = await wire.next()
        assert question["method"] == "roots/list"
        # Unanswered, it holds nothing the client asks for.
        answer = await wire.ask(1, "tools/call", {"name": "a_echo", "arguments": {"text": "meanwhile"}})
        assert answer["result"]["content"][0]["text"] == "meanwhile"
        assert served.roots.document()["roots"] is None
        await wire.send({"jsonrpc": "2.0", "id": question["id"], "result": listed("file:///elsewhere")})
        # A ping answered after the roots answer means the roots answer was taken.
        assert (await wire.ask(2, "ping"))["result"] == {}
        doc = served.roots.document()
        assert doc["roots"] == ["file:///elsewhere"]
        assert doc["warning"] == (
            "project root /srv/app is outside the client's roots /elsewhere: "
            "this session is served the configuration of /srv/app"
        )
        # They changed: asked again.
        await wire.notify("notifications/roots/list_changed")
        question = await wire.next()
        assert question["method"] == "roots/list"
        await wire.send({"jsonrpc": "2.0", "id": question["id"], "result": listed("file:///srv")})
        assert (await wire.ask(3, "ping"))["result"] == {}
        assert served.roots.document()["roots"] == ["file:///srv"]
        assert served.roots.warning is None


async def test_a_client_without_roots_is_not_asked() -> None:
    async with connection() as (wire, served):
        await wire.ask(0, "initialize", initialize(roots=False))
        await wire.notify("notifications/initialized")
        await wire.notify("notifications/roots/list_changed")
        # The next line is the ping's answer: no question came first.
        assert await wire.ask(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert served.roots.document()["supported"] is False


async def test_a_backends_roots_request_and_ours_do_not_mix() -> None:
    async with connection() as (wire, served):
        await wire.ask(0, "initialize", initialize(roots=True))
        await wire.notify("notifications/initialized")
        ours = await wire.next()
        assert ours["method"] == "roots/list"
        await wire.request(1, "tools/call", {"name": "a_roots", "arguments": {}})
        backends = await wire.next()
        assert backends["method"] == "roots/list"
        assert backends["id"] != ours["id"]
        # Answered in the other order, each answer reaches its own asker.
        await wire.send({"jsonrpc": "2.0", "id": backends["id"], "result": listed("file:///for-the-backend")})
        answer = await wire.next()
        assert answer["id"] == 1
        assert answer["result"]["content"][0]["text"] == "file:///for-the-backend"
        await wire.send({"jsonrpc": "2.0", "id": ours["id"], "result": listed("file:///srv/app")})
        assert (await wire.ask(2, "ping"))["result"] == {}
        assert served.roots.document() == {
            "supported": True,
            "roots": ["file:///srv/app"],
            "error": None,
            "warning": None,
        }
