"""`assernctl trust` and `untrust`, run in-process in a fake user world."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from assern.app.ctl.parser import ctl_main

BUILD = '[servers.build]\ncommand = "sh"\nargs = ["-c", "touch MARKER"]\nenv = { TOKEN = "s3cret" }\n'


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    assern_home = tmp_path / "assern-home"
    folder = tmp_path / "repo"
    (folder / ".assern").mkdir(parents=True)
    home.mkdir()
    assern_home.mkdir()
    (assern_home / "config.toml").write_text('[servers.mine]\ncommand = "mine"\n')
    (folder / ".assern" / "config.toml").write_text(BUILD)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ASSERN_HOME", str(assern_home))
    monkeypatch.chdir(folder)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return folder


def store(repo: Path) -> dict[str, object]:
    return json.loads((repo.parent / "assern-home" / "trust.json").read_text())  # type: ignore[no-any-return]


def test_trust_shows_what_would_start_and_needs_a_terminal_or_yes(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl_main(["trust"]) == 1
    shown = capsys.readouterr()
    assert f"{repo} is not trusted. Its configuration would start:" in shown.out
    assert "server build: sh -c 'touch MARKER'; env TOKEN" in shown.out
    assert "s3cret" not in shown.out + shown.err
    assert "not asking: stdin is not a terminal" in shown.err
    assert not (repo.parent / "assern-home" / "trust.json").exists()


def test_trust_asks_on_a_terminal(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = iter(["n", "y"])
    monkeypatch.setattr("sys.stdin", Tty())
    monkeypatch.setattr("builtins.input", lambda _prompt: next(answers))
    assert ctl_main(["trust"]) == 1
    assert "nothing trusted" in capsys.readouterr().err
    assert ctl_main(["trust"]) == 0
    assert f"trusted: {repo}" in capsys.readouterr().out
    assert list(store(repo)["folders"]) == [str(repo)]  # type: ignore[call-overload]


def test_trust_yes_then_list_then_a_change(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl_main(["trust", "--yes", str(repo)]) == 0
    capsys.readouterr()
    assert ctl_main(["trust"]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert ctl_main(["trust", "--list"]) == 0
    assert f"{repo}  (current; trusted " in capsys.readouterr().out

    (repo / ".assern" / "config.toml").write_text(BUILD.replace("MARKER", "OTHER"))
    assert ctl_main(["trust", "--list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["folders"]
    assert row["state"].startswith("changed")
    assert ctl_main(["trust"]) == 1
    shown = capsys.readouterr().out
    assert f"{repo} changed since it was trusted" in shown
    assert "~ server build: args -c 'touch MARKER' -> -c 'touch OTHER'" in shown


def test_trust_json_without_yes_grants_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl_main(["trust", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["granted"] is False
    assert document["projects"][0]["state"] == "new"
    assert document["projects"][0]["servers"]["build"]["env_keys"] == ["TOKEN"]


def test_untrust(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl_main(["untrust", str(repo)]) == 1
    assert "is not trusted" in capsys.readouterr().err
    assert ctl_main(["trust", "--yes"]) == 0
    assert ctl_main(["untrust", "."]) == 0
    assert f"no longer trusted: {repo}" in capsys.readouterr().out
    assert store(repo)["folders"] == {}


def test_untrust_a_folder_that_is_gone(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl_main(["trust", "--yes"]) == 0
    moved = repo.with_name("moved")
    repo.rename(moved)
    assert ctl_main(["trust", "--list"]) == 0
    assert "gone: the folder is not there" in capsys.readouterr().out
    assert ctl_main(["untrust", str(repo)]) == 0
    assert store(moved)["folders"] == {}


def test_trust_on_a_folder_without_project_files_says_so(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert ctl_main(["trust", "--yes", str(plain)]) == 1
    assert f"{plain} holds no project configuration to trust" in capsys.readouterr().err
    assert ctl_main(["trust", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_trust_refuses_a_file_that_does_not_read(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".assern" / "config.toml").write_text("[servers.build\n")
    assert ctl_main(["trust", "--yes"]) == 2
    assert "configuration error (nothing is trusted until it reads)" in capsys.readouterr().err


def test_an_unusable_store_is_named_and_kept(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo.parent / "assern-home" / "trust.json"
    path.write_text("{broken")
    path.chmod(0o600)
    assert ctl_main(["trust", "--yes"]) == 1
    assert "cannot be used: it is not valid JSON" in capsys.readouterr().err
    assert ctl_main(["trust", "--list"]) == 1
    assert path.read_text() == "{broken"
