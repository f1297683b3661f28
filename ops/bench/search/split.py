"""Split the labelled units of the search benchmark into held-out and tuning parts.

    .venv/bin/python ops/bench/search/split.py     # split the units not split yet

The first run chose the seed and wrote split.toml. Every later run keeps the units
already split where they are and splits only new ones, with a generator seeded by the
recorded seed and the number of units split before (so a run is reproducible).
Held out: `SHARE` of the units of each set (own, readme), chosen at random.
"""

from __future__ import annotations

import math
import random
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package

SEED = 4417
SHARE = 0.4


def main() -> int:
    seed, heldout, tuning = (SEED, set(), set())
    if labels.SPLIT.exists():
        seed, heldout, tuning = labels.read_split()
    done = heldout | tuning
    generator = random.Random(seed * 1_000_003 + len(done))
    for source_set, units in labels.units().items():
        new = [unit for unit in units if unit not in done]
        chosen = set(generator.sample(new, math.ceil(SHARE * len(new)))) if new else set()
        heldout |= chosen
        tuning |= set(new) - chosen
        print(f"{source_set}: {len(new)} new units, {len(chosen)} held out")
    lines = [
        "# The held-out split of the search benchmark (written by split.py; see labels.py).",
        "# Held-out units are never looked at while tuning the search.",
        f"seed = {seed}",
        "heldout = [",
        *(f"    {tomllib_string(unit)}," for unit in sorted(heldout)),
        "]",
        "tuning = [",
        *(f"    {tomllib_string(unit)}," for unit in sorted(tuning)),
        "]",
    ]
    labels.SPLIT.write_text("\n".join(lines) + "\n")
    return 0


def tomllib_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    value = f'"{escaped}"'
    assert tomllib.loads(f"v = {value}")["v"] == text
    return value


if __name__ == "__main__":
    sys.exit(main())
