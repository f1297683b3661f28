"""Every figure of README.md and docs/ against the script that prints it.

    .venv/bin/python ops/bench/figures.py          # lists every problem; exit 1 if any

A figure is a number with a unit (ms, µs, s, MB, %, ×, tokens, …) or a score such as
0.889, in a paragraph, a list item or a table (code blocks aside). `figures.toml`
beside this file registers each section (a page and a heading) that quotes figures:
the scripts that print them and, for each, labels of what they print; or, for a
section whose numbers are settings, limits or examples rather than measurements, the
reason. The check fails when:

- a section holds a figure and is not registered (nor is a section above it);
- a registered script is gone, or no longer holds a label registered for it among
  the strings it prints (its own, or those of the modules beside it that it imports);
- a registered section does not name its scripts (path or file name), so a reader
  cannot tell where its figures come from;
- a command in the docs (`ops/…/x.py --flag`) gives a flag its script no longer has;
- a registered section is gone from its page.

So a figure that no script prints any more fails, as soon as its script loses the
measure or the page loses its script.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = Path(__file__).resolve().with_name("figures.toml")

#: a number with a unit of measure, or a score written 0.ddd (not a version, 0.171.0)
FIGURE = re.compile(
    r"(?<![\w.\-/])\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|s|MB|GB|KB|MiB|KiB|%|×|tokens)(?![\w/])"
    r"|(?<![\w.\-/])[−+-]?0\.\d{2,4}(?![\d\w]|\.\d)"
)
#: a command: a script of ops/ and the flags given to it
COMMAND = re.compile(r"(?<![\w/])(ops/[\w/-]+\.py)((?:[ \t]+(?:--[\w-]+|[^\s`#-][^\s`]*))*)")
FLAG = re.compile(r"--[\w-]+")


@attrs.frozen
class Block:
    """A paragraph, list item or table of a page, under its headings."""

    page: str
    line: int
    headings: tuple[str, ...]
    text: str


def blocks(page: str, text: str) -> Iterator[Block]:
    """The blocks of a Markdown page, each with the headings it is under (the page's
    title first), code blocks left out."""
    headings: list[str] = []
    lines: list[str] = []
    start = 0
    code = False

    def flush() -> Iterator[Block]:
        if lines:
            yield Block(page, start, tuple(headings), "\n".join(lines))
            lines.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            yield from flush()
            code = not code
            continue
        if code:
            continue
        heading = re.match(r"(#+) (.*)", line)
        if heading:
            yield from flush()
            headings[len(heading.group(1)) - 1 :] = [heading.group(2).strip()]
            continue
        item = re.match(r"\s*[-*] ", line) is not None
        table_starts = line.startswith("|") and bool(lines) and not lines[-1].startswith("|")
        if not line.strip() or item or table_starts:
            yield from flush()
            if not line.strip():
                continue
        if not lines:
            start = number
        lines.append(line)
    yield from flush()


def figures_in(text: str) -> list[str]:
    """The figures a block quotes (a link's target and inline code left out)."""
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"`[^`]*`", "", text)
    return [match.group(0) for match in FIGURE.finditer(text)]


def pages(root: Path) -> dict[str, str]:
    """README.md and every page of docs/ (the changelog's page aside: it includes
    CHANGELOG.md, whose entries keep the figures of their day)."""
    found = {"README.md": (root / "README.md").read_text(encoding="utf-8")}
    for path in sorted((root / "docs").glob("*.md")):
        if path.name != "changelog.md":
            found[f"docs/{path.name}"] = path.read_text(encoding="utf-8")
    return found


@attrs.frozen
class Section:
    """A registered section: its scripts and what each prints, or why it has none."""

    page: str
    heading: str
    scripts: dict[str, tuple[str, ...]]
    settings: str | None


