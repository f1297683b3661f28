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
ask for the fixture's own names cannot pass: that is the rule, listed as expected when
every failing check of the scenario says so itself, see `prefix_explains`), and 1
otherwise; each unexplained scenario is printed with its failing checks' messages.
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

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
# calls the fixture's own names cannot pass there. A failure is put down to that rule by
# what the failing checks themselves say, never by the scenario's name (`classify`):
#
# - a name is *shown prefixed* when assern said it knows no tool, prompt or resource of
#   that name (the one the scenario sent: "Unknown tool 'X'", or the harness's "Tool 'X'
#   not found") and the same text shows it under its prefix (`fixture_X`, or a URI or
#   URI template `assern://fixture/…` that the URI fills);
# - a failing check is explained when it quotes a name shown prefixed in its scenario
#   (a check saying "does not list the tool 'X'" beside the one where assern answered
#   "Unknown tool 'X' … fixture_X");
# - a few checks say nothing of their cause (`NO_CAUSE_GIVEN`, each by its id and exact
#   message: a round of a call that could not start): not explained, and listed apart
#   as *unverified*, never as expected.
#
# A check that failed for any other reason (a wrong value, a missing notification, an
# error of another kind, a name assern does not know even prefixed) is unexplained,
# in whichever scenario it happens.
SERVER = "fixture"
PREFIX_RULE = {
    "tool": f"tools are exposed as {SERVER}_TOOL",
    "prompt": f"prompts are exposed as {SERVER}_PROMPT",
    "resource": f"resource URIs are exposed as assern://{SERVER}/URI",
}
#: assern's answer to a name it does not know (and the harness's own words for a tool it
#: did not find listed), with the name as the scenario sent it
UNKNOWN_NAME = re.compile(r"Unknown (tool|prompt|resource) '([^']+)'|(Tool) '([^']+)' not found")
#: a resource URI or URI template as assern shows it
PREFIXED_URI = re.compile(rf"assern://{SERVER}/([^\s,\"]+?)(?=[,\"?]|\s|$)")
#: a name a failing check quotes
QUOTED = re.compile(r"'([^']+)'")
#: the failing checks (id and message as `failures_of` writes them) that give no cause:
#: the first round of an input-required call, and the check that needs that round
NO_CAUSE_GIVEN = frozenset(
    {
        "sep-2322-multi-round-r1: Expected InputRequiredResult with inputRequests and requestState",
        "sep-2322-reject-tampered-state: Prerequisite failed: could not get initial InputRequiredResult "
        "with requestState",
    }
)
#: what the harness writes when a scenario recorded no check at all
NO_CHECKS = "the harness recorded no checks"


def _template_holds(template: str, uri: str) -> bool:
    """Whether `uri` fills the URI template `template` (each `{…}` one path segment)."""
    parts = re.split(r"\{[^}]*\}", template)
    return re.fullmatch("[^/]+".join(re.escape(part) for part in parts), uri) is not None


def shown_prefixed(text: str) -> dict[str, str]:
    """The names `text` shows assern knows only under the fixture's prefix, each with the
    rule that says why."""
    shown: dict[str, str] = {}
    for found in UNKNOWN_NAME.finditer(text):
        kind, name = (found.group(1), found.group(2)) if found.group(1) else ("tool", found.group(4))
        if kind == "resource":
            if any(_template_holds(uri, name) for uri in PREFIXED_URI.findall(text)):
                shown[name] = PREFIX_RULE[kind]
        elif re.search(rf"(?<![\w-]){re.escape(f'{SERVER}_{name}')}(?![\w-])", text):
            shown[name] = PREFIX_RULE[kind]
    return shown


@attrs.frozen
class Verdict:
    """How a scenario's failing checks are accounted for in one naming."""

    #: why the naming rule explains every failing check (None: it does not)
    expected: str | None = None
    #: every failing check is explained or gives no cause, and at least one gives none
    unverified: bool = False


def classify(failures: Sequence[str], naming: str) -> Verdict:
    """Account for a scenario's failing checks through assern in `naming`: the naming
    rule explains it only when each failing check says so itself (see above)."""
    if naming != "prefix" or not failures:
        return Verdict()
    shown: dict[str, str] = {}
    for text in failures:
        shown.update(shown_prefixed(text))
    reasons: list[str] = []
    silent = False
    for text in failures:
        quoted = [name for name in QUOTED.findall(text) if name in shown]
        if quoted:
            reasons.append(shown[quoted[0]])
        elif text in NO_CAUSE_GIVEN:
            silent = True
        else:
            return Verdict()
    if silent:
        return Verdict(unverified=True)
    return Verdict(expected="; ".join(dict.fromkeys(reasons)))


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


