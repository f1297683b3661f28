"""Conversions for `assernctl config import` and the original YAML layout."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import attrs
import pytest
from config_world import World

from assern.actors.config import sources
from assern.actors.config.model import ConfigFile, ServerConfig
from assern.actors.config.spec import ConfigError
from assern.actors.config.structure import structure
from assern.actors.config.yaml_layout import convert_global, convert_local, parse_yaml
from assern.app.ctl.config.convert import hide_literal_secrets, import_file, server_table, to_toml

ORIGINAL = {
    "projects": {
        "work": {
            "directories": ["~/work/*"],
            "env": {"GITHUB_TOKEN": "${WORK_GITHUB_TOKEN}", "PORT": 8080},
            "servers": {
                "github": {"merge_mode": "overlay", "env": {"DEBUG": True}, "work_dir": "~/w"},
                "api": {"url": "http://x/mcp", "transport": "http", "oauth": {"client_id": "c"}},
                "slack": {"disabled": True},
            },
        }
    },
    "settings": {"log_level": "info", "timeout": "60s", "naming": "hybrid"},
    "auth": {"corp": {"client_id": "c"}},
}


def test_convert_global_maps_the_original_layout() -> None:
    converted = convert_global(ORIGINAL, file="config.yaml")
    project = converted.document["projects"]["work"]
    assert project["env"] == {"GITHUB_TOKEN": "${WORK_GITHUB_TOKEN}", "PORT": "8080"}
    assert project["servers"]["github"] == {"merge_mode": "overlay", "env": {"DEBUG": "true"}, "cwd": "~/w"}
    assert project["servers"]["api"] == {"url": "http://x/mcp", "transport": "streamable-http"}
    assert converted.document["settings"] == {"naming": "hybrid"}
    assert converted.notes == (
        "dropped projects.work.servers.api.oauth: not supported by assern",
        "dropped settings.log_level: assern has no such setting",
        "dropped settings.timeout: assern has no such setting",
        "dropped auth: OAuth profiles are not supported",
    )
    # what comes out is a valid config (the project's servers override no global one here,
    # so the ones without command or url are reported by the file's cross-table rules)
    model = structure(converted.document, ConfigFile, file="config.yaml")
    assert model.projects["work"].overrides["api"].transport == "streamable-http"


def test_convert_keeps_unknown_keys_so_they_are_reported() -> None:
    converted = convert_global({"servers": {"a": {"command": "a", "comand": "b"}}}, file="config.yaml")
    with pytest.raises(ConfigError) as caught:
        structure(converted.document, ConfigFile, file="config.yaml")
    assert caught.value.problems == ("unknown key 'comand' (did you mean 'command'?) @ servers.a",)


def test_convert_local_drops_top_level_env_with_a_note() -> None:
    converted = convert_local(
        {"project": "work", "env": {"T": "secret"}, "servers": {"gh": {"env": {"T": "${X}"}}}},
        file=".assern/config.yaml",
    )
    assert converted.document == {"project": "work", "servers": {"gh": {"env": {"T": "${X}"}}}}
    assert converted.notes == ("dropped env: put these variables in .assern/.env",)
    assert "secret" not in repr(converted.notes)


def test_convert_rejects_a_document_that_is_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="expected a YAML mapping at the top level"):
        convert_global(["a"], file="config.yaml")
    assert convert_global(None, file="config.yaml").document == {}


def test_server_table_keeps_only_what_is_set() -> None:
    config = ServerConfig(command="npx", args=("-y", "x"), env={"A": "1"}, disabled=False)
    assert server_table(config) == {
        "command": "npx",
        "args": ["-y", "x"],
        "env": {"A": "1"},
        "disabled": False,
    }


def test_hide_literal_secrets_keeps_references() -> None:
    document: dict[str, Any] = {
        "servers": {
            "a": {
                "command": "a",
                "env": {"REF": "${TOKEN}", "SHORT": "$TOKEN", "LIT": "s3cret-value", "DOLLAR": "$$5"},
                "headers": {"Authorization": "Bearer ${T}", "X-Key": "literal-key"},
            }
        },
        "projects": {"p": {"env": {"P": "project-secret"}, "servers": {"a": {"env": {"Q": "q-secret"}}}}},
    }
    hidden, count = hide_literal_secrets(document)
    assert count == 5
    assert hidden["servers"]["a"]["env"] == {
        "REF": "${TOKEN}",
        "SHORT": "$TOKEN",
        "LIT": "s3…(redacted)",
        "DOLLAR": "…(redacted)",
    }
    assert hidden["servers"]["a"]["headers"] == {"Authorization": "Bearer ${T}", "X-Key": "li…(redacted)"}
    assert hidden["projects"]["p"]["env"] == {"P": "pr…(redacted)"}
    assert hidden["projects"]["p"]["servers"]["a"]["env"] == {"Q": "q-…(redacted)"}
    assert document["servers"]["a"]["env"]["LIT"] == "s3cret-value"  # the input is unchanged


def test_import_mcp_json_round_trips_through_toml(world: World, tmp_path: Path) -> None:
    source = tmp_path / "claude.json"
    source.write_text(
        json.dumps({"mcpServers": {"a": {"command": "a", "args": ["x"], "env": {"K": "${HOME}"}}}})
    )
    imported = import_file(source)
    text = to_toml(imported.document, source=source)
    assert text.startswith(f"# Converted by `assernctl config import` from {source}\n")
    target = world.write("converted.toml", text)
    from_toml = world.resolve(config_path=target).servers["a"]
    from_json = world.resolve(config_path=source).servers["a"]
    # the same server; only where its env key came from differs (the TOML file now)
    assert attrs.evolve(from_toml, env_keys_from={}) == attrs.evolve(from_json, env_keys_from={})
    assert from_toml.env["K"] == str(world.home)
    assert from_toml.env_keys_from["K"].file == str(target)


def test_import_reports_bad_json_with_every_problem(tmp_path: Path) -> None:
    source = tmp_path / "bad.json"
    source.write_text(json.dumps({"mcpServers": {"a": {"args": ["x"]}, "b": {"command": 5}}}))
    with pytest.raises(ConfigError) as caught:
        import_file(source)
    assert caught.value.file == str(source)
    assert caught.value.problems == ("expected a string, got 5 @ mcpServers.b.command",)


def test_import_yaml_with_the_servers_beside_it(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"gh": {"command": "npx"}}}))
    (tmp_path / "config.yaml").write_text(
        "projects:\n  work:\n    directories: ['~/work/*']\n    servers:\n      gh: {allowed: [search]}\n"
    )
    imported = import_file(tmp_path / "config.yaml")
    document = tomllib.loads(to_toml(imported.document, source=tmp_path / "config.yaml"))
    assert document == {
        "servers": {"gh": {"command": "npx"}},
        "projects": {"work": {"directories": ["~/work/*"], "servers": {"gh": {"allowed": ["search"]}}}},
    }


def test_bad_yaml_names_line_and_column_never_the_text(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    source = tmp_path / "config.yaml"
    source.write_text("projects:\n  work:\n    env: {TOKEN: 'secret-value'\n")
    with pytest.raises(ConfigError) as caught:
        import_file(source)
    assert caught.value.problems[0].startswith("invalid YAML: ")
    assert "line" in caught.value.problems[0]
    assert "secret-value" not in str(caught.value)


def test_global_config_yaml_is_read_when_pyyaml_is_installed(world: World) -> None:
    pytest.importorskip("yaml")
    world.write(world.assern_home / "mcp.json", json.dumps({"mcpServers": {"gh": {"command": "npx"}}}))
    world.write(
        world.assern_home / "config.yaml",
        "projects:\n  work:\n    directories: ['~/work/**']\n    env: {T: project}\n"
        "settings: {log_level: info}\n",
    )
    world.folder("work/x")
    resolved = world.resolve(cwd="work/x")
    assert resolved.project == "work"
    assert resolved.servers["gh"].env["T"] == "project"
    assert resolved.files == (world.assern_home / "config.yaml", world.assern_home / "mcp.json")
    assert "dropped settings.log_level: assern has no such setting" in resolved.warnings


def test_without_pyyaml_a_global_config_yaml_is_a_warning(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "yaml_available", lambda: False)
    world.write(world.assern_home / "config.yaml", "projects: {}\n")
    resolved = world.resolve()
    assert resolved.servers == {}
    assert any("config.yaml is not read: reading YAML needs PyYAML" in w for w in resolved.warnings)


def test_without_pyyaml_reading_yaml_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # makes `import yaml` fail
    with pytest.raises(ConfigError, match=r"pip install 'assern\[yaml\]'"):
        parse_yaml("a: 1\n", file="config.yaml")
