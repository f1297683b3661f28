"""`Facts` for the doctor's check tests: a healthy machine by default, with the changes a
test asks for (`facts(config=None, config_error=...)`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from assern.actors.config.spec import ResolvedConfig, ServerSpec, Settings
from assern.app.ctl.doctor.facts import Facts, InstanceFact
from assern.app.ctl.doctor.finding import Finding

UID = 1000
HOME = Path("/home/me/.valksor/assern")
RUN = HOME / "run"


def config(*names: str, files: tuple[Path, ...] = (HOME / "config.toml",), **changes: Any) -> ResolvedConfig:
    servers = {name: ServerSpec(name=name, transport="stdio", command="npx") for name in names}
    return ResolvedConfig(settings=Settings(), servers=servers, project=None, files=files, **changes)


def facts(**changes: Any) -> Facts:
    base = Facts(
        version="1.2.0",
        build="1.2.0+3f9a1c2b4d5e",
        uid=UID,
        cwd=Path("/home/me/work"),
        assern_home=HOME,
        path="/usr/bin:/bin",
        config=config("github"),
        run_dir=RUN,
    )
    return attrs.evolve(base, **changes)


def backend(name: str, state: str = "ready", **fields: Any) -> dict[str, Any]:
    return {"name": name, "state": state, "restarts": 0, "tools": 3, "resources": 0, "prompts": 0, **fields}


def instance(*backends: Mapping[str, Any], version: str = "1.2.0", **changes: Any) -> InstanceFact:
    hello = {"pid": 4242, "version": version}
    status = {"pid": 4242, "version": version, "uptime_s": 61.0, "backends": list(backends)}
    base = InstanceFact(slot="assern", control=RUN / "assern.ctl", hello=hello, status=status)
    return attrs.evolve(base, **changes)


def lines(found: list[Finding]) -> list[tuple[str, str, str]]:
    """(status, id, summary) of each finding."""
    return [(f.status.value, f.id, f.summary) for f in found]
