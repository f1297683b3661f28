"""The official MCP conformance harness through assern (ops/conformance/run.py).

The harness needs Node 22 or newer: the machine's own, or the one `run.py
--install-only` installs from the npm registry into ops/conformance/.tools/ (as
.ci/run does). Without it the end-to-end tests are skipped, or fail under CI
(tests/support/needed_tools.py); the comparison rules are tested either way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from needed_tools import needs
from ops_scripts import OPS, load_script

RUN = OPS / "conformance" / "run.py"


runner = load_script(RUN, "conformance_run")
needs_node = needs(
    None
    if runner.find_node() is not None
    else "the conformance harness needs Node >= 22, which is not installed (run.py --install-only "
    "installs it)"
)


# Failing checks as the harness recorded them through assern in prefix naming (0.1.16 and
# 0.2.0-alpha.12), as `failures_of` writes them: "id: message", then the details.
UNKNOWN_TOOL = (
    "tools-call-simple-text: Failed: MCP error -32602: Unknown tool 'test_simple_text'. Servers with a "
    "tool of that name: fixture (fixture_test_simple_text). Did you mean: fixture_test_image_content?"
)
UNKNOWN_PROMPT = (
    "prompts-get-simple: Failed: Unknown prompt 'test_simple_prompt'. Did you mean: "
    "fixture_test_simple_prompt, fixture_test_input_required_result_prompt?"
)
UNKNOWN_URI = (
    "resources-read-text: Failed: Unknown resource 'test://static-text': assern resources look like "
    "assern://SERVER/ORIGINAL-URI. Did you mean: assern://fixture/test://static-text, "
    "assern://fixture/test://static-binary?"
)
UNKNOWN_TEMPLATE_URI = (
    "resources-templates-read: Failed: Unknown resource 'test://template/123/data': assern resources look "
    "like assern://SERVER/ORIGINAL-URI. Did you mean: assern://fixture/test://template/{id}/data?"
)
NOT_FOUND_LISTED = (
    "json-schema-2020-12-tool-found: Tool 'json_schema_2020_12_tool' not found. Available tools: "
    "fixture_test_simple_text, fixture_json_schema_2020_12_tool, fixture_test_reconnection"
)
NOT_LISTED_WITH_ANSWER = (
    "sep-2575-server-rejects-undeclared-capability: Not testable: server does not list the diagnostic tool "
    "'test_missing_capability' in tools/list and the probe call did not exercise it\n"
    + json.dumps(
        {
            "untestable": True,
            "response": {
                "error": {
                    "code": -32602,
                    "message": "Unknown tool 'test_missing_capability'. Servers with a tool of that name: "
                    "fixture (fixture_test_missing_capability).",
                }
            },
        }
    )
)
NOT_LISTED_BARE = (
    "sep-2575-missing-capability-http-400: Not testable: server does not list the diagnostic tool "
    "'test_missing_capability' in tools/list, so the -32021 HTTP status could not be validated\n"
    '{"untestable": true, "httpStatus": 400}'
)
NO_CAUSE = "sep-2322-multi-round-r1: Expected InputRequiredResult with inputRequests and requestState"
# The faults: what a scenario excused by its name alone would have hidden.
WRONG_VALUE = "tools-call-simple-text: Expected text content 'This is a simple text response for testing.'"
WRONG_TEMPLATE_VALUE = "resources-templates-read: Expected text 'Resource data for ID: 123', got 'data'"
UNKNOWN_EVEN_PREFIXED = (
    "tools-call-image: Failed: MCP error -32602: Unknown tool 'test_image_content'. Did you mean: "
    "fixture_test_audio_content?"
)
UNKNOWN_URI_OTHER_TEMPLATE = (
    "resources-templates-read: Failed: Unknown resource 'test://template/123/data': assern resources look "
    "like assern://SERVER/ORIGINAL-URI. Did you mean: assern://fixture/test://other/{id}/data?"
)


def test_a_failure_is_the_naming_rule_s_when_its_own_message_shows_the_name_prefixed() -> None:
    for failures, why in (
        ([UNKNOWN_TOOL], "tools are exposed as fixture_TOOL"),
        ([UNKNOWN_PROMPT], "prompts are exposed as fixture_PROMPT"),
        ([UNKNOWN_URI], "resource URIs are exposed as assern://fixture/URI"),
        ([UNKNOWN_TEMPLATE_URI], "resource URIs are exposed as assern://fixture/URI"),
        ([NOT_FOUND_LISTED], "tools are exposed as fixture_TOOL"),
        ([NOT_LISTED_WITH_ANSWER, NOT_LISTED_BARE], "tools are exposed as fixture_TOOL"),
    ):
        assert runner.classify(failures, "prefix") == runner.Verdict(expected=why), failures
        assert runner.classify(failures, "hybrid") == runner.Verdict(), failures


def test_a_failure_of_another_cause_is_unexplained_even_in_a_scenario_named_for_the_rule() -> None:
    none = runner.Verdict()
    assert runner.classify([WRONG_VALUE], "prefix") == none
    assert runner.classify([UNKNOWN_TOOL, WRONG_VALUE], "prefix") == none  # one cause among two
    assert runner.classify([WRONG_TEMPLATE_VALUE], "prefix") == none
    assert runner.classify([UNKNOWN_EVEN_PREFIXED], "prefix") == none  # fixture_X not shown: lost
    assert runner.classify([UNKNOWN_URI_OTHER_TEMPLATE], "prefix") == none
    assert runner.classify([NOT_LISTED_BARE], "prefix") == none  # no check shows the name prefixed
    assert runner.classify([runner.NO_CHECKS], "prefix") == none
    assert runner.classify([], "prefix") == none


def test_a_check_that_gives_no_cause_is_listed_as_unverified_never_as_expected() -> None:
    assert runner.classify([NO_CAUSE], "prefix") == runner.Verdict(unverified=True)
    assert runner.classify([NO_CAUSE, UNKNOWN_TOOL], "prefix") == runner.Verdict(unverified=True)
    assert runner.classify([NO_CAUSE, WRONG_VALUE], "prefix") == runner.Verdict()
    # only that check's own exact words: the same id saying something else is unexplained
    assert (
        runner.classify(["sep-2322-multi-round-r1: Expected 2 rounds, got 3"], "prefix") == runner.Verdict()
    )


def test_a_scenario_lost_through_assern_is_reported_unless_its_checks_show_the_naming_rule() -> None:
    direct = {
        "tools-call-simple-text": [],
        "tools-call-image": [],
        "resources-read-text": [],
        "input-required-result-multi-round": [],
        "ping": [],
        "tools-list": ["tools-list: the fixture lists nothing"],
    }
    through = {
        "tools-call-simple-text": [WRONG_VALUE],  # the injected fault: another cause
        "tools-call-image": [UNKNOWN_TOOL.replace("simple_text", "image_content")],
        "resources-read-text": [UNKNOWN_URI],
        "input-required-result-multi-round": [NO_CAUSE],
        "ping": [],
        "tools-list": ["tools-list: the fixture lists nothing"],
    }
    hybrid = runner.compare(direct, through, "hybrid")
    assert hybrid.unexplained == [
        "input-required-result-multi-round",
        "resources-read-text",
        "tools-call-image",
        "tools-call-simple-text",
    ]
    assert hybrid.expected == {}
    assert hybrid.unverified == []
    prefix = runner.compare(direct, through, "prefix")
    assert prefix.unexplained == ["tools-call-simple-text"]
    assert prefix.expected == {
        "resources-read-text": "resource URIs are exposed as assern://fixture/URI",
        "tools-call-image": "tools are exposed as fixture_TOOL",
    }
    assert prefix.unverified == ["input-required-result-multi-round"]
    # A scenario the harness did not run through assern at all counts as lost.
    assert runner.compare({"ping": []}, {}, "prefix").unexplained == ["ping"]


def test_the_recorded_checks_are_read_as_their_failures() -> None:
    checks = [
        {"id": "a", "status": "SUCCESS"},
        {"id": "b", "status": "FAILURE", "errorMessage": "went wrong", "details": {"got": 1}},
        {"id": "c", "status": "FAILURE", "errorMessage": "too"},
    ]
    assert runner.failures_of(checks) == ['b: went wrong\n{"got": 1}', "c: too"]
    assert runner.failures_of(checks[:1]) == []
    assert runner.failures_of([]) == [runner.NO_CHECKS]


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
    assert hybrid["unverified"] == prefix["unverified"] == []
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
    # the checks that give no cause are those two, whose calls could not start
    assert set(prefix["unverified"]) <= {
        "input-required-result-multi-round",
        "input-required-result-tampered-state",
    }
    assert hybrid["unverified"] == []
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
