"""`assernctl config …`: show, explain, validate, init and import configuration.

None of these start a backend: they read the files and the environment as `assern serve`
would in the current directory. Output for people goes to stdout, errors and notes to
stderr; `--json` output is stable and documented in docs/configuration.md ("assernctl config").
Env and header values are redacted unless `--reveal` is given and stdout is a terminal.

Exit codes: 0 fine; 1 problems found (validate) or a file refused (init, import);
2 a configuration error or a wrong argument.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from assern.actors.config.discover import global_choice
from assern.actors.config.home import GLOBAL_CONFIG, LOCAL_DIR, default_assern_home, user_home
from assern.actors.config.layers import read_dotenv, read_global, read_local
from assern.actors.config.project import find_local_root
from assern.actors.config.resolve import resolve_config
from assern.actors.config.spec import ConfigError, ResolvedConfig
from assern.actors.config.structure import parse_toml
from assern.actors.config.variables import undefined_references
from assern.app.ctl.config.convert import hide_literal_secrets, import_file, to_toml
from assern.app.ctl.config.report import explain_document, render_explain, render_show, show_document
from assern.app.ctl.config.starter import STARTER_CONFIG
from assern.app.ctl.config.writing import write_new

PROG = "assernctl config"


@attrs.frozen(kw_only=True)
class Context:
    """What every subcommand reads: the environment, the working folder, ASSERN_HOME."""

    environ: Mapping[str, str]
    cwd: Path
    assern_home: Path

    @classmethod
    def current(cls) -> Context:
        environ = dict(os.environ)
        # Configs may start Python servers with the interpreter assern runs on.
        environ.setdefault("ASSERN_PYTHON", sys.executable)
        return cls(environ=environ, cwd=Path.cwd(), assern_home=default_assern_home(environ))

    def config_path(self, explicit: Path | None) -> Path | None:
        """The file standing for the global config (None: `$ASSERN_HOME`'s), as resolution chooses."""
        return global_choice(explicit, cwd=self.cwd, environ=self.environ, assern_home=self.assern_home).path

    def resolve(self, *, config: Path | None, project: str | None) -> ResolvedConfig:
        return resolve_config(
            config_path=config,
            project=project,
            cwd=self.cwd,
            environ=self.environ,
            assern_home=self.assern_home,
        )


@attrs.frozen(kw_only=True)
class Finding:
    """The outcome of checking one file: its problems (none when it is fine)."""

    file: str
    problems: tuple[str, ...] = ()


def config_main(argv: Sequence[str]) -> int:
    """Run `assernctl config ARGV…` and return the exit code."""
    args = _parser().parse_args(list(argv))
    handlers: dict[str, Callable[[argparse.Namespace, Context], int]] = {
        "show": cmd_show,
        "explain": cmd_explain,
        "validate": cmd_validate,
        "init": cmd_init,
        "import": cmd_import,
    }
    try:
        return handlers[args.action](args, Context.current())
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Inspect and write assern's configuration.")
    sub = parser.add_subparsers(dest="action", required=True)
    show = sub.add_parser("show", help="print the resolved configuration for the current directory")
    explain = sub.add_parser("explain", help="one server's command, args, cwd and env with provenance")
    explain.add_argument("server")
    explain.add_argument("--reveal", action="store_true", help="show env and header values (terminal only)")
    for cmd in (show, explain):
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        cmd.add_argument("--project", help="project to use (default: detected from the directory)")
        cmd.add_argument("--config", type=Path, help="config file (TOML or mcpServers JSON)")
    validate = sub.add_parser("validate", help="check files; exit 1 listing every problem")
    validate.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    validate.add_argument("--json", action="store_true", help="machine-readable output")
    validate.add_argument("--project", help="project to use when checking the current configuration")
    validate.add_argument("--config", type=Path, help="config file to check with its layers")
    sub.add_parser("init", help="write a commented starter config to $ASSERN_HOME/config.toml")
    convert = sub.add_parser("import", help="convert mcpServers JSON or the original config.yaml to TOML")
    convert.add_argument("path", type=Path, metavar="PATH")
    convert.add_argument("--output", "-o", type=Path, help="write the TOML here (never overwrites)")
    convert.add_argument("--reveal", action="store_true", help="show literal secrets on a terminal")
    return parser


def _error(message: str) -> None:
    print(f"assernctl: {message}", file=sys.stderr)


def _config_error(exc: ConfigError) -> int:
    _error(f"configuration error\n{exc}")
    return 2


def _reveal(requested: bool) -> bool:
    """`--reveal` counts only when stdout is a terminal (never into a pipe or a file)."""
    if requested and not sys.stdout.isatty():
        _error("--reveal is ignored: stdout is not a terminal, so values stay redacted")
        return False
    return requested


def _print_json(document: object) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False))