def load(path: Path = REGISTRY) -> list[Section]:
    """The registry. Raises ValueError naming the entry that is malformed."""
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    sections = []
    for number, entry in enumerate(raw.get("section", []), 1):
        where = f"{path.name}: section {number} ({entry.get('page')!r}, {entry.get('heading')!r})"
        if not isinstance(entry.get("page"), str) or not isinstance(entry.get("heading"), str):
            raise ValueError(f"{where}: `page` and `heading` are strings")
        prints = entry.get("prints", {})
        settings = entry.get("settings")
        if bool(prints) == bool(settings):
            raise ValueError(f"{where}: give `prints` (script -> labels) or `settings` (why), one of them")
        if not all(isinstance(labels, list) and labels for labels in prints.values()):
            raise ValueError(f"{where}: each script in `prints` has a list of labels")
        scripts = {script: tuple(labels) for script, labels in prints.items()}
        sections.append(Section(entry["page"], entry["heading"], scripts, settings))
    return sections


def section_of(block: Block, registered: dict[tuple[str, str], Section]) -> Section | None:
    """The registered section a block belongs to: its own heading's, else the nearest above."""
    for depth in range(len(block.headings), 0, -1):
        found = registered.get((block.page, " > ".join(block.headings[1:depth])))
        if found is not None:
            return found
    return None


def printed_strings(script: Path) -> set[str]:
    """The string constants of a script (f-strings' literal parts included) and of the
    modules beside it that it imports."""
    strings: set[str] = set()
    todo, seen = [script], set()
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
            elif isinstance(node, ast.Import):
                todo += [path.with_name(f"{alias.name}.py") for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo.append(path.with_name(f"{node.module}.py"))
    return strings


def problems(root: Path = ROOT, registry: Path = REGISTRY) -> list[str]:
    """Every figure without a script that prints it, as lines that say where and why."""
    sections = load(registry)
    registered = {(s.page, s.heading): s for s in sections}
    found = pages(root)
    wrong: list[str] = []
    texts: dict[tuple[str, str], list[str]] = {}
    for page, text in found.items():
        for block in blocks(page, text):
            for depth in range(1, len(block.headings) + 1):
                texts.setdefault((page, " > ".join(block.headings[1:depth])), []).append(block.text)
            quoted = figures_in(block.text)
            if quoted and section_of(block, registered) is None:
                where = " > ".join(block.headings) or "(no heading)"
                wrong.append(
                    f"{page}:{block.line} ({where}) quotes {', '.join(quoted[:3])} but no script is "
                    f"registered for its section in {registry.name}"
                )
    for section in sections:
        name = f"{section.page} § {section.heading or '(top)'}"
        if section.page not in found or (section.page, section.heading) not in texts:
            wrong.append(f"{name}: registered in {registry.name}, but the page has no such section")
            continue
        said = "\n".join(texts[(section.page, section.heading)])
        for script, labels in section.scripts.items():
            path = root / script
            if not path.is_file():
                wrong.append(f"{name}: its script {script} does not exist")
                continue
            strings = printed_strings(path)
            # a benchmark is named by its path or file name; the product's own output
            # (a command's line, a log event) by what it prints
            named = script not in said and path.name not in said
            if script.startswith("ops/") and named:
                wrong.append(f"{name}: the section does not name {script}, whose figures it quotes")
            elif not script.startswith("ops/") and not any(label in said for label in labels):
                wrong.append(f"{name}: the section shows none of {script}'s lines {', '.join(labels)}")
            wrong.extend(
                f"{name}: {script} prints no {label!r} any more"
                for label in labels
                if not any(label in string for string in strings)
            )
    for page, text in found.items():
        for match in COMMAND.finditer(text):
            script, rest = match.group(1), match.group(2)
            path = root / script
            if not path.is_file():
                wrong.append(f"{page}: `{script}` is named but does not exist")
                continue
            strings = printed_strings(path)
            wrong.extend(
                f"{page}: `{script} {flag}`: the script has no {flag} any more"
                for flag in FLAG.findall(rest)
                if flag not in strings
            )
    return wrong


def main() -> int:
    wrong = problems()
    for line in wrong:
        print(line)
    print(f"{len(wrong)} problem(s): every figure of README.md and docs/ against the script that prints it")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
