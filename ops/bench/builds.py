"""The builds of assern a benchmark compares, each installed in a virtualenv of its own.

A build is a git revision, `worktree` (the checkout as it is, uncommitted changes
included) or `current` (the `assern` beside the running Python, as it is: what the test
suite's smoke runs use). A revision's virtualenv under `ops/bench/results/ab/` is kept
and reused; the working tree's is installed anew each run. ab.py and first_list.py take
their `--a`/`--b` builds through `install`.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILDS = Path(__file__).resolve().parent / "results" / "ab"

#: How long `assern daemon` may take to bind its sockets, and to stop once told to.
DAEMON_WAIT = 60.0
#: What `assern daemon` writes on stderr once its sockets listen (every build since it came).
DAEMON_READY = b"MCP socket"


def _commit(rev: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=10", f"{rev}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def _pip_install(venv: Path, source: Path, log: Path) -> None:
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with log.open("w") as out:
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "--force-reinstall",
             "--no-deps", str(source)],
            check=True, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        # the dependencies as that build declares them (a no-op when they are there)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", str(source)],
            check=True, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def install(rev: str) -> Path:
    """A virtualenv with `rev` installed (not editable); returns its `assern` script.
    `current` is the `assern` installed beside the running Python, as it is."""
    if rev == "current":
        found = shutil.which("assern", path=str(Path(sys.executable).parent))
        if found is None:
            raise SystemExit("no `assern` script beside this Python")
        return Path(found)
    BUILDS.mkdir(parents=True, exist_ok=True)
    if rev == "worktree":
        venv = BUILDS / "worktree"
        print("installing the working tree ...", file=sys.stderr, flush=True)
        _pip_install(venv, ROOT, BUILDS / "worktree-install.log")
        return venv / "bin" / "assern"
    commit = _commit(rev)
    venv = BUILDS / commit
    done = venv / ".installed"
    if not done.exists():
        print(f"installing {rev} ({commit}) ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="assern-ab-") as tmp:
            archive = Path(tmp) / "src.tar"
            with archive.open("wb") as out:
                subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, stdout=out)
            source = Path(tmp) / "src"
            with tarfile.open(archive) as tar:
                tar.extractall(source, filter="tar")
            _pip_install(venv, source, BUILDS / f"{commit}-install.log")
        done.touch()
    return venv / "bin" / "assern"


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """The median over rounds of B's figure ÷ A's, each pair measured one right after the
    other: what drifts over the run (the machine's load) cancels within a pair."""
    return statistics.median(y / x for x, y in zip(a, b, strict=True))
