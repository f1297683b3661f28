"""What status tells of sessions and backends, against real processes (the workstation
daemon, and a standalone instance): the roots each client reports, checked against its
folder, and when each backend was last busy or went dormant."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, server_table
from instances import Session, ctl, ctl_json, events, reap, serve_in, text_of, wait_until, workstation

pytestmark = pytest.mark.e2e
__all__ = ["reap"]  # the fixture: kills what a failing test left running


class Roots:
    """A client's roots, which the test changes under it."""

    def __init__(self, *folders: Path) -> None:
        self.folders = list(folders)

    async def __call__(self, context: Any) -> types.ListRootsResult:
        listed = [types.Root.model_validate({"uri": folder.as_uri()}) for folder in self.folders]
        return types.ListRootsResult(roots=listed)


async def sessions(env: AssernEnv, cwd: Path) -> dict[str, dict[str, Any]]:
    doc = await ctl_json(env, "status", cwd=cwd)
    return {s["cwd"]: s for s in doc["workstation"]["sessions"]}


async def test_each_sessions_roots_are_shown_and_checked_against_its_folder(assern_env: AssernEnv) -> None:
    inside, outside = assern_env.work / "inside", assern_env.work / "outside"
    elsewhere = assern_env.work / "elsewhere"
    for folder in (inside, outside, elsewhere):
        folder.mkdir()
    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    roots_in, roots_out = Roots(assern_env.work), Roots(elsewhere)
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            in_session = Session(serve_in(assern_env, inside), list_roots_callback=roots_in)
            out_session = Session(serve_in(assern_env, outside), list_roots_callback=roots_out)
            await nursery.start(in_session.run)
            client = await nursery.start(out_session.run)

            async def reported() -> dict[str, dict[str, Any]] | None:
                found = await sessions(assern_env, inside)
                done = all(s["roots"] and s["roots"]["roots"] is not None for s in found.values())
                return found if len(found) == 2 and done else None

            found = await wait_until_async(reported)
            assert found[str(inside)]["roots"] == {
                "supported": True,
                "roots": [assern_env.work.as_uri()],
                "error": None,
                "warning": None,
            }
            connection = found[str(outside)]["connection"]
            assert connection.startswith("socket-")
            warning = (
                f"working folder {outside} is outside the client's roots {elsewhere}: "
                f"this session is served the configuration of {outside}"
            )
            assert found[str(outside)]["roots"]["warning"] == warning
            readable = (await ctl(assern_env, "status", cwd=inside)).stdout.decode()
            assert f"! {found[str(outside)]['id']}: {warning}" in readable
            assert f"roots {assern_env.work}" in readable

            # The backend's own roots/list still reaches its calling client.
            assert text_of(await client.call_tool("alpha_ask_roots", {})) == elsewhere.as_uri()

            # The client's roots change: it says so, is asked again, and now agrees.
            roots_out.folders = [outside]
            await client.send_roots_list_changed()

            async def agreed() -> bool:
                found = await sessions(assern_env, inside)
                return bool(found[str(outside)]["roots"]["roots"] == [outside.as_uri()])

            await wait_until_async(agreed)
            found = await sessions(assern_env, inside)
            assert found[str(outside)]["roots"]["warning"] is None
            in_session.leave()
            out_session.leave()
    disagreed = events(assern_env, "session_roots_disagree")
    assert len(disagreed) == 1
    assert disagreed[0]["folder"] == str(outside)
    assert disagreed[0]["client"] == connection  # the log names the session's connection


async def wait_until_async(check: Any, limit: float = 20.0) -> Any:
    """Poll an async check until it returns something true (bounded)."""
    with trio.fail_after(limit):
        while not (found := await check()):  # noqa: ASYNC110 - another process: nothing to wait on
            await trio.sleep(0.1)
        return found


async def test_status_says_since_when_each_backend_is_idle_or_dormant_and_the_log_says_why(
    assern_env: AssernEnv,
) -> None:
    folder = assern_env.work / "app"
    folder.mkdir()
    (assern_env.assern_home / "config.toml").write_text(
        "[settings]\nidle_timeout = 1\n\n"
        + server_table("alpha")
        + server_table("browser")
        + "keep_alive = true\n"
    )
    with trio.fail_after(90):
        async with workstation(assern_env), trio.open_nursery() as nursery:
            session = Session(serve_in(assern_env, folder))
            client = await nursery.start(session.run)
            before = time.time()
            assert text_of(await client.call_tool("alpha_echo", {"text": "once"})) == "once"
            assert text_of(await client.call_tool("browser_echo", {"text": "once"})) == "once"
            await wait_until(lambda: events(assern_env, "backend_sleep", server="alpha"), limit=20)

            async def settled() -> dict[str, dict[str, Any]] | None:
                doc = await ctl_json(assern_env, "status", cwd=folder)
                shared = {b["name"]: b for b in doc["workstation"]["backends"]}
                return shared if shared["alpha"]["state"] == "dormant" else None

            shared = await wait_until_async(settled)
            alpha, browser = shared["alpha"], shared["browser"]
            assert before <= alpha["idle_since"] <= alpha["dormant_since"] <= time.time()
            assert browser["state"] == "ready"
            assert browser["dormant_since"] is None
            assert before <= browser["idle_since"] <= time.time()
            readable = (await ctl(assern_env, "status", cwd=folder)).stdout.decode()
            assert "dormant since " in readable
            assert "idle " in readable
            # The view's own status says the same of its backends.
            view = {b["name"]: b for b in (await ctl_json(assern_env, "status", cwd=folder))["backends"]}
            assert view["alpha"]["dormant_since"] == alpha["dormant_since"]
            session.leave()
    [idle] = events(assern_env, "backend_idle", server="alpha")
    assert idle["idle_timeout_s"] == 1
    assert idle["idle_s"] >= 1
    assert idle["calls_total"] >= 1
    [sleep] = events(assern_env, "backend_sleep", server="alpha")
    assert sleep["reason"] == "idle_timeout"
    assert len(sleep["views"]) == 1
    assert sleep["idle_s"] >= 1


async def test_a_standalone_instances_clients_show_their_roots(assern_env: AssernEnv, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(server_table("alpha"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            session = Session(assern_env.serve(config), list_roots_callback=Roots(elsewhere))
            await nursery.start(session.run)

            async def reported() -> dict[str, Any] | None:
                doc = await ctl_json(assern_env, "status", "--config", str(config))
                [client] = doc["clients"]
                return client if client["roots"]["roots"] is not None else None

            client = await wait_until_async(reported)
            assert client["roots"]["roots"] == [elsewhere.as_uri()]
            assert client["roots"]["warning"] == (
                f"working folder {assern_env.work} is outside the client's roots {elsewhere}: "
                f"this session is served the configuration of {assern_env.work}"
            )
            readable = (await ctl(assern_env, "status", "--config", str(config))).stdout.decode()
            assert f"roots {elsewhere}" in readable
            assert f"! {client['id']}: working folder {assern_env.work} is outside" in readable
            session.leave()
