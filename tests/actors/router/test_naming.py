"""The naming rules of the original design, row by row."""

import pytest

from assern.actors.router import naming


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("github", "search_repositories", "github_search_repositories"),
        ("my-server", "my_tool", "my_server_my_tool"),
        ("a-b-c", "x", "a_b_c_x"),
        ("jira", "get-issue", "jira_get-issue"),  # a tool keeps its own dashes
        ("weird.name", "t", "weird_name_t"),  # characters clients reject become `_`
    ],
)
def test_tool_names(server: str, tool: str, expected: str) -> None:
    assert naming.tool_name(server, tool) == expected


@pytest.mark.parametrize(
    ("server", "prompt", "expected"),
    [
        ("templates", "generate-code", "templates_generate_code"),
        ("my-server", "review-pr", "my_server_review_pr"),
        ("docs", "summary", "docs_summary"),
    ],
)
def test_prompt_names(server: str, prompt: str, expected: str) -> None:
    assert naming.prompt_name(server, prompt) == expected


def test_resource_uris() -> None:
    assert (
        naming.resource_uri("filesystem", "file:///home/user/doc.txt")
        == "assern://filesystem/file:///home/user/doc.txt"
    )
    assert naming.resource_uri("test", "test://items/{item}") == "assern://test/test://items/{item}"


def test_split_resource_uri_uses_known_servers() -> None:
    servers = {"a", "a-b", "filesystem"}
    assert naming.split_resource_uri("assern://a-b/x://y", servers) == ("a-b", "x://y")
    assert naming.split_resource_uri("assern://a/b/c", servers) == ("a", "b/c")
    assert naming.split_resource_uri("assern://filesystem/file:///home/user/doc.txt", servers) == (
        "filesystem",
        "file:///home/user/doc.txt",
    )
    assert naming.split_resource_uri("assern://nobody/x", servers) is None
    assert naming.split_resource_uri("file:///etc/passwd", servers) is None


def test_shorten_is_deterministic_and_bounded() -> None:
    long = "very_long_server_name_" * 3 + "and_an_even_longer_tool_name"
    short = naming.shorten(long, 64)
    assert len(short) == 64
    assert short == naming.shorten(long, 64)
    assert short != naming.shorten(long + "x", 64)
    assert naming.shorten("short", 64) == "short"
