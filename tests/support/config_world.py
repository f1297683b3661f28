"""A fake user world under tmp_path: HOME, ASSERN_HOME and project folders.

Nothing here reads the real home: HOME in the fake environment points into tmp_path.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from assern.actors.config.resolve import resolve_config
from assern.actors.config.spec import ResolvedConfig


class World:
    """Files of one test's fake user, and `resolve` to run the resolver over them."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.assern_home = self.home / ".valksor" / "assern"
        self.assern_home.mkdir(parents=True)
        self.environ: dict[str, str] = {"HOME": str(self.home), "PATH": "/usr/bin:/bin"}

    def write(self, path: Path | str, text: str) -> Path:
        """Write dedented `text` to `path` (relative paths are under HOME)."""
        target = self.home / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return target

    def global_config(self, text: str) -> Path:
        return self.write(self.assern_home / "config.toml", text)

    def global_env(self, text: str) -> Path:
        return self.write(self.assern_home / ".env", text)

    def folder(self, path: str) -> Path:
        """A folder under HOME (created)."""
        target = self.home / path
        target.mkdir(parents=True, exist_ok=True)
        return target

    def resolve(
        self,
        *,
        cwd: Path | str | None = None,
        project: str | None = None,
        config_path: Path | None = None,
    ) -> ResolvedConfig:
        folder = self.home / cwd if cwd is not None else self.folder("elsewhere")
        return resolve_config(
            config_path=config_path,
            project=project,
            cwd=folder,
            environ=self.environ,
            assern_home=self.assern_home,
        )
