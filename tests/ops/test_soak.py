"""The soak's count of lost calls (ops/soak/run.py): kept at the client's transport,
requests written against answers read by id, and seen to count a lost answer.

The run without the fault is tests/e2e/test_operations.py's short soak (0 lost)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from ops_scripts import OPS, load_script

RUN = OPS / "soak" / "run.py"


soak = load_script(RUN, "soak_run")


def call(id_: int) -> JSONRPCRequest:
    return JSONRPCRequest(jsonrpc="2.0", id=id_, method="tools/call", params={"name": "s1_echo"})


def answer(id_: int) -> JSONRPCResponse:
    return JSONRPCResponse(jsonrpc="2.0", id=id_, result={"content": []})


def test_a_call_is_lost_until_its_answer_is_read_whatever_the_answer() -> None:
    wire = soak.Wire()
    for id_ in (1, 2, 3):
        wire.wrote(call(id_))
    wire.wrote(JSONRPCRequest(jsonrpc="2.0", id=4, method="tools/list"))  # not a call
    wire.wrote(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 3}))
    assert wire.unanswered() == {1, 2, 3}
    assert wire.read(answer(2))
    assert wire.read(JSONRPCError(jsonrpc="2.0", id=1, error=ErrorData(code=-32603, message="backend died")))
    assert wire.read(answer(4))  # passed on, and counts for nothing
    assert wire.read(answer(99))  # an id never written is no answer to a call
    assert wire.unanswered() == {3}
    assert wire.read(answer(3))
    assert wire.unanswered() == set()


def test_the_fault_drops_exactly_the_chosen_answer_and_leaves_it_lost() -> None:
    wire = soak.Wire(drop_answer=2)
    for id_ in (1, 2, 3):
        wire.wrote(call(id_))
    assert [wire.read(answer(id_)) for id_ in (3, 1, 2)] == [True, False, True]
    assert wire.dropped == [1]
    assert wire.unanswered() == {1}


@pytest.mark.e2e
def test_a_short_soak_with_one_answer_dropped_reports_one_lost(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    short = ["--duration", "3", "--warmup", "1", "--kill-every", "1", "--reload-every", "2"]
    short += ["--concurrency", "8", "--timeout", "2", "--drop-one-answer"]
    result = subprocess.run(
        [sys.executable, str(RUN), *short, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    assert figures["answers_dropped"] == 1
    assert figures["lost"] == 1
    assert figures["requests_written"] == figures["calls"] == figures["answers_read"] + 1
    assert figures["hung"] == 1  # the call whose answer never came waited out its bound
    assert "lost            1 (at the wire" in result.stdout
