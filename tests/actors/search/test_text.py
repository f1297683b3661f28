"""Identifiers and sentences into search terms."""

from __future__ import annotations

import pytest

from assern.actors.search.text import Analyzer, words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("list_issues", ["list", "issues"]),
        ("createPullRequest", ["create", "pull", "request"]),
        ("read-file", ["read", "file"]),
        ("getHTTPResponse", ["get", "http", "response"]),
        ("s3_list_buckets", ["s3", "list", "buckets"]),
        ("listV2Objects", ["list", "v2", "objects"]),
        ("browser.navigate/url", ["browser", "navigate", "url"]),
        ("Find the repo's open issues!", ["find", "the", "repo", "s", "open", "issues"]),
        ("", []),
    ],
)
def test_words_split_identifiers_and_sentences(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_terms_drop_stop_words_and_stem() -> None:
    analyzer = Analyzer()
    assert analyzer.terms("Listing the repository's open issues") == ["list", "repositori", "open", "issu"]
    assert analyzer.terms("list_repo_issues") == ["list", "repo", "issu"]
    assert analyzer.terms("please use the tool to search") == ["search"]


def test_an_analyzer_remembers_what_it_computed() -> None:
    analyzer = Analyzer()
    first = analyzer.terms("Creating files")
    assert analyzer.terms("creating FILES") == first == ["creat", "file"]
