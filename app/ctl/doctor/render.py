"""`assernctl doctor`'s output: one line per finding (and its fix), a verdict, the exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assern.app.ctl.doctor.finding import Status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from assern.app.ctl.doctor.finding import Finding


def counts(findings: Sequence[Finding]) -> dict[str, int]:
    """How many findings of each status: {"ok": n, "warn": n, "fail": n}."""
    return {status.value: sum(1 for f in findings if f.status is status) for status in Status}


def passed(findings: Sequence[Finding], *, strict: bool) -> bool:
    """No failure (and, with `strict`, no warning either)."""
    failing = (Status.FAIL, Status.WARN) if strict else (Status.FAIL,)
    return not any(finding.status in failing for finding in findings)


def exit_code(findings: Sequence[Finding], *, strict: bool) -> int:
    """0 when `passed`, else 1 (2, for usage errors, is the parser's)."""
    return 0 if passed(findings, strict=strict) else 1


def verdict(findings: Sequence[Finding], *, strict: bool) -> str:
    """The last line: the verdict and the counts."""
    found = counts(findings)
    word = "ok" if passed(findings, strict=strict) else "fail"
    warnings = f"{found['warn']} warning(s)"
    if found["warn"] and strict:
        warnings += " (failing: --strict)"
    return f"verdict: {word}: {found['fail']} failure(s), {warnings}, {found['ok']} ok"


def text_lines(findings: Sequence[Finding], *, strict: bool) -> list[str]:
    """`STATUS  ID  finding` per finding, its `fix:` below it, then the verdict."""
    width = max((len(finding.id) for finding in findings), default=0)
    indent = " " * (4 + 2 + width + 2)
    lines = []
    for finding in findings:
        lines.append(f"{finding.status.value:<4}  {finding.id:<{width}}  {finding.summary}")
        if finding.fix:
            lines.append(f"{indent}fix: {finding.fix}")
    lines.append(verdict(findings, strict=strict))
    return lines


def json_document(findings: Sequence[Finding], *, strict: bool) -> dict[str, Any]:
    """`--json`: every finding, and the verdict with its counts."""
    return {
        "checks": [
            {"id": f.id, "status": f.status.value, "summary": f.summary, "fix": f.fix} for f in findings
        ],
        "summary": {
            "verdict": "ok" if passed(findings, strict=strict) else "fail",
            **counts(findings),
            "strict": strict,
            "text": verdict(findings, strict=strict),
        },
    }
