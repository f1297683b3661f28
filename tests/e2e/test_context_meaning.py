"""The context server ranks by meaning too when the `assern[semantic]` extra is installed:
through `assern serve`, `code_semantic_search` finds a file that shares no word with the
question (no term in common: checked here), which the words alone cannot find; and
`assernctl context status` and `assernctl status` say where the vectors stand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv
from instances import ctl, daemon, err, out, reap, wait_until  # noqa: F401 - reap: autouse fixture
from mcp import Client

from assern.context.terms import Terms

pytest.importorskip("wordllama")
pytestmark = pytest.mark.e2e

PROJECT = {
    "weather.py": (
        "def forecast_rain(city):\n"
        '    """Predict precipitation for a city from the barometer readings."""\n'
        "    return barometer(city).pressure < 1000\n"
    ),
    "music.py": (
        "def play_song(track):\n"
        '    """Send the audio track to the speakers."""\n'
        "    speakers.write(track.samples)\n"
    ),
    "refunds.py": (
        "def reimburse_purchase(order, amount):\n"
        '    """Give the buyer their payment back when an order is returned."""\n'
        "    ledger.credit(order.buyer, amount)\n"
    ),
    "graphics.py": (
        "def draw_circle(canvas, radius):\n"
        '    """Paint a round shape on the canvas."""\n'
        "    canvas.arc(0, 0, radius)\n"
    ),
}
QUESTION = "will it storm tomorrow"


def test_the_question_shares_no_word_with_its_answer() -> None:
    terms = Terms()
    assert set(terms.terms(QUESTION)).isdisjoint(terms.terms("weather.py " + PROJECT["weather.py"]))


async def test_semantic_search_finds_by_meaning_a_file_sharing_no_word(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    for name, text in PROJECT.items():
        (assern_env.work / name).write_text(text)
    config = write_config('[servers.code]\nbuiltin = "context"\n')
    async with Client(assern_env.serve(config), mode="legacy") as client:
        with trio.fail_after(60):
            while True:
                result = await client.call_tool("code_semantic_search", {"query": QUESTION})
                assert result.is_error is False
                found: dict[str, Any] | None = result.structured_content
                assert found is not None
                if found["index"] == {"files": 4, "pending": 0}:  # vectors included
                    break
                await trio.sleep(0.1)  # indexed by another process: nothing to wait on
    assert found["results"][0]["path"] == "weather.py"
    assert found["results"][0]["symbol"] == "forecast_rain"


async def test_the_status_says_where_the_vectors_stand(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    for name, text in PROJECT.items():
        (assern_env.work / name).write_text(text)
    config = write_config('[servers.code]\nbuiltin = "context"\nroot = "work"\n')
    at = ("--config", str(config))

    async def vectors() -> Any:
        done = await ctl(assern_env, "context", "status", "--json", *at)
        assert done.returncode == 0, err(done)
        return json.loads(done.stdout)["servers"][0].get("vectors")

    async with daemon(assern_env, *at):
        with trio.fail_after(60):
            while (found := await vectors()) is None or found["state"] != "current":  # noqa: ASYNC110
                await trio.sleep(0.2)  # another process's state: nothing to wait on
        assert found == {
            "state": "current", "chunks": 4, "pending_chunks": 0, "pending_files": 0, "dimensions": 64
        }  # fmt: skip
        done = await ctl(assern_env, "context", "status", *at)
        assert "  vectors   4 chunks with a vector, none waiting (ranked by words and meaning)\n" in out(done)
        done = await ctl(assern_env, "status", *at)
        line = "code: index 4 files, 4 chunks, 0 pending, watcher watching, vectors current; current"
        assert line in out(done)

        # a file saved: its chunk alone waits, then has its vector
        (assern_env.work / "extra.py").write_text("def bake_bread(oven):\n    return oven.heat(220)\n")
        with trio.fail_after(60):
            while (found := await vectors())["chunks"] != 5 or found["state"] != "current":  # noqa: ASYNC110
                await trio.sleep(0.2)
        assert found["pending_chunks"] == 0
