"""The middleware chain: order, changing arguments, answering, post-processing, failures
kept to the middleware that raised, selection by globs and instances kept per entry."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
import trio

from assern.actors.config.middleware import MiddlewareError, factory_path, make_middleware
from assern.actors.config.spec import MiddlewareSpec
from assern.actors.gate.chain import Chain, Layer, Middlewares
from assern.actors.gate.middleware import Call, Next

CALL = Call(server="notes", tool="add", exposed="notes_add", arguments={"text": "hi"}, client="tester")


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def answer(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


class Backend:
    """The end of the chain: records what it was called with."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def __call__(self, call: Call) -> types.CallToolResult:
        self.calls.append(call)
        return answer(f"backend got {dict(call.arguments)}")


def tagging(tag: str, seen: list[str]) -> Any:
    async def middleware(call: Call, next_: Next) -> types.CallToolResult:
        seen.append(f"{tag} in")
        result = await next_(call.with_arguments({**call.arguments, tag: True}))
        seen.append(f"{tag} out")
        return result

    return middleware


async def test_layers_run_outermost_first_and_see_each_others_changes() -> None:
    seen: list[str] = []
    backend = Backend()
    chain = Chain((Layer("a", tagging("a", seen)), Layer("b", tagging("b", seen))))
    result = await chain.run(CALL, backend)
    assert seen == ["a in", "b in", "b out", "a out"]
    assert backend.calls[0].arguments == {"text": "hi", "a": True, "b": True}
    assert text_of(result) == "backend got {'text': 'hi', 'a': True, 'b': True}"


async def test_a_middleware_can_answer_itself_or_rewrite_the_result() -> None:
    async def answering(call: Call, next_: Next) -> types.CallToolResult:
        return answer("from the middleware")

    async def shouting(call: Call, next_: Next) -> types.CallToolResult:
        result = await next_(call)
        return answer(text_of(result).upper())

    backend = Backend()
    assert text_of(await Chain((Layer("x", answering),)).run(CALL, backend)) == "from the middleware"
    assert backend.calls == []
    assert text_of(await Chain((Layer("y", shouting),)).run(CALL, backend)).startswith("BACKEND GOT")


async def test_a_raising_middleware_answers_an_error_naming_it() -> None:
    async def broken(call: Call, next_: Next) -> types.CallToolResult:
        raise KeyError("oops")

    backend = Backend()
    result = await Chain((Layer("ok", tagging("ok", [])), Layer("broken", broken))).run(CALL, backend)
    assert result.is_error
    assert text_of(result) == "Middleware 'broken' failed on notes_add: KeyError: 'oops'"
    assert backend.calls == []


async def test_the_backends_own_error_passes_through_a_middleware_unchanged() -> None:
    class Unavailable(Exception):
        pass

    async def failing(call: Call) -> types.CallToolResult:
        raise Unavailable("backend down")

    with pytest.raises(Unavailable, match="backend down"):
        await Chain((Layer("a", tagging("a", [])),)).run(CALL, failing)


async def test_a_result_of_the_wrong_kind_is_the_middlewares_fault() -> None:
    async def dict_answer(call: Call, next_: Next) -> Any:
        return {"content": [{"type": "text", "text": "as a dict"}]}

    async def nonsense(call: Call, next_: Next) -> Any:
        return 42

    assert text_of(await Chain((Layer("d", dict_answer),)).run(CALL, Backend())) == "as a dict"
    result = await Chain((Layer("n", nonsense),)).run(CALL, Backend())
    assert result.is_error
    assert "Middleware 'n' failed on notes_add: it returned int, not a CallToolResult" in text_of(result)


async def test_cancellation_is_never_taken_for_a_failure() -> None:
    async def slow(call: Call) -> types.CallToolResult:
        await trio.sleep_forever()
        raise AssertionError

    with trio.move_on_after(0.01) as scope:
        await Chain((Layer("a", tagging("a", [])),)).run(CALL, slow)
    assert scope.cancelled_caught


def spec(name: str, **fields: Any) -> MiddlewareSpec:
    return MiddlewareSpec(name=name, use="rate_limit", options={"calls": 5}, **fields)


def test_entries_wrap_the_tools_their_globs_take_in_configured_order() -> None:
    middlewares = Middlewares()
    specs = [
        spec("all"),
        spec("github", servers=["github"]),
        spec("deletes", tools=["*_delete_*", "drop_*"]),
    ]
    names = ("github_delete_repo", "github_delete_repo", "delete_repo")
    chain = middlewares.chain(specs, "github", names)
    assert chain is not None
    assert chain.names == ("all", "github", "deletes")
    other = middlewares.chain(specs, "db", ("db_drop_table", "db_drop_table", "drop_table"))
    assert other is not None
    assert other.names == ("all", "deletes")
    assert middlewares.chain(specs[1:], "db", ("db_read", "db_read", "read")) is None


def test_an_entry_keeps_its_instance_until_it_changes_or_goes() -> None:
    middlewares = Middlewares()
    first = middlewares.chain([spec("rl")], "s", ("t",))
    again = middlewares.chain([spec("rl")], "s", ("u",))
    assert first is not None
    assert again is not None
    assert first.layers[0] is again.layers[0]
    middlewares.retain([spec("rl")])
    kept = middlewares.chain([spec("rl")], "s", ("t",))
    assert kept is not None
    assert kept.layers[0] is first.layers[0]
    changed = MiddlewareSpec(name="rl", use="rate_limit", options={"calls": 6})
    middlewares.retain([changed])
    fresh = middlewares.chain([changed], "s", ("t",))
    assert fresh is not None
    assert fresh.layers[0] is not first.layers[0]


async def test_an_entry_that_no_longer_loads_refuses_its_calls() -> None:
    middlewares = Middlewares()
    chain = middlewares.chain([MiddlewareSpec(name="gone", use="no_such_module:factory")], "s", ("t",))
    assert chain is not None
    backend = Backend()
    result = await chain.run(CALL, backend)
    assert result.is_error
    assert "Middleware 'gone' is not available, so notes_add is not called: cannot import" in text_of(result)
    assert backend.calls == []


def test_use_names_a_shipped_middleware_or_a_factory() -> None:
    assert factory_path("audit") == "assern.actors.gate.middlewares.audit:factory"
    assert factory_path("pkg.mod:make") == "pkg.mod:make"
    for wrong in ("pkg.mod", ":make", "pkg.mod:", "pkg:not valid"):
        with pytest.raises(MiddlewareError, match="expected a shipped middleware"):
            factory_path(wrong)
    with pytest.raises(MiddlewareError, match=r"cannot import 'no_such_pkg\.mod': ModuleNotFoundError"):
        make_middleware("no_such_pkg.mod:factory", {})
    with pytest.raises(MiddlewareError, match="has no 'nothing'"):
        make_middleware("json:nothing", {})
    with pytest.raises(MiddlewareError, match="rejected its options: unknown option 'cals'"):
        make_middleware("rate_limit", {"cals": 3})
