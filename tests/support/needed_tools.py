"""Tests that need a program from outside Python (Node 22, haproxy, chromium): a skip on a
developer's machine without it, a failure under CI.

`.ci/run` installs each such program and fails when it cannot, so under CI
(`CI=true`) a test that still finds its program missing fails, saying what is
missing: nothing README says CI proves is skipped there unseen. A developer's plain
`pytest` skips the test and says why in its summary (`-ra`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def in_ci() -> bool:
    """Whether this is a CI run (`CI=true`, as CI services set it)."""
    return os.environ.get("CI") == "true"


def needs(missing: str | None) -> pytest.MarkDecorator:
    """Mark a test that needs a program; `missing` says what is missing, None if nothing.

    Outside CI a missing program skips the test; under CI the mark fails it
    (`fail_when_missing`, from tests/conftest.py).
    """
    if missing is not None and not in_ci():
        return pytest.mark.skip(reason=missing)
    return pytest.mark.needs_tool(missing=missing)


def fail_when_missing(missing: str | None) -> None:
    """Fail the running test, under CI, when its program is `missing`."""
    if missing is not None:
        pytest.fail(
            f"{missing}; under CI (CI=true) this is a failure, not a skip: .ci/run installs it",
            pytrace=False,
        )


#: the HAProxy checks and the replica drill (tests/ops/)
needs_haproxy = needs(None if shutil.which("haproxy") else "haproxy is not installed (Debian's haproxy)")


def _browser_missing() -> str | None:
    if shutil.which("chromium") is None:
        return "chromium is not installed (Debian's chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (the test extra)"
    return None


#: the status page in a real browser (tests/e2e/test_status_page.py)
needs_chromium = needs(_browser_missing())
