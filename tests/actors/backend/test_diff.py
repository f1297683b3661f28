"""Hot-reload arithmetic: only what changed is started, stopped or restarted."""

from assern.actors.backend.diff import diff_specs
from assern.actors.config.spec import ServerSpec


def spec(name: str, *args: str, env: dict[str, str] | None = None) -> ServerSpec:
    return ServerSpec(name=name, transport="stdio", command="srv", args=args, env=env or {})


def test_diff_starts_stops_restarts_and_keeps() -> None:
    running = {"a": spec("a"), "b": spec("b"), "c": spec("c", "--x")}
    desired = {"a": spec("a"), "c": spec("c", "--y"), "d": spec("d")}
    diff = diff_specs(running, desired)
    assert diff.start == ("d",)
    assert diff.stop == ("b",)
    assert diff.restart == ("c",)
    assert diff.unchanged == ("a",)


def test_an_env_change_restarts_the_backend() -> None:
    diff = diff_specs({"a": spec("a", env={"T": "1"})}, {"a": spec("a", env={"T": "2"})})
    assert diff.restart == ("a",)
