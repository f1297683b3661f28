"""The wheel installs everything under `assern` and nothing else at the top level."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_the_assern_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("assern-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"assern", next(n for n in top if n.endswith(".dist-info"))}
    for package in ("supervisor", "actors", "examples"):
        assert f"assern/{package}/__init__.py" in names
    assert "assern/app/cli.py" in names
    assert "assern/actors/router/naming.py" in names
    assert "assern/examples/default.toml" in names  # the embedded default ships as data
    assert not any(name.startswith(("supervisor/", "actors/", "tests/")) for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "assern = assern.app.cli:assern_main" in text
    assert "assernctl = assern.app.ctl:main" in text
