"""The conformance fixture's 2026-07-28 tools: input rounds (SEP-2322) and per-request capabilities.

A tool or prompt here answers a request that lacks what it needs with an
`InputRequiredResult` (the client's sampling, elicitation or roots, keyed by name) and
completes when the client retries with `inputResponses`. Where a scenario asks for
`requestState`, it is sealed with an HMAC under a key drawn when the process starts, so
a tampered or foreign state is refused (-32602). `fixture_server.py` registers these
beside the handshake-era tools; their names and answers are the harness's scenario
descriptions (`conformance list`, the `input-required-result-*` and `server-stateless`
scenarios).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

Params = types.CallToolRequestParams | types.GetPromptRequestParams
Outcome = types.CallToolResult | types.InputRequiredResult
Round = Callable[[Params], Awaitable[Outcome]]


def ask_name(message: str, field: str = "name") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def ask_model(prompt: str, max_tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    return {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": max_tokens}}


ASK_ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}
ASK_CONFIRM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "message": "Please confirm",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}


def text_result(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


def capabilities(params: Params) -> Mapping[str, Any]:
    """What the client declared in this request's `_meta`."""
    declared = (params.meta or {}).get(types.CLIENT_CAPABILITIES_META_KEY)
    return declared if isinstance(declared, Mapping) else {}


def answers(params: Params) -> dict[str, Any]:
    """The request's `inputResponses`, each as a plain dict."""
    return {
        key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
        if hasattr(value, "model_dump")
        else value
        for key, value in (params.input_responses or {}).items()
    }


def answered_text(answer: Mapping[str, Any]) -> str:
    """A sampling answer's text, or the whole answer as JSON."""
    content = answer.get("content")
    if isinstance(content, Mapping) and isinstance(content.get("text"), str):
        return str(content["text"])
    return json.dumps(answer, sort_keys=True)


