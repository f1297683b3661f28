"""trust.untrusted: what doctor says of folders whose own configuration waits for trust."""

from __future__ import annotations

from pathlib import Path

import pytest
from doctor_facts import facts, lines

from assern.actors.config.spec import ResolvedConfig
from assern.app.ctl.doctor.checks.trust import trust_untrusted
from assern.app.running import loader


def resolved(tmp_path: Path, *, trust_file: str | None = None) -> ResolvedConfig:
    home = tmp_path / "home"
    project = tmp_path / "repo"
    (project / ".assern").mkdir(parents=True)
    (project / ".assern" / "config.toml").write_text('[servers.build]\ncommand = "make"\n')
    (home / "assern").mkdir(parents=True)
    if trust_file is not None:
        (home / "assern" / "trust.json").write_text(trust_file)
    env = {"HOME": str(home), "ASSERN_HOME": str(home / "assern"), "PATH": "/usr/bin"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)  # the loader resolves from the working folder, as `assern serve`
        return loader(None, None, env)()


def test_an_untrusted_folder_is_a_warning_with_the_trust_command(tmp_path: Path) -> None:
    found = trust_untrusted(facts(config=resolved(tmp_path)))
    assert [(status, check) for status, check, _ in lines(found)] == [("warn", "trust.untrusted")]
    assert found[0].fix == f"assernctl trust {tmp_path / 'repo'}"
    assert "1 server(s) from .assern/config.toml not started" in found[0].summary


def test_a_corrupt_store_is_said_and_nothing_runs(tmp_path: Path) -> None:
    found = trust_untrusted(facts(config=resolved(tmp_path, trust_file="{not json")))
    assert found[0].summary.startswith("the trust store ")
    assert found[0].fix is not None
    assert found[0].fix.startswith("repair or remove ")
    assert len(found) == 2  # and the folder it leaves out


def test_no_config_says_nothing() -> None:
    assert trust_untrusted(facts(config=None)) == []
