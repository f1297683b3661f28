"""Every figure of README and docs/ has a script that prints it (ops/bench/figures.py,
with the registry figures.toml), and the checker catches each way one can stop being
printed; the small benchmark scripts that print README's figures run, in a tiny
configuration, and print every figure they promise, none of them zero:
ops/bench/spawn.py, startup.py and memory.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench"
sys.path.insert(0, str(BENCH))
import figures  # noqa: E402


def test_every_figure_of_readme_and_docs_is_printed_by_a_script() -> None:
    assert figures.problems() == []


def test_the_check_reads_every_page_and_finds_figures_in_them() -> None:
    found = figures.pages(figures.ROOT)
    assert "README.md" in found
    assert "docs/limits.md" in found
    assert "docs/changelog.md" not in found
    quoted = [
        figure
        for page, text in found.items()
        for block in figures.blocks(page, text)
        for figure in figures.figures_in(block.text)
    ]
    assert len(quoted) > 500


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("NDCG@10 0.889 (BM25 0.602), −0.035 held out", ["0.889", "0.602", "−0.035"]),
        (
            "a call takes 1.2 ms, p99 3,250 µs, RSS 40 MB, 85 %, 0.41 ×, 700 tokens",
            ["1.2 ms", "3,250 µs", "40 MB", "85 %", "0.41 ×", "700 tokens"],
        ),
        ("Codex CLI 0.171.0, Python 3.11, K = 20, 2026-07-28, issue 42", []),
        ("`indexing 800 files, 6 s` and [the page](page.md#5-ms)", []),
    ],
)
def test_figures_are_measures_and_scores_not_versions_dates_or_code(text: str, quoted: list[str]) -> None:
    assert figures.figures_in(text) == quoted


SCRIPT = """\
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--size")
print(f"call median {1.0:.2f} ms, RSS {2.0} MB")
"""
PAGE = """\
# Page

Some prose with no figure, and `inline 12 ms` code.

## Speed

`ops/bench/speed.py --size 3` prints it: a call takes 1.2 ms, RSS 40 MB.

```sh
ops/bench/speed.py --size 5   # 7 ms in a code block is no figure
```

## Defaults

The timeout is 300 s.
"""
REGISTRY = """\
[[section]]
page = "docs/page.md"
heading = "Speed"
prints."ops/bench/speed.py" = ["call median", "RSS"]

[[section]]
page = "docs/page.md"
heading = "Defaults"
settings = "a default"
"""


def _tree(root: Path, *, script: str = SCRIPT, page: str = PAGE, registry: str = REGISTRY) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "ops" / "bench").mkdir(parents=True)
    (root / "README.md").write_text("# Project\n\nNo figures here.\n")
    (root / "docs" / "page.md").write_text(page)
    (root / "docs" / "changelog.md").write_text("# Changes\n\n3 ms faster.\n")
    if script:
        (root / "ops" / "bench" / "speed.py").write_text(script)
    (root / "figures.toml").write_text(registry)
    return root


def test_a_tree_whose_figures_each_have_their_script_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert figures.problems(root, root / "figures.toml") == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"page": PAGE + "\n## New\n\nIt now takes 0.9 ms.\n"}, "quotes 0.9 ms but no script is registered"),
        ({"script": ""}, "its script ops/bench/speed.py does not exist"),
        ({"script": SCRIPT.replace("call median", "call p50")}, "prints no 'call median' any more"),
        ({"script": SCRIPT.replace('"--size"', '"--count"')}, "the script has no --size any more"),
        (
            {"page": PAGE.replace("`ops/bench/speed.py --size 3` prints it", "It measures")},
            "does not name ops/bench/speed.py",
        ),
        ({"page": PAGE.replace("## Defaults", "## Settings")}, "no such section"),
    ],
)
def test_each_way_a_figure_loses_its_script_is_reported(
    tmp_path: Path, change: dict[str, str], reason: str
) -> None:
    root = _tree(tmp_path, **change)
    found = figures.problems(root, root / "figures.toml")
    assert any(reason in line for line in found), found


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('settings = "x"\nprints."a.py" = ["b"]', "give `prints` (script -> labels) or `settings` (why)"),
        ("", "give `prints` (script -> labels) or `settings` (why)"),
        ('prints."a.py" = []', "each script in `prints` has a list of labels"),
    ],
)
def test_a_malformed_registry_entry_is_named(tmp_path: Path, entry: str, message: str) -> None:
    registry = tmp_path / "figures.toml"
    registry.write_text(
        textwrap.dedent(f"""\
        [[section]]
        page = "docs/page.md"
        heading = "Speed"
        {entry}
        """)
    )
    with pytest.raises(ValueError, match=re.escape("section 1 ('docs/page.md', 'Speed')")) as caught:
        figures.load(registry)
    assert message in str(caught.value)


def run(tmp_path: Path, script: str, *argv: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *argv, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures, done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="setpriv --pdeathsig is Linux's")
def test_the_spawn_bench_prints_both_ways_of_starting_a_backend(tmp_path: Path) -> None:
    figures, printed = run(tmp_path, "spawn.py", "--starts", "3")
    assert figures["starts"] == 3
    assert figures["rss_mb"] > 0
    for way in ("setpriv (vfork)", "preexec hook (fork)"):
        assert 0 < figures[way]["min_ms"] <= figures[way]["median_ms"], way
        assert f"{way} " in printed


@pytest.mark.e2e
def test_the_startup_bench_prints_each_collector_setting_s_cpu_and_peak(tmp_path: Path) -> None:
    figures, printed = run(tmp_path, "startup.py", "--starts", "1")
    assert set(figures) == {"deferred", "untouched", "off"}
    for kind, row in figures.items():
        assert row["starts"] == 1
        assert row["cpu_s_median"] > 0, kind
        assert row["peak_rss_mb_median"] > 0, kind
        assert f"collector {kind}" in printed


@pytest.mark.e2e
def test_the_memory_bench_prints_assern_s_rss_by_tool_count_and_its_floor(tmp_path: Path) -> None:
    figures, printed = run(tmp_path, "memory.py", "--size", "1x2", "--size", "2x3")
    assert figures["floor_mb"] > 0
    rows = {(row["tools"], row["client"]): row for row in figures["assern"]}
    assert set(rows) == {(2, "legacy"), (6, "legacy"), (6, "2026-07-28")}
    for key, row in rows.items():
        assert row["rss_mb"] > 0, key
        assert row["peak_rss_mb"] >= row["rss_mb"], key
        # one instance: assern and its watchdog, each with its RSS and PSS, the backends apart
        roles = [process["role"] for process in row["processes"]]
        assert roles == ["assern", "watchdog"], key
        assert all(process["pss_mb"] > 0 for process in row["processes"]), key
        pss = sum(process["pss_mb"] for process in row["processes"])
        assert abs(row["instance_pss_mb"] - pss) <= 0.2, key
        assert row["backend_processes"] >= row["backends"], key
        assert row["backends_pss_mb"] > 0, key
    assert "a bare interpreter with trio, ssl and mcp_types" in printed
    assert "6 tools (2 backends), a 2026-07-28 client" in printed
    assert "one instance, backends apart: PSS" in printed
    assert printed.startswith("load average (1, 5, 15 min) before: ")
