"""The doctor's output: the lines, the verdict, the exit code and the JSON document; the
registry's order; a finding that is not ok always carries its fix."""

from __future__ import annotations

import pytest
from doctor_facts import facts

from assern.app.ctl.doctor.checks import CHECKS, run_checks
from assern.app.ctl.doctor.finding import Finding, Status, fail, ok, warn
from assern.app.ctl.doctor.render import exit_code, json_document, text_lines, verdict

FINDINGS = [
    ok("config.resolves", "resolves"),
    warn("daemon.build", "old build", "assernctl shutdown"),
    fail("server.launcher", "npx missing", "install Node.js"),
]


def test_each_finding_is_one_line_and_its_fix_is_below_it() -> None:
    assert text_lines(FINDINGS, strict=False) == [
        "ok    config.resolves  resolves",
        "warn  daemon.build     old build",
        "                       fix: assernctl shutdown",
        "fail  server.launcher  npx missing",
        "                       fix: install Node.js",
        "verdict: fail: 1 failure(s), 1 warning(s), 1 ok",
    ]


def test_warnings_pass_unless_strict() -> None:
    warned = FINDINGS[:2]
    assert exit_code(warned, strict=False) == 0
    assert verdict(warned, strict=False) == "verdict: ok: 0 failure(s), 1 warning(s), 1 ok"
    assert exit_code(warned, strict=True) == 1
    assert (
        verdict(warned, strict=True) == "verdict: fail: 0 failure(s), 1 warning(s) (failing: --strict), 1 ok"
    )
    assert exit_code(FINDINGS, strict=False) == 1
    assert exit_code(FINDINGS[:1], strict=True) == 0


def test_the_json_document_has_every_check_and_the_summary() -> None:
    assert json_document(FINDINGS[:2], strict=False) == {
        "checks": [
            {"id": "config.resolves", "status": "ok", "summary": "resolves", "fix": None},
            {"id": "daemon.build", "status": "warn", "summary": "old build", "fix": "assernctl shutdown"},
        ],
        "summary": {
            "verdict": "ok",
            "ok": 1,
            "warn": 1,
            "fail": 0,
            "strict": False,
            "text": "verdict: ok: 0 failure(s), 1 warning(s), 1 ok",
        },
    }


def test_a_warning_or_failure_without_a_fix_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^x\.y: a fail finding needs its fix$"):
        Finding("x.y", Status.FAIL, "broken")
    with pytest.raises(ValueError, match="needs its fix"):
        Finding("x.y", Status.WARN, "odd", "")


def test_the_checks_run_in_registry_order_over_one_set_of_facts() -> None:
    found = run_checks(facts())
    assert [f.id for f in found] == [
        "config.resolves",
        "env.unresolved",
        "config.no_servers",
        "server.launcher",
        "run.private",
        "daemon.answers",
        "http.port",
        "trust.untrusted",  # the contributed checks after (no clients surveyed in these facts)
    ]
    names = [check.__name__ for check in CHECKS]
    assert len(names) == len(set(names)) == 13
    assert run_checks(facts(), checks=()) == []
