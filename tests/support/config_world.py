"""A fake user world under tmp_path: HOME, ASSERN_HOME and project folders.

Nothing here reads the real home: HOME in the fake environment points into tmp_path.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from assern.actors.config.resolve import resolve_config
from assern.actors.config.sources import read_sources, trust_file
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.actors.config.trust import grant


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

    def trust(self, folder: Path, *, config_path: Path | None = None) -> None:
        """Trust what a session in `folder` would read of the folders' own files."""
        try:
            found = read_sources(
                config_path=config_path, cwd=folder, environ=self.environ, assern_home=self.assern_home
            )
        except ConfigError:
            return  # the resolution names the file at fault
        grant(trust_file(self.assern_home), found.projects, now="2026-01-01T00:00:00Z")

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
        trusted: bool = True,
    ) -> ResolvedConfig:
        """Resolve in `cwd`; with `trusted`, the folder's own files are trusted first (as
        `assernctl trust --yes` would), so they apply as they are now."""
        folder = self.home / cwd if cwd is not None else self.folder("elsewhere")
        if trusted:
            self.trust(folder, config_path=config_path)
        return resolve_config(
            config_path=config_path,
            project=project,
            cwd=folder,
            environ=self.environ,
            assern_home=self.assern_home,
        )
