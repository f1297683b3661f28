"""Where each client keeps its files, on Linux and macOS, with and without HOME."""

from __future__ import annotations

from pathlib import Path

from assern.app.ctl.clients.locations import CLIENTS, find_places, project_root

HOME = Path("/home/me")
CWD = Path("/home/me/work/app/src")


def _paths(
    environ: dict[str, str], system: str, existing: frozenset[Path] = frozenset()
) -> dict[str, list[str]]:
    places = find_places(
        environ,
        CWD,
        system=system,
        exists=lambda p: p in existing,
        is_dir=lambda p: p == Path("/home/me/work/app/.git"),
    )
    found: dict[str, list[str]] = {}
    for location in places.locations:
        found.setdefault(location.client, []).append(
            f"{location.scope}:{location.path}:{'.'.join(location.key)}"
        )
    return found


def test_linux_locations() -> None:
    found = _paths({"HOME": str(HOME)}, "linux")
    assert list(found) == list(CLIENTS)
    assert found["claude-code"] == [
        "user:/home/me/.claude.json:mcpServers",
        "project:/home/me/.claude.json:projects./home/me/work/app.mcpServers",
        "project:/home/me/work/app/.mcp.json:mcpServers",
    ]
    assert found["claude-desktop"] == ["user:/home/me/.config/Claude/claude_desktop_config.json:mcpServers"]
    assert found["cursor"] == [
        "user:/home/me/.cursor/mcp.json:mcpServers",
        "project:/home/me/work/app/.cursor/mcp.json:mcpServers",
    ]
    assert found["vscode"] == [
        "user:/home/me/.config/Code/User/mcp.json:servers",
        "user:/home/me/.config/Code - Insiders/User/mcp.json:servers",
        "project:/home/me/work/app/.vscode/mcp.json:servers",
    ]
    assert found["windsurf"] == ["user:/home/me/.codeium/windsurf/mcp_config.json:mcpServers"]
    assert found["codex"] == [
        "user:/home/me/.codex/config.toml:mcp_servers",
        "project:/home/me/work/app/.codex/config.toml:mcp_servers",
    ]
    assert found["gemini"] == [
        "user:/home/me/.gemini/settings.json:mcpServers",
        "project:/home/me/work/app/.gemini/settings.json:mcpServers",
    ]


def test_macos_locations() -> None:
    found = _paths({"HOME": str(HOME)}, "darwin")
    support = "/home/me/Library/Application Support"
    assert found["claude-desktop"] == [f"user:{support}/Claude/claude_desktop_config.json:mcpServers"]
    assert found["vscode"][0] == f"user:{support}/Code/User/mcp.json:servers"


def test_the_clients_own_variables_move_their_files() -> None:
    environ = {
        "HOME": str(HOME),
        "CLAUDE_CONFIG_DIR": "/cfg/claude",
        "CODEX_HOME": "/cfg/codex",
        "GEMINI_CLI_HOME": "/cfg/gem",
        "XDG_CONFIG_HOME": "/cfg/xdg",
    }
    found = _paths(environ, "linux")
    assert found["claude-code"][0] == "user:/cfg/claude/.claude.json:mcpServers"
    assert found["codex"][0] == "user:/cfg/codex/config.toml:mcp_servers"
    assert found["gemini"][0] == "user:/cfg/gem/.gemini/settings.json:mcpServers"
    assert found["claude-desktop"] == ["user:/cfg/xdg/Claude/claude_desktop_config.json:mcpServers"]


def test_the_nearest_project_file_wins_up_to_the_project_root() -> None:
    found = _paths({"HOME": str(HOME)}, "linux", frozenset({Path("/home/me/work/app/src/.cursor/mcp.json")}))
    assert found["cursor"][1] == "project:/home/me/work/app/src/.cursor/mcp.json:mcpServers"
    assert found["gemini"][1] == "project:/home/me/work/app/.gemini/settings.json:mcpServers"


def test_without_home_only_the_project_files_are_looked_for() -> None:
    places = find_places({}, CWD, system="linux", exists=lambda p: False, is_dir=lambda p: False)
    assert {location.scope for location in places.locations} == {"project"}
    assert places.notes == ("HOME is not set: the clients' user-wide files were not looked for",)
    assert places.markers == {}


def test_a_project_in_the_home_folder_is_not_listed_twice() -> None:
    places = find_places(
        {"HOME": str(HOME)}, HOME, system="linux", exists=lambda p: True, is_dir=lambda p: False
    )
    paths = [location.path for location in places.locations if location.client == "cursor"]
    assert paths == [HOME / ".cursor" / "mcp.json"]


def test_project_root_is_the_git_work_tree() -> None:
    assert project_root(CWD, lambda p: p == Path("/home/me/work/app/.git")) == Path("/home/me/work/app")
    assert project_root(CWD, lambda p: False) == CWD
