"""A 2026-07-28 client's own input rounds: read from its request, checked on the way back."""

from __future__ import annotations

import mcp_types as types
import pytest

from assern.actors.backend.messages import Rounds
from assern.actors.backend.rounds import refuse_foreign_state
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.client_rounds import client_rounds, passed_back, undeclared


def asking(*methods: str) -> types.InputRequiredResult:
    requests = {
        "sampling/createMessage": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 5,
            },
        },
        "elicitation/create": {
            "method": "elicitation/create",
            "params": {"message": "ok?", "requestedSchema": {"type": "object", "properties": {}}},
        },
        "roots/list": {"method": "roots/list"},
    }
    return types.InputRequiredResult.model_validate(
        {
            "resultType": "input_required",
            "inputRequests": {f"k{i}": requests[m] for i, m in enumerate(methods)},
        }
    )


def test_the_round_fields_and_declared_capabilities_come_from_the_request() -> None:
    params = types.CallToolRequestParams.model_validate(
        {
            "name": "t",
            "inputResponses": {"k": {"action": "accept", "content": {"a": "b"}}},
            "requestState": "theirs",
            "_meta": {types.CLIENT_CAPABILITIES_META_KEY: {"sampling": {}}},
        }
    )
    rounds = client_rounds(params)
    assert rounds.request_state == "theirs"
    assert rounds.client_capabilities == {"sampling": {}}
    assert rounds.input_responses is not None
    assert isinstance(rounds.input_responses["k"], types.ElicitResult)
    bare = client_rounds(types.GetPromptRequestParams(name="p"))
    assert bare == Rounds()


def test_only_what_the_client_did_not_declare_is_missing() -> None:
    both = asking("sampling/createMessage", "elicitation/create", "roots/list")
    assert undeclared(both, {"sampling": {}}) == {"elicitation": {}, "roots": {}}
    assert undeclared(both, {"sampling": {}, "elicitation": {}, "roots": {}}) == {}
    assert undeclared(both, None) == {}  # nothing declared to check against


def test_an_input_request_the_client_cannot_answer_is_refused_with_32021() -> None:
    rounds = Rounds(client_capabilities={"roots": {}})
    with pytest.raises(RpcError) as refused:
        passed_back(asking("sampling/createMessage", "roots/list"), rounds, "alpha")
    assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}
    assert "server 'alpha' needs the client's sampling capability" in refused.value.message
    fine = asking("roots/list")
    assert passed_back(fine, rounds, "alpha") is fine
    done = types.CallToolResult(content=[])
    assert passed_back(done, rounds, "alpha") is done
    assert passed_back(asking("sampling/createMessage"), None, "alpha") is not None  # no rounds: as it came


def test_a_backend_without_rounds_refuses_a_state_and_ignores_stray_answers() -> None:
    refuse_foreign_state(None)
    refuse_foreign_state(Rounds(input_responses={"k": {}}))
    with pytest.raises(RpcError, match="unknown or expired") as refused:
        refuse_foreign_state(Rounds(request_state="theirs"))
    assert refused.value.code == types.INVALID_PARAMS
    assert refused.value.data == {"requestState": "theirs"}
