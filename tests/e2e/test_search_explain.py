"""`assernctl search --explain`: why each tool ranks where it does, from the running
instance and from backends started for the search."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from harness import AssernEnv, server_table
from instances import (
    Session,
    ctl,
    ctl_json,
    err,
    out,
    reap,  # noqa: F401 - autouse fixture
)

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def serving(assern_env: AssernEnv, config: Path) -> AsyncIterator[None]:
    """A running instance of `config` whose client has listed the tools."""
    async with trio.open_nursery() as nursery:
        client = await nursery.start(Session(assern_env.serve(config)).run)
        await client.list_tools()
        yield
        nursery.cancel_scope.cancel()


async def test_the_running_instance_explains_its_answer(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    at = ("--config", str(config))
    with trio.fail_after(40):
        async with serving(assern_env, config):
            found = await ctl_json(assern_env, "search", *at, "--explain", "add", "two", "numbers")
            assert found["tools"][0]["name"] == "alpha_add"
            explained = found["explain"]["alpha_add"]
            assert explained["exact_name"] is False
            # the words' score, times the bonus of its name ("add") that the query asks for
            assert explained["name"] == {"terms": ["add"], "share": 1.0, "bonus": 0.25}
            named = 1 + explained["name"]["bonus"]
            assert explained["words_score"] * named == pytest.approx(found["tools"][0]["score"], abs=0.01)
            assert {term["term"] for term in explained["terms"]} >= {"add"}
            assert all(term["fields"] for term in explained["terms"])
            assert list(found["explain"]) == [tool["name"] for tool in found["tools"]]

            text = await ctl(assern_env, "search", *at, "--explain", "add", "two", "numbers")
            assert text.returncode == 0, err(text)
            lines = out(text).splitlines()
            assert any(line.startswith("alpha_add: words ") for line in lines)
            assert "  name: 100% of its words ['add'] asked for, score x1.25" in lines
            assert any(line.startswith("  'add': idf ") and "name x1" in line for line in lines)

            plain = await ctl_json(assern_env, "search", *at, "add", "two", "numbers")
            assert "explain" not in plain


async def test_backends_started_for_the_search_explain_it_too(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(40):
        found = await ctl_json(assern_env, "search", "--config", str(config), "--fresh", "--explain", "echo")
    assert found["tools"][0]["name"] == "alpha_echo"
    assert "echo" in {term["term"] for term in found["explain"]["alpha_echo"]["terms"]}


async def test_a_search_after_a_call_shows_the_lift(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    # alpha and beta run the same test server: their echo tools match "return text" alike
    config = write_config(server_table("alpha") + "\n" + server_table("beta"))
    at = ("--config", str(config))
    with trio.fail_after(60):
        async with serving(assern_env, config):
            for server in ("alpha", "beta"):
                found = await ctl_json(
                    assern_env, "search", *at, "--after", server, "--explain", "return text"
                )
                names = [tool["name"] for tool in found["tools"]]
                assert names[:2] == [f"{server}_echo", f"{server}_big"]
                lift = found["explain"][f"{server}_echo"]["session"]
                assert lift == {"after": server, "lifted": True, "factor": 2.0}
                other = "beta" if server == "alpha" else "alpha"
                assert found["explain"][f"{other}_echo"]["session"]["why"] == "another server"

            text = await ctl(assern_env, "search", *at, "--after", "beta", "--explain", "return text")
            assert text.returncode == 0, err(text)
            assert "  called last: 'beta', its tool: score x2.00" in out(text).splitlines()

            wrong = await ctl(assern_env, "search", *at, "--after", "gamma", "return text")
            assert wrong.returncode == 1
            assert "unknown server 'gamma' to search after (servers: alpha, beta)" in out(wrong) + err(wrong)

    with trio.fail_after(60):
        fresh = await ctl_json(assern_env, "search", *at, "--fresh", "--after", "alpha", "return text")
    assert [tool["name"] for tool in fresh["tools"]][:2] == ["alpha_echo", "alpha_big"]
