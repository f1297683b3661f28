"""`assernctl config explain`'s per-view account of a server's calls: exposure,
validation and the safety rules of the settings and of each profile."""

from __future__ import annotations

from assern.actors.backend.saved_catalog import backend_key
from assern.actors.config.spec import CallRules, MiddlewareSpec, Profile, ServerSpec, Settings
from assern.app.ctl.config.report import calls_document, middleware_document, sharing_document


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


def test_the_middleware_around_a_server_is_listed_outermost_first() -> None:
    settings = Settings(
        middleware=(
            MiddlewareSpec(name="audit", use="audit", options={"path": "/a"}),
            MiddlewareSpec(name="gh-limit", use="rate_limit", servers=("git*",), tools=("*_issue",)),
            MiddlewareSpec(name="db-only", use="redact", servers=("db",)),
            MiddlewareSpec(name="approval", use="pkg.approve:factory", asyncio=True),
        )
    )
    github = ServerSpec(name="github", transport="stdio", command="npx")
    assert middleware_document(settings, github) == [
        {"name": "audit", "use": "audit", "tools": [], "asyncio": False},
        {"name": "gh-limit", "use": "rate_limit", "tools": ["*_issue"], "asyncio": False},
        {"name": "approval", "use": "pkg.approve:factory", "tools": [], "asyncio": True},
    ]
    assert middleware_document(Settings(), github) == []


def test_explain_says_whether_the_daemon_shares_the_server_across_projects() -> None:
    anywhere = ServerSpec(name="github", transport="stdio", command="npx")
    shared = sharing_document(anywhere)
    assert shared["shared_across_projects"] is True
    assert shared["key"] == backend_key(anywhere)[:8]
    assert "every configuration" in shared["why"]
    here = ServerSpec(name="files", transport="stdio", command="npx", cwd="/work/repo")
    own = sharing_document(here)
    assert own["shared_across_projects"] is False
    assert "/work/repo" in own["why"]
    assert own["key"] != shared["key"]
