"""`assernctl config explain`'s per-view account of a server's calls: exposure,
validation and the safety rules of the settings and of each profile."""

from __future__ import annotations

from assern.actors.config.spec import CallRules, Profile, ServerSpec, Settings
from assern.app.ctl.config.report import calls_document


def test_each_view_shows_the_rules_that_apply_to_the_server() -> None:
    settings = Settings(
        exposure="all",
        rules=CallRules(deny=("*_delete_*",), confirm=("destructive",)),
        profiles=(
            Profile(name="careful", exposure="grouped", rules=CallRules(read_only=True)),
            Profile(name="other", servers=("time",)),
        ),
    )
    spec = ServerSpec(name="github", transport="stdio", command="npx", rules=CallRules(validate="off"))
    assert calls_document(settings, spec) == {
        "settings": {
            "shown": True,
            "exposure": "all",
            "validate": "off",
            "deny": ["*_delete_*"],
            "read_only": False,
            "confirm": ["destructive"],
        },
        "profile careful": {
            "shown": True,
            "exposure": "grouped",
            "validate": "off",
            "deny": ["*_delete_*"],
            "read_only": True,
            "confirm": ["destructive"],
        },
        "profile other": {"shown": False},
    }
    plain = ServerSpec(name="time", transport="stdio", command="uvx")
    assert calls_document(Settings(exposure="grouped"), plain)["settings"]["validate"] == "strict"