def failures_of(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """What each FAILURE among a scenario's recorded checks said (none: it passed): its
    id, its message, and its details (the answer it got, when it kept it) on a line of
    their own."""
    if not results:
        return [NO_CHECKS]
    return [
        f"{check.get('id', '?')}: {check.get('errorMessage') or ''}"
        + (f"\n{json.dumps(check['details'])}" if check.get("details") else "")
        for check in results
        if check.get("status") == "FAILURE"
    ]


def run_harness(node: str, script: Path, url: str, out: Path, selection: list[str]) -> dict[str, list[str]]:
    """Every server scenario's failing checks' messages (none: it passed).

    `selection`: the harness's arguments that choose the scenarios (`--suite S` or
    `--requirements REVISION`)."""
    argv = [node, str(script), "server", "--url", url, *selection, "-o", str(out)]
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=False)
    outcomes: dict[str, list[str]] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        outcomes[scenario] = failures_of(json.loads(checks.read_text()))
    if not outcomes:
        raise SystemExit(f"the harness produced no results under {out}")
    return outcomes


def passed(outcomes: Mapping[str, Sequence[str]]) -> dict[str, bool]:
    return {scenario: not failures for scenario, failures in outcomes.items()}


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


@attrs.frozen
class Comparison:
    """The scenarios that pass directly and fail through assern, accounted for."""

    #: no documented rule explains them: the run fails
    unexplained: list[str]
    #: the naming rule explains every failing check, by its own message: why
    expected: dict[str, str]
    #: some failing check gives no cause (`NO_CAUSE_GIVEN`), the others are the rule's
    unverified: list[str]


def compare(
    direct: Mapping[str, Sequence[str]], through: Mapping[str, Sequence[str]], naming: str
) -> Comparison:
    """Account for the scenarios that pass directly and fail through assern; a scenario
    assern's run did not record at all is unexplained."""
    lost = sorted(s for s, failures in direct.items() if not failures and through.get(s, [NO_CHECKS]))
    verdicts = {s: classify(through[s], naming) if s in through else Verdict() for s in lost}
    return Comparison(
        unexplained=[s for s, v in verdicts.items() if v.expected is None and not v.unverified],
        expected={s: v.expected for s, v in verdicts.items() if v.expected is not None},
        unverified=[s for s, v in verdicts.items() if v.unverified],
    )


def first_line(message: str) -> str:
    return message.splitlines()[0][:300] if message else message


def report(
    direct_run: Mapping[str, Sequence[str]],
    through_run: Mapping[str, Sequence[str]],
    naming: str,
    version: str,
) -> int:
    found = compare(direct_run, through_run, naming)
    direct, through = passed(direct_run), passed(through_run)
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
    for name, why in found.expected.items():
        print(f"expected by the naming rule, as its failing checks say: {name} ({why})")
    for name in found.unverified:
        print(f"fails through assern, a failing check gives no cause (not verified): {name}")
        for message in through_run[name]:
            print(f"    {first_line(message)}")
    for name in found.unexplained:
        print(f"passes directly, FAILS through assern: {name}")
        for message in through_run.get(name, [NO_CHECKS]):
            print(f"    {first_line(message)}")
    if not found.unexplained:
        print(
            "every scenario that passes directly passes through assern"
            + (" (but the listed rule)" if found.expected or found.unverified else "")
        )
    return 1 if found.unexplained else 0


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
        through: dict[str, dict[str, list[str]]] = {}
        for naming in namings:
            config = assern_config(work / naming, naming, protocol)
            with http_front(config, env, work / f"assern-{naming}.log") as (_, url):
                through[naming] = run_harness(node, script, url, work / f"assern-{naming}", chosen)
    if args.json:
        runs = {}
        for naming, outcomes in through.items():
            found = compare(direct, outcomes, naming)
            runs[naming] = {
                "assern": passed(outcomes),
                "failures": {s: failures for s, failures in outcomes.items() if failures},
                "unexplained": found.unexplained,
                "expected": sorted(found.expected),
                "why": found.expected,
                "unverified": found.unverified,
            }
        figures = {"harness": args.harness, "requirements": args.requirements, "direct": passed(direct)}
        args.json.write_text(json.dumps({**figures, "namings": runs}, indent=2))
    title = (
        f"{args.harness}, the scenarios {args.requirements} requires" if args.requirements else args.harness
    )
    return max(report(direct, outcomes, naming, title) for naming, outcomes in through.items())


if __name__ == "__main__":
    sys.exit(main())