# ----------------------------------------------------------------------- show / explain


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    try:
        config = ctx.resolve(config=args.config, project=args.project)
    except ConfigError as exc:
        return _config_error(exc)
    document = show_document(config)
    if args.json:
        _print_json(document)
    else:
        print(render_show(document))
    return 0


def cmd_explain(args: argparse.Namespace, ctx: Context) -> int:
    reveal = _reveal(args.reveal)
    try:
        config = ctx.resolve(config=args.config, project=args.project)
    except ConfigError as exc:
        return _config_error(exc)
    spec = config.servers.get(args.server)
    if spec is None:
        known = ", ".join(config.servers) or "none"
        _error(
            f"no server {args.server!r} runs here (servers: {known}); "
            "a disabled server, or one the project leaves out, does not run"
        )
        return 2
    document = explain_document(config, spec, reveal=reveal)
    if args.json:
        _print_json(document)
    else:
        print(render_explain(document))
    return 0


# ----------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace, ctx: Context) -> int:
    if args.paths:
        findings = [finding for path in args.paths for finding in check_path(ctx.cwd / path, ctx)]
        warnings: tuple[str, ...] = ()
    else:
        findings, warnings = check_current(ctx, config=args.config, project=args.project)
    findings = _merge(findings)
    bad = [finding for finding in findings if finding.problems]
    if args.json:
        _print_json(
            {
                "ok": not bad,
                "files": [
                    {"file": f.file, "ok": not f.problems, "problems": list(f.problems)} for f in findings
                ],
                "warnings": list(warnings),
            }
        )
    else:
        if not findings:
            print("nothing to check: no configuration file was found")
        for finding in findings:
            if finding.problems:
                print(f"{finding.file}:")
                print("\n".join(f"  {problem}" for problem in finding.problems))
            else:
                print(f"{finding.file}: ok")
        for warning in warnings:
            print(f"warning: {warning}")
        if bad:
            count = sum(len(finding.problems) for finding in bad)
            print(f"{count} problem(s) in {len(bad)} file(s)", file=sys.stderr)
    return 1 if bad else 0


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per file, problems in order and without repeats."""
    merged: dict[str, list[str]] = {}
    for finding in findings:
        merged.setdefault(finding.file, []).extend(finding.problems)
    return [Finding(file=file, problems=tuple(dict.fromkeys(problems))) for file, problems in merged.items()]


def _attempt(file: Path, check: Callable[[], object]) -> list[Finding]:
    """Run one check; a ConfigError becomes a finding for the file it names."""
    try:
        check()
    except ConfigError as exc:
        return [Finding(file=exc.file or str(file), problems=exc.problems)]
    return [Finding(file=str(file))]


def check_path(path: Path, ctx: Context) -> list[Finding]:
    """Check one named file by its kind.

    A .env file is parsed; a local `.assern/config.toml` is read and resolved from its
    project root; anything else is read as a global config (TOML, mcpServers JSON or
    the original YAML layout) and resolved as `--config`, so undefined variables in
    the current environment are found too.
    """
    if not path.is_file():
        return [Finding(file=str(path), problems=("file not found",))]
    home = user_home(ctx.environ)
    if path.name == ".env" or path.suffix == ".env":
        return _attempt(path, lambda: read_dotenv(path))
    if path.parent.name == LOCAL_DIR and path.name == "config.toml":
        root = path.parent.parent
        found = _attempt(path, lambda: read_local(root, home=home))
        if any(finding.problems for finding in found):
            return found + _references(path, ctx, root)
        return found + _attempt(path, lambda: _resolve_at(ctx, config=None, cwd=root))
    found = _attempt(path, lambda: read_global(path, required=True, home=home))
    if any(finding.problems for finding in found):
        return found + _references(path, ctx)
    return found + _attempt(path, lambda: _resolve_at(ctx, config=path, cwd=ctx.cwd))


def _references(path: Path, ctx: Context, root: Path | None = None) -> list[Finding]:
    """Undefined `${VAR}` references of a TOML file that does not structure.

    Resolution finds them once a file reads; when it does not (a type error), they are
    looked for in the raw document, so that one run lists every kind of problem.
    """
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        return []
    try:
        document = parse_toml(path.read_text(encoding="utf-8"), file=str(path))
    except (OSError, UnicodeDecodeError, ConfigError):
        return []
    layers: list[dict[str, str]] = []
    for dotenv in ([root / LOCAL_DIR / ".env"] if root is not None else []) + [ctx.assern_home / ".env"]:
        try:
            layers.append(read_dotenv(dotenv) or {})
        except ConfigError:
            continue  # reported on its own
    problems = undefined_references(document, ChainMap(*layers, dict(ctx.environ)))
    return [Finding(file=str(path), problems=tuple(problems))] if problems else []


def _resolve_at(ctx: Context, *, config: Path | None, cwd: Path) -> ResolvedConfig:
    return resolve_config(
        config_path=config, project=None, cwd=cwd, environ=ctx.environ, assern_home=ctx.assern_home
    )


def check_current(
    ctx: Context, *, config: Path | None, project: str | None
) -> tuple[list[Finding], tuple[str, ...]]:
    """Check every file of the current configuration, then the whole resolution.

    Each file is read on its own first, so every broken file is listed, not only the
    first; the resolution (which finds undefined variables) runs when they all read.

    Returns:
        The findings, and the resolution's warnings.
    """
    home = user_home(ctx.environ)
    findings: list[Finding] = []
    global_env = ctx.assern_home / ".env"
    if global_env.is_file():
        findings += _attempt(global_env, lambda: read_dotenv(global_env))
    config_path = ctx.config_path(config)
    global_config = ctx.cwd / config_path if config_path is not None else ctx.assern_home / GLOBAL_CONFIG
    if config_path is not None or global_config.is_file():
        findings += _attempt(global_config, lambda: read_global(global_config, required=True, home=home))
        if findings and findings[-1].problems:
            findings += _references(global_config, ctx)
    root = find_local_root(ctx.cwd)
    if root is not None:
        local_env = root / LOCAL_DIR / ".env"
        if local_env.is_file():
            findings += _attempt(local_env, lambda: read_dotenv(local_env))
        local_config = root / LOCAL_DIR / "config.toml"
        if local_config.is_file():
            findings += _attempt(local_config, lambda: read_local(root, home=home))
            if findings[-1].problems:
                findings += _references(local_config, ctx, root)
    if any(finding.problems for finding in findings):
        return findings, ()
    try:
        resolved = ctx.resolve(config=config, project=project)
    except ConfigError as exc:
        return [*findings, Finding(file=exc.file or "(configuration)", problems=exc.problems)], ()
    warnings = (*resolved.warnings, *resolved.trust.lines())
    return [*findings, *(Finding(file=str(file)) for file in resolved.files)], warnings


# ----------------------------------------------------------------------- init / import


def cmd_init(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.assern_home / GLOBAL_CONFIG
    if not write_new(target, STARTER_CONFIG):
        _error(f"{target} already exists; it is left as it is (edit it, or move it away first)")
        return 1
    print(f"wrote {target}")
    print("next: `assernctl config validate`, then `assernctl config show`")
    return 0


def cmd_import(args: argparse.Namespace, ctx: Context) -> int:
    source = ctx.cwd / args.path
    try:
        imported = import_file(source)
    except ConfigError as exc:
        return _config_error(exc)
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output is not None:
        target = ctx.cwd / args.output
        if not write_new(target, to_toml(imported.document, source=source, notes=imported.notes)):
            _error(f"{target} already exists; it is left as it is")
            return 1
        print(f"wrote {target}", file=sys.stderr)
        return 0
    document: dict[str, Any] = imported.document
    hidden = 0
    if not _reveal(args.reveal):
        document, hidden = hide_literal_secrets(document)
    if hidden:
        _error(f"{hidden} literal env or header value(s) are redacted; use --output FILE to keep them")
    print(to_toml(document, source=source, notes=imported.notes, hidden=hidden), end="")
    return 0
