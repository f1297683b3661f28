"""A session's first answers, kept per start's key and stamped with what its resolution
depended on (app/first_answers.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from assern.app.first_answers import (
    MAX_SESSIONS,
    EarlyAnswers,
    answer_files,
    keep_answer,
    keep_stamp,
    load_sessions,
    saved_answers,
    session_key,
)
from assern.app.hint import env_digest, signature

KEY = {"format": 2, "version": "1", "args": [], "cwd": "/w", "python": "p", "assern_home": "/h", "home": "/"}
TOOLS = {"tools": [{"name": "alpha_echo", "inputSchema": {"type": "object"}}]}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}


def stamp(config: Path, environ: dict[str, str]) -> dict[str, Any]:
    return {
        "files": {str(config): signature(str(config))},
        "env_names": ["TOKEN"],
        "env_digest": env_digest(["TOKEN"], environ),
    }


def kept(home: Path, config: Path, environ: dict[str, str], build: str = "b1") -> str:
    answers = keep_stamp(str(home), KEY, build, stamp(config, environ))
    keep_answer(answers, build, session_key(INIT), "initialize", {"capabilities": {}})
    keep_answer(answers, build, session_key(INIT), "tools/list", TOOLS)
    return answers


def test_kept_answers_are_found_while_nothing_they_depend_on_changed(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[servers.alpha]\n")
    environ = {"TOKEN": "secret"}
    answers = kept(tmp_path, config, environ)
    assert saved_answers(str(tmp_path), KEY, "b1", environ) == answers
    sessions = load_sessions(answers, "b1")
    assert sessions[session_key(INIT)]["tools/list"] == TOOLS
    # the files are the user's alone, and no value of a variable is written
    for path in answer_files(str(tmp_path), KEY):
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert "secret" not in Path(path).read_text()


def test_a_changed_file_variable_build_or_key_finds_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[servers.alpha]\n")
    environ = {"TOKEN": "secret"}
    kept(tmp_path, config, environ)
    assert saved_answers(str(tmp_path), KEY, "b2", environ) is None  # another build
    assert saved_answers(str(tmp_path), {**KEY, "cwd": "/other"}, "b1", environ) is None
    assert saved_answers(str(tmp_path), KEY, "b1", {"TOKEN": "other"}) is None
    config.write_text("[servers.alpha]\n[servers.beta]\n")
    assert saved_answers(str(tmp_path), KEY, "b1", environ) is None


def test_a_new_stamp_drops_the_answers_kept_under_the_old_one(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("a")
    environ = {"TOKEN": "x"}
    answers = kept(tmp_path, config, environ)
    assert keep_stamp(str(tmp_path), KEY, "b1", stamp(config, environ)) == answers
    assert load_sessions(answers, "b1")  # the same stamp keeps them
    config.write_text("changed")
    keep_stamp(str(tmp_path), KEY, "b1", stamp(config, environ))
    assert load_sessions(answers, "b1") == {}
    assert saved_answers(str(tmp_path), KEY, "b1", environ) is None


def test_a_corrupt_or_foreign_file_is_ignored(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("a")
    environ = {"TOKEN": "x"}
    answers = kept(tmp_path, config, environ)
    Path(answers).write_text("{not json")
    assert load_sessions(answers, "b1") == {}
    keep_answer(answers, "b1", "s", "tools/list", TOOLS)  # rebuilt
    assert load_sessions(answers, "b1") == {"s": {"tools/list": TOOLS}}
    stamp_file, _ = answer_files(str(tmp_path), KEY)
    Path(stamp_file).write_text(json.dumps({"format": 1, "key": KEY, "build": "b1"}))  # no stamp
    assert saved_answers(str(tmp_path), KEY, "b1", environ) is None


def test_the_oldest_client_goes_beyond_the_bound(tmp_path: Path) -> None:
    answers = str(tmp_path / "cache" / "a.answers.json")
    for number in range(MAX_SESSIONS + 2):
        keep_answer(answers, "b", f"s{number}", "tools/list", TOOLS)
    keep_answer(answers, "b", "s2", "prompts/list", {"prompts": []})  # used again: kept longest
    sessions = load_sessions(answers, "b")
    assert len(sessions) == MAX_SESSIONS
    assert "s0" not in sessions
    assert "s1" not in sessions
    assert json.loads(Path(answers).read_text())["order"][-1] == "s2"
    assert sessions["s2"] == {"tools/list": TOOLS, "prompts/list": {"prompts": []}}


def test_early_answers_need_the_same_clients_initialize_first() -> None:
    early = EarlyAnswers({session_key(INIT): {"initialize": {"capabilities": {}}, "tools/list": TOOLS}})
    assert early.result("tools/list", {}) is None  # no initialize answered yet
    assert early.result("initialize", {**INIT, "clientInfo": {"name": "other"}}) is None
    assert early.result("initialize", INIT) == {"capabilities": {}}
    assert early.result("initialize", INIT) is None  # a second initialize is the daemon's
    assert early.result("tools/list", {}) == TOOLS
    assert early.result("tools/list", {"cursor": "2"}) is None  # a later page
    assert early.result("prompts/list", {}) is None  # not kept
    assert early.result("tools/call", {"name": "alpha_echo"}) is None
    assert early.result("ping", {}) == {}


def test_a_kept_list_with_more_pages_waits_for_the_daemon() -> None:
    paged = {"tools": TOOLS["tools"], "nextCursor": "2"}
    early = EarlyAnswers({session_key(INIT): {"initialize": {}, "tools/list": paged}})
    assert early.result("initialize", INIT) == {}
    assert early.result("tools/list", {}) is None
