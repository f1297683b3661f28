"""Run the official MCP conformance harness against the fixture directly and through assern.

    python ops/conformance/run.py                    # hybrid naming, harness 0.1.16
    python ops/conformance/run.py --naming prefix    # the original Assern's resource URIs
    python ops/conformance/run.py --naming hybrid --naming prefix  # both, one direct run
    python ops/conformance/run.py --install-only     # fetch Node and the harness, run nothing
    python ops/conformance/run.py --harness 0.2.0-alpha.12 --requirements 2026-07-28  # MODERN_HARNESS
                                                     # the stateless revision's scenarios

The harness (`@modelcontextprotocol/conformance` from the npm registry) needs Node 22
or newer; when the machine's `node` is older, Node itself is installed from the npm
registry too (the `node` package), both into `ops/conformance/.tools/` (ignored by
git). Its server scenarios then run twice, each on a fresh server:

  direct  the fixture (`fixture_server.py`, written with the official SDK) served over
          streamable HTTP by the SDK's own app;
  assern  `assern serve --http` with that same fixture as its only stdio backend, in
          each naming mode given (hybrid by default; one direct run serves them all);
          with `--requirements 2026-07-28` assern speaks that revision to the fixture
          (`protocol = "2026-07-28"`), since a backend's own input rounds exist only there.

It prints both scores side by side and every scenario that passes directly but not
through assern. The exit status is 0 when there is none, apart from the differences
the chosen naming documents (`naming = "prefix"` exposes every tool and prompt as
`fixture_NAME` and every resource URI as `assern://fixture/URI`, so the scenarios that
ask for the fixture's own names cannot pass: that is the rule, listed as expected),
and 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from assern_http import free_port, http_front, started  # noqa: E402

TOOLS = HERE / ".tools"
FIXTURE = HERE / "fixture_server.py"
HARNESS_PACKAGE = "@modelcontextprotocol/conformance"
HARNESS_VERSION = "0.1.16"
#: the first harness release with the 2026-07-28 scenarios (`--requirements 2026-07-28`)
MODERN_HARNESS = "0.2.0-alpha.12"
NODE_PACKAGE = "node@22"
MIN_NODE = 22
#: the stateless revisions: their scenarios are run with assern speaking that revision to
#: the fixture too (a backend's `input_required` rounds exist only there)
MODERN_REVISIONS = ("2026-07-28",)

# With `naming = "prefix"` every tool and prompt is `SERVER_NAME` and every resource URI
# `assern://SERVER/URI` (README, "Naming": the original Assern's rule), so a scenario that
# calls the fixture's own names cannot pass there; those are listed as expected, with why.
PREFIX_RULE = {
    "tools-call-": "tools are exposed as fixture_TOOL",
    "elicitation-sep": "tools are exposed as fixture_TOOL",
    "prompts-get-": "prompts are exposed as fixture_PROMPT",
    "completion-complete": "prompts are exposed as fixture_PROMPT",
    "resources-read-": "resource URIs are exposed as assern://fixture/URI",
    "resources-templates-read": "resource URIs are exposed as assern://fixture/URI",
    "resources-subscribe": "resource URIs are exposed as assern://fixture/URI",
    "resources-unsubscribe": "resource URIs are exposed as assern://fixture/URI",
    # the stateless revision's scenarios (harness 0.2) call the fixture's own names too
    "input-required-result-": "tools and prompts are exposed as fixture_NAME",
    "json-schema-2020-12": "tools are exposed as fixture_TOOL",
    "server-stateless": "its diagnostic tools are exposed as fixture_TOOL",
}


def rule_for(scenario: str, naming: str) -> str | None:
    """Why `scenario` cannot pass through assern in `naming`, if a documented rule says so."""
    if naming != "prefix":
        return None
    return next((why for start, why in PREFIX_RULE.items() if scenario.startswith(start)), None)


def node_major(node: str) -> int | None:
    """The major version of the `node` executable at `node`, or None if it does not run."""
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"v(\d+)\.", out.strip())
    return int(found.group(1)) if found else None


def find_node() -> str | None:
    """A Node >= 22: the machine's own, else the one installed under .tools/."""
    for candidate in (shutil.which("node"), str(TOOLS / "node_modules" / ".bin" / "node")):
        if candidate and (major := node_major(candidate)) is not None and major >= MIN_NODE:
            return candidate
    return None


def harness_script(version: str) -> Path:
    return TOOLS / version / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def npm_install(prefix: Path, *packages: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to install the conformance harness (and Node 22 if missing)")
    prefix.mkdir(parents=True, exist_ok=True)
    if not (prefix / "package.json").exists():
        (prefix / "package.json").write_text('{"private": true}\n')
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(prefix), *packages],
        check=True,
    )


def install(version: str) -> tuple[str, Path]:
    """Node >= 22 and the harness at `version`, installed when missing."""
    node = find_node()
    if node is None:
        npm_install(TOOLS, NODE_PACKAGE)
        node = find_node()
        if node is None:
            raise SystemExit(f"no Node >= {MIN_NODE} after installing {NODE_PACKAGE} from the npm registry")
    script = harness_script(version)
    if not script.exists():
        npm_install(TOOLS / version, f"{HARNESS_PACKAGE}@{version}")
    return node, script


