"""The wheel installs everything under `assern` and nothing else at the top level, and
gives the checkout's build id; the supported Pythons are said once."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from assern.app.daemon.identity import build_id

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
    for package in ("supervisor", "actors", "context", "examples"):
        assert f"assern/{package}/__init__.py" in names
    assert "assern/app/cli.py" in names
    assert "assern/actors/router/naming.py" in names
    assert "assern/examples/default.toml" in names  # the embedded default ships as data
    assert "assern/context/__main__.py" in names  # `python -I -m assern.context`
    for served in ("page.js", "page.css", "favicon.svg"):  # the status page's files ship as data
        assert f"assern/actors/listener/page/static/{served}" in names
    assert not any(name.startswith(("supervisor/", "actors/", "context/", "tests/")) for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "assern = assern.app.quick:main" in text
    assert "assernctl = assern.app.ctl:main" in text
    # The build id counts exactly what ships: the wheel's files give the checkout's id.
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    assert build_id(None, root=str(tmp_path / "site" / "assern")) == build_id(None)


def test_an_editable_install_runs_the_checkout(tmp_path: Path) -> None:
    """`pip install -e .` works and imports `assern.*` from the working tree's folders."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies come from the environment running the tests (no network needed);
    # this file sorts after the editable install's own `_assern.pth`.
    outer = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "zz_dependencies.pth").write_text(outer + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps"]
    pip += ["--no-build-isolation", "--disable-pip-version-check", "-e", str(ROOT)]
    subprocess.run(pip, check=True, capture_output=True)
    code = (
        "import assern.app.cli as cli, assern.supervisor as sup; print(cli.__file__); print(sup.Supervisor)"
    )
    shown = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout
    where = Path(shown.splitlines()[0]).resolve()
    assert where == ROOT / "app" / "cli.py"
    helped = subprocess.run([str(venv / "bin" / "assern"), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    assert "serve" in helped.stdout


def test_the_supported_pythons_are_said_once() -> None:
    """The classifiers list the versions .ci/run tests (one by one); the oldest is the
    floor that requires-python, mypy and ruff are set to."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    classified = [
        c.rsplit(" :: ", 1)[1]
        for c in project["project"]["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    versions = sorted(classified, key=lambda v: tuple(map(int, v.split("."))))
    assert classified == versions  # in order, each once
    assert len(set(versions)) == len(versions)
    oldest = versions[0]
    assert project["project"]["requires-python"] == f">={oldest}"
    assert project["tool"]["mypy"]["python_version"] == oldest
    assert project["tool"]["ruff"]["target-version"] == "py" + oldest.replace(".", "")
