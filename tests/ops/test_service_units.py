"""The shipped service units: systemd's pair (socket activation) and the launchd agent.

`systemd-analyze verify` checks the systemd units where it is installed (the ExecStart
path is pointed at this checkout's `assern`, as a user's install puts one at
`~/.local/bin`); the launchd plist is parsed as launchd would read it.
"""

from __future__ import annotations

import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[2] / "ops"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_systemd_units_verify(tmp_path: Path) -> None:
    assern = shutil.which("assern", path=str(Path(sys.executable).parent))
    assert assern is not None
    for name in ("assern.socket", "assern.service"):
        text = (UNITS / "systemd" / name).read_text().replace("%h/.local/bin/assern", assern)
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "assern.socket"), str(tmp_path / "assern.service")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr


def test_the_socket_unit_holds_the_daemons_two_sockets_privately() -> None:
    lines = (UNITS / "systemd" / "assern.socket").read_text().splitlines()
    listen = [line.split("=", 1)[1] for line in lines if line.startswith("ListenStream=")]
    assert listen == ["%h/.valksor/assern/run/daemon.sock", "%h/.valksor/assern/run/daemon.ctl"]
    assert "SocketMode=0600" in lines
    assert "DirectoryMode=0700" in lines
    assert "Service=assern.service" in lines


def test_the_units_run_the_workstation_daemon() -> None:
    service = (UNITS / "systemd" / "assern.service").read_text().splitlines()
    assert "ExecStart=%h/.local/bin/assern daemon" in service
    with (UNITS / "launchd" / "com.valksor.assern.plist").open("rb") as file:
        agent = plistlib.load(file)
    assert agent["ProgramArguments"][1:] == ["daemon"]
    assert agent["Label"] == "com.valksor.assern"
