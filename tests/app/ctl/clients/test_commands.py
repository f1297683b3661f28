"""`assernctl clients`, `import`, `wire` and `restore` on real files in a temporary HOME."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from clients_world import LITERAL_TOKEN, ClientWorld

from assern.actors.config.resolve import resolve_config
from assern.app.ctl.clients.locations import CLIENTS
from assern.app.ctl.clients.survey import survey_clients
from assern.app.ctl.parser import ctl_main


@pytest.fixture
def world(clients_world: ClientWorld, monkeypatch: pytest.MonkeyPatch) -> ClientWorld:
    for name in list(os.environ):
        if name in ("HOME", "ASSERN_HOME", "XDG_CONFIG_HOME") or name.endswith(("_HOME", "_CONFIG_DIR")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(clients_world.home))
    monkeypatch.chdir(clients_world.project)
    return clients_world


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = ctl_main(["clients", *args])
    out, err = capsys.readouterr()
    assert LITERAL_TOKEN not in out + err
    return code, out, err


def snapshot_files(paths: list[Path]) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in paths}


def test_every_client_is_listed_with_its_servers(
    world: ClientWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world.every_client()
    code, out, _ = run(capsys, "--json")
    assert code == 0
    document = json.loads(out)
    assert [c["name"] for c in document["clients"]] == list(CLIENTS)
    servers = {
        c["name"]: {s["name"]: (s["scope"], s["reach"], s["disabled"]) for s in c["servers"]}
        for c in document["clients"]
    }
    assert servers["claude-code"] == {
        "github": ("user", "bypass", False),
        "docs": ("user", "bypass", False),
        "scratch": ("project", "bypass", True),
        "notes": ("project", "bypass", False),
    }
    assert servers["vscode"] == {
        "perplexity": ("user", "bypass", False),
        "fetch": ("user", "bypass", False),
        "playwright": ("project", "bypass", False),
    }
    assert servers["windsurf"]["old"] == ("user", "bypass", True)
    assert servers["codex"]["search"] == ("user", "bypass", True)
    assert servers["gemini"] == {
        "github": ("user", "bypass", False),
        "stream": ("user", "bypass", True),
        "legacy": ("project", "bypass", False),
    }
    code, text, _ = run(capsys)
    assert "claude-code: does not reach assern" in text
    assert "    scratch: bypasses assern, disabled (command node)" in text


def test_import_wire_restore_round_trip_for_every_client(
    world: ClientWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    files = world.every_client()
    originals = snapshot_files([p for paths in files.values() for p in paths])
    code, out, err = run(capsys, "import", *CLIENTS)
    assert code == 0, err
    assert "clash: cursor's 'github' is not the 'github' of claude-code: added as 'github-cursor'" in err
    config = tomllib.loads((world.assern_home / "config.toml").read_text())
    servers = config["servers"]
    assert servers["github"]["env"] == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}
    assert servers["github-cursor"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${WORK_GITHUB_TOKEN}"}
    assert servers["old"] == {"command": "old-server", "deny": ["drop_all"], "disabled": True}
    assert servers["stream"]["disabled"] is True
    assert servers["sentry"]["headers"] == {"Authorization": "${SENTRY_AUTHORIZATION}"}
    assert servers["search"]["env"] == {"SEARCH_API_KEY": "${SEARCH_API_KEY}"}
    assert "price" in servers
    assert servers["price"]["args"] == ["--currency", "$$USD"]
    dotenv = (world.assern_home / ".env").read_text()
    assert f"GITHUB_TOKEN={LITERAL_TOKEN}" in dotenv
    assert "SENTRY_AUTHORIZATION='Bearer sntrys_literal_token_value_42'" in dotenv
    local = tomllib.loads((world.project / ".assern" / "config.toml").read_text())
    assert set(local["servers"]) == {"scratch", "notes", "db", "playwright", "legacy"}
    assert local["servers"]["db"]["args"] == ["--root", f"{world.project}/data"]
    assert local["servers"]["scratch"]["disabled"] is True
    assert f"next: `assernctl trust` in {world.project}" in out
    assert ctl_main(["trust", str(world.project), "--yes"]) == 0  # as the hint says
    capsys.readouterr()
    # the result loads with the runtime's own resolver
    environ = {
        **world.environ,
        "DOCS_TOKEN": "d",
        "NOTES_KEY": "n",
        "WORK_GITHUB_TOKEN": "w",
        "REMOTE_TOKEN": "r",
        "PERPLEXITY_KEY": "p",
    }
    resolved = resolve_config(
        config_path=None, project=None, cwd=world.project, environ=environ, assern_home=world.assern_home
    )
    assert "notes" in resolved.servers
    assert "github" in resolved.servers
    before = snapshot_files([world.assern_home / "config.toml", world.assern_home / ".env"])
    code, out, _ = run(capsys, "import", *CLIENTS)
    assert (code, out.splitlines()[-1]) == (
        0,
        f"nothing to import: assern has every server of {', '.join(CLIENTS)}",
    )
    assert snapshot_files(list(before)) == before

    for client in CLIENTS:
        code, out, err = run(capsys, "wire", client)
        assert code == 0, err
    survey = survey_clients(world.environ, world.project, assern_home=world.assern_home)
    for finding in survey.clients:
        assert finding.wired, finding.client
        assert {s.reach for s in finding.servers} == {"assern"}, finding.client
    codex = tomllib.loads(files["codex"][0].read_text())
    assert codex["model"] == "o3"
    assert codex["projects"] == {"/somewhere": {"trust_level": "trusted"}}
    assert codex["mcp_servers"]["assern"]["env"] == {"ASSERN_HOME": str(world.assern_home)}
    assert "GITHUB_TOKEN" not in codex["mcp_servers"]["assern"]["env_vars"]  # defined in .env
    assert "DOCS_TOKEN" in codex["mcp_servers"]["assern"]["env_vars"]
    vscode = files["vscode"][0].read_text()
    assert "// VS Code's MCP servers" in vscode
    assert '"inputs"' in vscode
    assert json.loads(files["claude-code"][0].read_text())["numStartups"] == 3
    wired = snapshot_files(list(originals))
    for client in CLIENTS:
        code, out, _ = run(capsys, "wire", client)
        assert (code, out.splitlines()[0]) == (
            0,
            f"{client}: nothing to change (it reaches assern, and assern runs none of its other entries)",
        )
    assert snapshot_files(list(originals)) == wired

    for client in CLIENTS:
        code, out, err = run(capsys, "restore", client)
        assert code == 0, err
    assert snapshot_files(list(originals)) == originals
    for client in CLIENTS:
        code, out, _ = run(capsys, "restore", client)
        assert code == 0
        assert "restored" not in out.replace("already as backed up", "")
    assert snapshot_files(list(originals)) == originals


def test_an_invalid_file_is_reported_and_left_untouched(
    world: ClientWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = world.write(".cursor/mcp.json", '{"mcpServers": {"a": {"command": "x"},}}')
    codex = world.write(".codex/config.toml", "[mcp_servers.a\ncommand = 1\n")
    code, out, _ = run(capsys, "--json")
    files = {f["path"]: f["error"] for c in json.loads(out)["clients"] for f in c["files"]}
    assert files[str(broken)].startswith("invalid JSON: ")
    assert "(at line 1, column " in files[str(broken)]
    assert files[str(codex)].startswith("invalid TOML: ")
    for client, path in (("cursor", broken), ("codex", codex)):
        before = path.read_bytes()
        code, _, err = run(capsys, "wire", client)
        assert code == 1
        assert f"{path}: invalid" in err
        assert "left untouched" in err
        assert path.read_bytes() == before
    assert not (world.assern_home / "backups").exists()


def test_a_read_only_file_and_a_symlinked_one(world: ClientWorld, capsys: pytest.CaptureFixture[str]) -> None:
    cursor, _ = world.cursor()
    run(capsys, "import", "cursor")
    cursor.chmod(0o444)
    code, _, err = run(capsys, "wire", "cursor")
    assert code == 1
    assert "read-only" in err
    cursor.chmod(0o644)
    real = world.home / "dotfiles" / "gemini.json"
    real.parent.mkdir()
    settings, _ = world.gemini()
    real.write_bytes(settings.read_bytes())
    settings.unlink()
    settings.symlink_to(real)
    original = real.read_bytes()
    assert run(capsys, "import", "gemini")[0] == 0
    assert run(capsys, "wire", "gemini")[0] == 0
    assert settings.is_symlink()
    assert "assern" in json.loads(real.read_text())["mcpServers"]
    assert run(capsys, "restore", "gemini")[0] == 0
    assert settings.is_symlink()
    assert real.read_bytes() == original


def test_a_second_wire_after_a_change_numbers_the_backup(
    world: ClientWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    desktop = world.claude_desktop()
    run(capsys, "import", "claude-desktop")
    run(capsys, "wire", "claude-desktop")
    run(capsys, "restore", "claude-desktop")
    desktop.write_text(desktop.read_text().replace("Ctrl+Space", "Alt+Space"))
    code, out, _ = run(capsys, "wire", "claude-desktop")
    assert code == 0
    folder = world.assern_home / "backups" / "clients" / "claude-desktop"
    assert len(os.listdir(folder)) == 2
    assert out.count(".json.1 (") == 1


def test_wire_keeps_what_assern_does_not_run(world: ClientWorld, capsys: pytest.CaptureFixture[str]) -> None:
    windsurf = world.windsurf()
    code, out, _ = run(capsys, "wire", "windsurf")
    assert code == 0
    data = json.loads(windsurf.read_text())
    assert set(data["mcpServers"]) == {"sentry", "old", "assern"}
    assert "kept (assern does not run it): sentry" in out


def test_no_home(
    world: ClientWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world.claude_code()
    monkeypatch.delenv("HOME")
    code, out, _ = run(capsys)
    assert code == 0
    assert "note: HOME is not set: the clients' user-wide files were not looked for" in out
    assert "notes: bypasses assern" in out
    assert "github" not in out
    code, _, err = run(capsys, "import", "claude-code")
    assert code == 2
    assert "neither HOME nor ASSERN_HOME is set" in err


def test_unknown_client_and_client_not_found(world: ClientWorld, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "wire", "emacs")
    assert code == 2
    assert "unknown client(s) emacs" in err
    code, _, err = run(capsys, "import", "windsurf")
    assert code == 1
    assert "not found here: windsurf" in err


def test_a_file_the_client_writes_during_wire_is_left_as_the_client_wrote_it(
    world: ClientWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cursor, _ = world.cursor()
    run(capsys, "import", "cursor")
    from assern.app.ctl.clients import wire
    from assern.app.ctl.clients.backup import take_backup as real_backup

    def client_writes_meanwhile(folder: Path, snap: Any) -> Any:
        cursor.write_text('{"mcpServers": {}}')
        return real_backup(folder, snap)

    monkeypatch.setattr(wire, "take_backup", client_writes_meanwhile)
    code, _, err = run(capsys, "wire", "cursor")
    assert code == 1
    assert "changed since it was read" in err
    assert cursor.read_text() == '{"mcpServers": {}}'
