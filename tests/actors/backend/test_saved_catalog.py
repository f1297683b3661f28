"""Saved listings: the key of a backend, the file's round trip, bad files, and an actor
that lists from its saved file before it starts and saves what it lists."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import pytest
import structlog.testing
import trio

from assern.actors.backend.actor import BackendActor
from assern.actors.backend.messages import BackendRequest
from assern.actors.backend.saved_catalog import (
    CatalogStore,
    NotSaved,
    backend_key,
    decode_listing,
    encode_listing,
)
from assern.actors.config.spec import CallRules, Provenance, ServerSpec
from assern.actors.identity import __version__
from assern.actors.router.catalog import BackendListing

SERVED = Provenance(layer="global-config", file="config.toml")


def server(**changes: Any) -> ServerSpec:
    base = ServerSpec(
        name="hand",
        transport="stdio",
        command="node",
        args=("server.js",),
        env={"TOKEN": "one", "PATH": "/usr/bin"},
        env_keys_from={"TOKEN": SERVED},
    )
    return attrs.evolve(base, **changes)


def listing(*names: str) -> BackendListing:
    return BackendListing(
        server="hand",
        tools=tuple(
            types.Tool(name=n, description=f"does {n}", input_schema={"type": "object"}) for n in names
        ),
        resources=(types.Resource(uri="test://info", name="info"),),
        templates=(types.ResourceTemplate(uri_template="test://{x}", name="x"),),
        prompts=(types.Prompt(name="hello"),),
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=True)),
        instructions="use it well",
    )


# ------------------------------------------------------------------------ the key


def test_the_key_is_what_reaches_the_process_not_the_name_or_the_view() -> None:
    key = backend_key(server())
    assert backend_key(server(name="other", allowed=("a",), rules=CallRules(read_only=True))) == key
    assert backend_key(server(timeout=5.0, idle_timeout=None, keep_alive=True)) == key
    # The inherited environment is the shell's, not the configuration's: not part of it.
    assert backend_key(server(env={"TOKEN": "one", "PATH": "/elsewhere"})) == key


@pytest.mark.parametrize(
    "changes",
    [
        {"command": "deno"},
        {"args": ("other.js",)},
        {"env": {"TOKEN": "two", "PATH": "/usr/bin"}},
        {"cwd": "/srv/project"},
        {"protocol": "2026-07-28"},
    ],
)
def test_anything_that_reaches_the_process_changes_the_key(changes: dict[str, Any]) -> None:
    assert backend_key(server(**changes)) != backend_key(server())


def test_a_remote_backend_is_keyed_by_url_and_headers_and_no_secret_is_in_the_key() -> None:
    remote = ServerSpec(name="r", transport="streamable-http", url="http://x/mcp", headers={"A": "secret-1"})
    other = attrs.evolve(remote, headers={"A": "secret-2"})
    assert backend_key(remote) != backend_key(other)
    assert "secret" not in backend_key(remote)
    assert backend_key(attrs.evolve(remote, url="http://y/mcp")) != backend_key(remote)


# ------------------------------------------------------------------ the document


def test_a_listing_survives_its_saved_form_with_the_current_view() -> None:
    viewed = server(name="renamed", allowed=("t1",), rules=CallRules(deny=("t2",)))
    doc = json.loads(json.dumps(encode_listing(listing("t1", "t2"))))
    back = decode_listing(doc, viewed)
    assert back == attrs.evolve(
        listing("t1", "t2"), server="renamed", allowed=("t1",), rules=CallRules(deny=("t2",))
    )


def test_the_view_is_not_saved() -> None:
    saved = encode_listing(attrs.evolve(listing("t1"), allowed=("t1",), rules=CallRules(read_only=True)))
    assert "allowed" not in saved
    assert "rules" not in saved
    assert "server" not in saved


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ([], "not a JSON object"),
        ({"format": 99}, "format 99, expected 1"),
        ({"format": 1, "assern": "0.0.1"}, "written by assern '0.0.1'"),
        ({"format": 1, "assern": __version__, "tools": "x"}, "not a saved listing"),
        ({"format": 1, "assern": __version__}, "not a saved listing"),
        (
            {**encode_listing(listing("t")), "tools": [{"name": 3}]},
            "not a saved listing (ValidationError)",
        ),
        ({**encode_listing(listing("t")), "instructions": 5}, "instructions is not a string"),
    ],
)
def test_a_document_that_is_not_a_saved_listing_is_refused_with_why(doc: object, why: str) -> None:
    with pytest.raises(NotSaved, match=why.replace("(", r"\(").replace(")", r"\)")):
        decode_listing(doc, server())


# ----------------------------------------------------------------------- the store


def test_the_store_round_trips_and_writes_a_private_file_once(tmp_path: Path) -> None:
    store = CatalogStore(tmp_path / "catalogs")
    assert store.load(server()) is None
    assert store.save(server(), listing("t1"))
    path = store.path(backend_key(server()))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not store.save(server(), listing("t1"))  # unchanged: not written again
    assert CatalogStore(tmp_path / "catalogs").load(server()) == listing("t1")
    assert store.save(server(), listing("t1", "t2"))
    assert CatalogStore(tmp_path / "catalogs").load(server()) == listing("t1", "t2")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_loaded_listing_that_is_listed_again_unchanged_is_not_rewritten(tmp_path: Path) -> None:
    CatalogStore(tmp_path).save(server(), listing("t1"))
    store = CatalogStore(tmp_path)
    assert store.load(server()) == listing("t1")
    assert not store.save(server(), listing("t1"))


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", json.dumps({"format": 1, "assern": "0.0.1"}).encode(), b"\xff\xfe"],
)
def test_a_corrupt_or_foreign_file_is_ignored_logged_and_rebuilt(tmp_path: Path, content: bytes) -> None:
    store = CatalogStore(tmp_path)
    path = store.path(backend_key(server()))
    path.write_bytes(content)
    with structlog.testing.capture_logs() as logs:
        assert store.load(server()) is None
    assert [(e["event"], e["server"]) for e in logs] == [("saved_catalog_ignored", "hand")]
    assert store.save(server(), listing("t1"))
    assert CatalogStore(tmp_path).load(server()) == listing("t1")


def test_a_folder_that_cannot_be_written_loses_nothing_but_the_file(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    store = CatalogStore(blocked / "catalogs")
    with structlog.testing.capture_logs() as logs:
        assert not store.save(server(), listing("t1"))
    assert [e["event"] for e in logs] == ["saved_catalog_not_written"]


# ------------------------------------------------------------------------ an actor

#: Answers initialize and tools/list with the tools named in argv[1] (comma-separated).
BACKEND = """
import json, sys
TOOLS = sys.argv[1].split(",")
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        info = {"name": "x", "version": "0"}
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}
    elif "id" in msg:
        result = {}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def real(tools: str) -> ServerSpec:
    return ServerSpec(
        name="hand",
        transport="stdio",
        command=sys.executable,
        args=("-c", BACKEND, tools),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        startup_timeout=20,
    )


def actor(spec: ServerSpec, store: CatalogStore) -> BackendActor:
    _send, inbox = trio.open_memory_channel[BackendRequest](1)
    return BackendActor(
        spec, inbox, on_change=lambda _name: None, on_notification=lambda _s, _n: None, catalogs=store
    )


async def test_an_actor_lists_its_saved_listing_before_it_starts_and_saves_what_it_lists(
    tmp_path: Path,
) -> None:
    spec = real("one,two")
    first = actor(spec, CatalogStore(tmp_path))
    assert first.listing is None
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            nursery.cancel_scope.cancel()
    listed: BackendListing | None = first.listing  # (mypy narrowed it to None above)
    assert listed is not None
    assert [t.name for t in listed.tools] == ["one", "two"]

    second = actor(spec, CatalogStore(tmp_path))  # a later run, nothing started yet
    assert second.listing is not None
    assert [t.name for t in second.listing.tools] == ["one", "two"]
    assert second.status.tools == 2
    assert second.status.state.value == "starting"
