"""The benchmark report's comparison of assern with its peers (ops/bench/report.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops" / "bench"))
import report


def result(**figures: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "initialize_s": 0.2,
        "call": {"overhead_median_us": 300.0},
        "throughput": {"ratio": 0.9},
        "crash": {"failed_calls": 1, "recovered_s": 0.6, "other_backend_calls": None},
        "leftover_processes": 0,
    }
    return base | figures


def scenario(**results: dict[str, Any]) -> dict[str, Any]:
    return {"label": "K=5 x 10 tools", "results": results}


def test_assern_better_everywhere_is_behind_nowhere() -> None:
    slower = result(
        initialize_s=1.0,
        call={"overhead_median_us": 3000.0},
        throughput={"ratio": 0.2},
        crash={"failed_calls": 1, "recovered_s": 0.7, "other_backend_calls": None},
    )
    compared, behind = report.behind_peers(scenario(assern=result(), fastmcp=slower, magg=slower))
    # five figures against two peers; the shared floors (1 failed call, 0 left) count as met
    assert compared == 12
    assert behind == []


def test_each_line_behind_any_peer_is_named_with_both_figures() -> None:
    faster = result(
        initialize_s=0.1,
        call={"overhead_median_us": 3000.0},
        throughput={"ratio": 0.95},
        crash={"failed_calls": 1, "recovered_s": 0.7, "other_backend_calls": None},
    )
    same = result()
    compared, behind = report.behind_peers(scenario(assern=result(), fastmcp=faster, magg=same))
    assert compared == 12
    # in the report's order of lines, then of peers; a tie is not better, except on floors
    assert behind == [
        "initialize: assern 0.2 vs fastmcp 0.1",
        "initialize: assern 0.2 vs magg 0.2",
        "call overhead median: assern 300 vs magg 300",
        "throughput ratio: assern 0.9 vs fastmcp 0.95",
        "throughput ratio: assern 0.9 vs magg 0.9",
        "crash answers again after: assern 0.6 vs magg 0.6",
    ]


def test_a_backend_that_never_came_back_is_behind_one_that_did() -> None:
    never = result(crash={"failed_calls": 51, "recovered_s": None, "other_backend_calls": None})
    back = result(initialize_s=1.0, call={"overhead_median_us": 3000.0}, throughput={"ratio": 0.2})
    _, behind = report.behind_peers(scenario(assern=never, fastmcp=back))
    assert behind == [
        "crash failed calls: assern 51 vs fastmcp 1",
        "crash answers again after: assern inf vs fastmcp 0.6",
    ]


def test_figures_a_peer_lacks_are_not_compared() -> None:
    compared, behind = report.behind_peers(scenario(assern=result(), fastmcp={"initialize_s": 0.3}))
    assert (compared, behind) == (1, [])