def run_harness(node: str, script: Path, url: str, out: Path, selection: list[str]) -> dict[str, bool]:
    """Every server scenario's outcome: passed unless one of its checks is a FAILURE.

    `selection`: the harness's arguments that choose the scenarios (`--suite S` or
    `--requirements REVISION`)."""
    argv = [node, str(script), "server", "--url", url, *selection, "-o", str(out)]
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=False)
    outcomes: dict[str, bool] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        results = json.loads(checks.read_text())
        outcomes[scenario] = bool(results) and all(c.get("status") != "FAILURE" for c in results)
    if not outcomes:
        raise SystemExit(f"the harness produced no results under {out}")
    return outcomes


def assern_config(work: Path, naming: str, protocol: str | None = None) -> Path:
    """assern's config: the fixture as its only stdio backend, spoken to in `protocol`
    (assern's default, the handshake era, when None)."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "config.toml"
    pin = "" if protocol is None else f"protocol = {json.dumps(protocol)}\n"
    config.write_text(
        f'[settings]\nnaming = "{naming}"\n\n'
        f"[servers.fixture]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(FIXTURE))}]\n"
        + pin
    )
    return config


def compare(direct: dict[str, bool], through: dict[str, bool], naming: str) -> tuple[list[str], list[str]]:
    """(unexplained, expected): scenarios that pass directly and fail through assern."""
    lost = sorted(s for s, ok in direct.items() if ok and not through.get(s, False))
    expected = [s for s in lost if rule_for(s, naming)]
    return [s for s in lost if s not in expected], expected


def report(direct: dict[str, bool], through: dict[str, bool], naming: str, version: str) -> int:
    unexplained, expected = compare(direct, through, naming)
    scenarios = sorted(set(direct) | set(through))
    width = max(len(s) for s in scenarios)
    print(f"MCP conformance harness {version}, server scenarios; assern naming = {naming!r}")
    print(f"{'scenario':<{width}}  direct  assern")
    for name in scenarios:
        marks = [
            "pass" if table.get(name) else ("FAIL" if name in table else "-") for table in (direct, through)
        ]
        print(f"{name:<{width}}  {marks[0]:<6}  {marks[1]}")
    print(
        f"{'total':<{width}}  {sum(direct.values())}/{len(direct):<4}  {sum(through.values())}/{len(through)}"
    )
    for name in expected:
        print(f"expected by the naming rule: {name} ({rule_for(name, naming)})")
    for name in unexplained:
        print(f"passes directly, FAILS through assern: {name}")
    if not unexplained:
        print(
            "every scenario that passes directly passes through assern"
            + (" (but the listed rule)" if expected else "")
        )
    return 1 if unexplained else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--naming",
        choices=["hybrid", "prefix"],
        action="append",
        help="assern's naming mode (repeatable: each runs through assern against one direct run)",
    )
    parser.add_argument(
        "--harness", default=HARNESS_VERSION, help=f"harness version (default {HARNESS_VERSION})"
    )
    parser.add_argument("--suite", default="active", help="the harness's suite: active (default) or all")
    parser.add_argument(
        "--requirements",
        metavar="REVISION",
        help="run exactly the scenarios a protocol revision requires (e.g. 2026-07-28, harness 0.2+); "
        "for 2026-07-28 assern speaks that revision to the fixture too",
    )
    parser.add_argument("--install-only", action="store_true", help="install Node and the harness, then stop")
    parser.add_argument("--keep", type=Path, help="keep the harness's results in this folder")
    parser.add_argument("--json", type=Path, help="also write both outcomes and the differences here")
    args = parser.parse_args()
    namings: list[str] = list(dict.fromkeys(args.naming or ["hybrid"]))
    node, script = install(args.harness)
    if args.install_only:
        print(f"node {node}; harness {script}")
        return 0
    with tempfile.TemporaryDirectory(prefix="assern-conformance-") as folder:
        work = args.keep or Path(folder)
        work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ASSERN_HOME": str(work / "home"), "PYTHONUNBUFFERED": "1"}
        chosen = ["--requirements", args.requirements] if args.requirements else ["--suite", args.suite]
        protocol = args.requirements if args.requirements in MODERN_REVISIONS else None
        port = free_port()
        fixture = [sys.executable, str(FIXTURE), "--http", str(port)]
        with started(fixture, env, work / "fixture.log", r"(ready)"):
            direct = run_harness(node, script, f"http://127.0.0.1:{port}/mcp", work / "direct", chosen)
        through: dict[str, dict[str, bool]] = {}
        for naming in namings:
            config = assern_config(work / naming, naming, protocol)
            with http_front(config, env, work / f"assern-{naming}.log") as (_, url):
                through[naming] = run_harness(node, script, url, work / f"assern-{naming}", chosen)
    if args.json:
        runs = {}
        for naming, outcomes in through.items():
            unexplained, expected = compare(direct, outcomes, naming)
            runs[naming] = {"assern": outcomes, "unexplained": unexplained, "expected": expected}
        figures = {"harness": args.harness, "requirements": args.requirements, "direct": direct}
        args.json.write_text(json.dumps({**figures, "namings": runs}, indent=2))
    chosen = (
        f"{args.harness}, the scenarios {args.requirements} requires" if args.requirements else args.harness
    )
    return max(report(direct, outcomes, naming, chosen) for naming, outcomes in through.items())


if __name__ == "__main__":
    sys.exit(main())