class Rounds:
    """The input-round tools and prompt; the only state is the key that seals `requestState`."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self.tools: dict[str, Round] = {
            "test_input_required_result_elicitation": self.elicitation,
            "test_input_required_result_sampling": self.sampling,
            "test_input_required_result_list_roots": self.list_roots,
            "test_input_required_result_request_state": self.request_state,
            "test_input_required_result_multiple_inputs": self.multiple_inputs,
            "test_input_required_result_multi_round": self.multi_round,
            "test_input_required_result_tampered_state": self.tampered_state,
            "test_input_required_result_capabilities": self.by_capabilities,
            "test_missing_capability": self.missing_capability,
            "test_streaming_elicitation": self.elicitation,
        }

    def definitions(self) -> list[types.Tool]:
        no_args: dict[str, Any] = {"type": "object", "properties": {}}
        described = {
            "test_input_required_result_elicitation": "Asks the user's name in an input round.",
            "test_input_required_result_sampling": "Asks the client's model in an input round.",
            "test_input_required_result_list_roots": "Asks the client's roots in an input round.",
            "test_input_required_result_request_state": "An input round with requestState.",
            "test_input_required_result_multiple_inputs": "Three input requests in one round.",
            "test_input_required_result_multi_round": "Two input rounds, then the result.",
            "test_input_required_result_tampered_state": "Refuses a requestState it did not seal.",
            "test_input_required_result_capabilities": "Asks only what the client declared.",
            "test_missing_capability": "Needs the client's sampling capability.",
            "test_streaming_elicitation": "Asks the user's name in an input round, never mid-stream.",
        }
        return [
            types.Tool(name=name, description=text, input_schema=no_args) for name, text in described.items()
        ]

    # --- requestState, sealed ------------------------------------------------

    def seal(self, state: dict[str, Any]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        return f"{body}.{mac}"

    def opened(self, params: Params) -> dict[str, Any] | None:
        """The request's `requestState` once its seal is checked (None without one)."""
        state = params.request_state
        if state is None:
            return None
        body, _, mac = state.rpartition(".")
        expected = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        if not body or not hmac.compare_digest(mac, expected):
            raise MCPError(code=types.INVALID_PARAMS, message="requestState failed its integrity check")
        try:
            opened: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body))
        except ValueError:
            raise MCPError(code=types.INVALID_PARAMS, message="requestState is not readable") from None
        return opened

    def need(
        self, requests: dict[str, dict[str, Any]], state: dict[str, Any] | None = None
    ) -> types.InputRequiredResult:
        sealed = None if state is None else self.seal(state)
        return types.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": requests, "requestState": sealed}
        )

    # --- the tools -----------------------------------------------------------

    async def elicitation(self, params: Params) -> Outcome:
        answer = answers(params).get("user_name")
        if answer is None or answer.get("action") != "accept" or not isinstance(answer.get("content"), dict):
            return self.need({"user_name": ask_name("What is your name?")})
        return text_result(f"Hello, {answer['content'].get('name', '')}!")

    async def sampling(self, params: Params) -> Outcome:
        answer = answers(params).get("capital_question")
        if answer is None:
            return self.need({"capital_question": ask_model("What is the capital of France?", 100)})
        return text_result(f"The model answered: {answered_text(answer)}")

    async def list_roots(self, params: Params) -> Outcome:
        answer = answers(params).get("client_roots")
        if answer is None or not isinstance(answer.get("roots"), list):
            return self.need({"client_roots": ASK_ROOTS})
        uris = ", ".join(str(root.get("uri")) for root in answer["roots"])
        return text_result(f"The client's roots: {uris}")

    async def request_state(self, params: Params) -> Outcome:
        state = self.opened(params)
        if state is None or state.get("tool") != "request_state" or "confirm" not in answers(params):
            return self.need({"confirm": ASK_CONFIRM}, {"tool": "request_state"})
        return text_result("state-ok: the confirmation arrived with the state this server sealed")

    async def multiple_inputs(self, params: Params) -> Outcome:
        state, given = self.opened(params), answers(params)
        wanted = {
            "user_name": ask_name("What is your name?"),
            "greeting": ask_model("Generate a greeting", 50),
            "client_roots": ASK_ROOTS,
        }
        if state is None or state.get("tool") != "multiple_inputs" or set(wanted) - set(given):
            return self.need(wanted, {"tool": "multiple_inputs"})
        name = given["user_name"].get("content", {}).get("name", "")
        roots = len(given["client_roots"].get("roots", []))
        return text_result(f"{answered_text(given['greeting'])}, {name}; roots: {roots}")

    async def multi_round(self, params: Params) -> Outcome:
        state, given = self.opened(params), answers(params)
        step = (state or {}).get("round", 0) if (state or {}).get("tool") == "multi_round" else 0
        if step == 1 and "step1" in given:
            name = given["step1"].get("content", {}).get("name", "")
            ask = ask_name("Step 2: What is your favorite color?", "color")
            return self.need({"step2": ask}, {"tool": "multi_round", "round": 2, "name": name})
        if step == 2 and "step2" in given:
            color = given["step2"].get("content", {}).get("color", "")
            return text_result(f"{state.get('name', '') if state else ''} likes {color}")
        return self.need(
            {"step1": ask_name("Step 1: What is your name?")}, {"tool": "multi_round", "round": 1}
        )

    async def tampered_state(self, params: Params) -> Outcome:
        state = self.opened(params)
        if state is None or state.get("tool") != "tampered_state" or "confirm" not in answers(params):
            return self.need({"confirm": ASK_CONFIRM}, {"tool": "tampered_state"})
        return text_result("confirmed under an intact requestState")

    async def by_capabilities(self, params: Params) -> Outcome:
        declared, given = capabilities(params), answers(params)
        wanted: dict[str, dict[str, Any]] = {}
        if "sampling" in declared:
            wanted["model_says"] = ask_model("Say hello", 20)
        if "elicitation" in declared:
            wanted["user_name"] = ask_name("What is your name?")
        if "roots" in declared:
            wanted["client_roots"] = ASK_ROOTS
        if not wanted:
            return text_result("the client declared none of sampling, elicitation and roots")
        if set(wanted) - set(given):
            return self.need(wanted)
        return text_result(f"answered: {', '.join(sorted(wanted))}")

    async def missing_capability(self, params: Params) -> Outcome:
        if "sampling" not in capabilities(params):
            raise MCPError(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="test_missing_capability needs the client's sampling capability",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return await self.sampling(params)

    # --- the prompt ------------------------------------------------------------

    PROMPT = "test_input_required_result_prompt"

    async def prompt(
        self, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        answer = answers(params).get("user_context")
        if answer is None or answer.get("action") != "accept":
            schema = {
                "type": "object",
                "properties": {"context": {"type": "string"}},
                "required": ["context"],
            }
            ask = {
                "method": "elicitation/create",
                "params": {"message": "What context should the prompt use?", "requestedSchema": schema},
            }
            return self.need({"user_context": ask})
        context = answer.get("content", {}).get("context", "")
        message = types.PromptMessage(
            role="user", content=types.TextContent(type="text", text=f"Context: {context}")
        )
        return types.GetPromptResult(messages=[message])
