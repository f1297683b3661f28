"""The official MCP conformance harness through assern (ops/conformance/run.py).

The harness needs Node 22 or newer: the machine's own, or the one `run.py
--install-only` installs from the npm registry into ops/conformance/.tools/ (CI does
that when npm is there). Without it the end-to-end test is skipped; the comparison
rules are tested either way.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

RUN = Path(__file__).resolve().parents[2] / "ops" / "conformance" / "run.py"


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_run", RUN)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = load_runner()
needs_node = pytest.mark.skipif(
    runner.find_node() is None, reason="the conformance harness needs Node >= 22 (run.py --install-only)"
)


def test_a_scenario_lost_through_assern_is_reported_unless_the_naming_rule_explains_it() -> None:
    direct = {"tools-call-image": True, "resources-read-text": True, "ping": True, "tools-list": False}
    through = {"tools-call-image": False, "resources-read-text": False, "ping": True, "tools-list": False}
    assert runner.compare(direct, through, "hybrid") == (["resources-read-text", "tools-call-image"], [])
    assert runner.compare(direct, through, "prefix") == ([], ["resources-read-text", "tools-call-image"])
    # A scenario the harness did not run through assern at all counts as lost.
    assert runner.compare({"ping": True}, {}, "prefix") == (["ping"], [])


def test_the_prefix_rule_covers_only_scenarios_that_name_a_backend_tool_prompt_or_uri() -> None:
    assert runner.rule_for("tools-call-simple-text", "prefix") == "tools are exposed as fixture_TOOL"
    assert runner.rule_for("resources-subscribe", "prefix") is not None
    assert runner.rule_for("input-required-result-multi-round", "prefix") is not None
    for scenario in ("tools-list", "resources-list", "prompts-list", "ping", "server-initialize"):
        assert runner.rule_for(scenario, "prefix") is None
    assert runner.rule_for("tools-call-simple-text", "hybrid") is None


def run_both_namings(tmp_path: Path, *argv: str, timeout: float) -> dict[str, Any]:
    """Run the harness directly once and through assern in each naming; the outcomes."""
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(RUN), *argv, "--naming", "hybrid", "--naming", "prefix", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes: dict[str, Any] = json.loads(out.read_text())
    assert set(outcomes["namings"]) == {"hybrid", "prefix"}
    return outcomes


@pytest.mark.e2e
@needs_node
def test_every_scenario_that_passes_directly_passes_through_assern(tmp_path: Path) -> None:
    outcomes = run_both_namings(tmp_path, timeout=400)
    direct, hybrid, prefix = outcomes["direct"], outcomes["namings"]["hybrid"], outcomes["namings"]["prefix"]
    assert len(direct) >= 30  # the harness's active server suite ran
    assert all(direct.values()), direct
    assert hybrid["unexplained"] == prefix["unexplained"] == []
    assert hybrid["assern"] == direct
    assert "resources-read-text" in prefix["expected"]
    assert prefix["assern"]["tools-list"]
    assert prefix["assern"]["resources-list"]


@pytest.mark.e2e
@needs_node
def test_every_2026_07_28_scenario_that_passes_directly_passes_through_assern(tmp_path: Path) -> None:
    """The newer harness's scenarios for the stateless revision, assern speaking it to the
    fixture too: input rounds, per-request capabilities, caching hints, headers."""
    argv = ("--harness", runner.MODERN_HARNESS, "--requirements", "2026-07-28")
    outcomes = run_both_namings(tmp_path, *argv, timeout=800)
    direct, hybrid, prefix = outcomes["direct"], outcomes["namings"]["hybrid"], outcomes["namings"]["prefix"]
    assert len(direct) >= 45  # the revision's required scenarios ran
    assert hybrid["unexplained"] == prefix["unexplained"] == []
    # in prefix naming every difference is the naming rule's; what names nothing passes
    assert prefix["expected"]
    assert all(prefix["assern"][s] for s in ("tools-list", "prompts-list", "caching"))
    assert hybrid["expected"] == []
    assert hybrid["assern"] == direct
    for scenario in (
        "server-stateless",
        "caching",
        "input-required-result-basic-elicitation",
        "input-required-result-multi-round",
        "input-required-result-non-tool-request",
        "input-required-result-capability-check",
        "input-required-result-tampered-state",
    ):
        assert hybrid["assern"][scenario], scenario
