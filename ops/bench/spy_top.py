"""Summarise a py-spy raw (folded) profile: where the samples are, by frame.

    python ops/bench/spy_top.py prof/assern-20x10.txt [--match actors/] [--top 25]

Prints the frames with the most *self* samples (the innermost frame of a stack) and
the most *inclusive* samples (anywhere in a stack, counted once per stack), as
percentages of the samples that are not idle (an idle stack ends in a selector or
epoll wait). `--match` keeps only frames whose text contains it, e.g. the file names
of our own code.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

#: innermost frames of a thread that is waiting, not working
IDLE = re.compile(
    r"\b(select|poll|epoll|_epoll_wait|get_events|wait_for_events|_run_once)\b.*\(.*selectors|epoll"
)


def parse(path: Path) -> tuple[collections.Counter[str], collections.Counter[str], int, int]:
    self_counts: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    busy = idle = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        if IDLE.search(frames[-1]):
            idle += count
            continue
        busy += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    return self_counts, inclusive, busy, idle


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile", type=Path)
    parser.add_argument("--match", default="", help="keep only frames containing this text")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    self_counts, inclusive, busy, idle = parse(args.profile)
    total = busy + idle
    print(f"{total} samples: {busy} busy ({100 * busy / max(total, 1):.0f}%), {idle} idle")
    for title, counter in (("self", self_counts), ("inclusive", inclusive)):
        print(f"\ntop {title} (% of busy samples):")
        rows = [(frame, n) for frame, n in counter.most_common() if args.match in frame][: args.top]
        for frame, n in rows:
            print(f"  {100 * n / max(busy, 1):5.1f}%  {frame}")


if __name__ == "__main__":
    main()
