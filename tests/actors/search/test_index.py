"""The BM25F tool index: ranking by field, the "good match" rule, incremental updates."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from assern.actors.search import index as ix
from assern.actors.search.index import SearchIndex, SegmentInput, analyse, name_share, parameter_texts
from assern.actors.search.text import Analyzer


def tool(name: str, description: str = "", **params: str) -> types.Tool:
    properties: dict[str, Any] = {
        key: {"type": "string", "description": text} for key, text in params.items()
    }
    return types.Tool(
        name=name, description=description, input_schema={"type": "object", "properties": properties}
    )


def server(name: str, *tools: types.Tool, instructions: str | None = None) -> SegmentInput:
    return SegmentInput(
        server=name, tools=tuple((f"{name}_{t.name}", t.name, t) for t in tools), instructions=instructions
    )


GITHUB = server(
    "github",
    tool(
        "create_issue",
        "Create a new issue in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
    ),
    tool("list_issues", "List issues in a GitHub repository with filtering options.", state="open or closed"),
    tool(
        "create_pull_request",
        "Create a new pull request in a GitHub repository.",
        head="The branch with changes",
    ),
    tool("search_code", "Search for code across GitHub repositories.", q="Search query"),
)
FILES = server(
    "filesystem",
    tool("read_file", "Read the complete contents of a file from the file system.", path="Path of the file"),
    tool("write_file", "Create a new file or overwrite an existing file with new content.", path="Path"),
    tool("list_directory", "Get a detailed listing of all files and directories in a path.", path="Path"),
)
SLACK = server(
    "slack",
    tool("post_message", "Post a new message to a channel.", channel_id="The channel", text="Message text"),
    tool("list_channels", "List public channels in the workspace."),
    instructions="Slack workspace access: channels, messages, users.",
)


def index(*sources: SegmentInput) -> SearchIndex:
    return SearchIndex().updated(list(sources))


def names(found: Any) -> list[str]:
    return [hit.doc.name for hit in found.hits]


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("create an issue", "github_create_issue"),
        ("open a pull request for my branch", "github_create_pull_request"),
        ("read the contents of config.toml", "filesystem_read_file"),
        ("send a message to the team channel", "slack_post_message"),
        ("which files are in the src folder", "filesystem_list_directory"),
        ("list_channels", "slack_list_channels"),
        ("slack_list_channels", "slack_list_channels"),
    ],
)
def test_the_tool_that_answers_comes_first(query: str, best: str) -> None:
    found = index(GITHUB, FILES, SLACK).find(query)
    assert names(found)[0] == best
    assert found.good
    assert found.total == 9


def test_a_word_in_the_name_outweighs_the_same_word_in_a_description() -> None:
    a = server(
        "a", tool("delete_record", "Remove a row."), tool("archive", "Archive it; does not delete anything.")
    )
    assert names(index(a).find("delete"))[0] == "a_delete_record"


def test_a_query_about_nothing_in_the_catalog_is_no_good_match() -> None:
    found = index(GITHUB, FILES, SLACK).find("book a flight to Lisbon")
    assert not found.good
    assert set(found.unknown) >= {"book", "flight", "lisbon"}


def test_the_limit_and_the_server_filter() -> None:
    idx = index(GITHUB, FILES, SLACK)
    assert len(idx.find("create new", limit=2).hits) <= 2
    only = idx.find("create new file", server="github")
    assert {hit.doc.server for hit in only.hits} == {"github"}
    assert only.total == 4
    assert idx.find("create", server="nobody").hits == ()


def test_a_search_of_one_server_scores_its_tools_as_the_search_of_all_does() -> None:
    idx = index(GITHUB, FILES, SLACK)
    checked = 0
    for query in ("create new file", "search the code", "post a message to the channel"):
        every = idx.find(query, limit=50).hits
        for server in ("github", "filesystem", "slack"):
            theirs = [hit for hit in every if hit.doc.server == server]
            only = idx.find(query, limit=50, server=server).hits
            assert {hit.doc.server for hit in only} <= {server}
            if theirs:  # the server's best, scored alike, and every one the search of all found
                assert only[0].doc.name == theirs[0].doc.name
                scores = {hit.doc.name: hit.score for hit in only}
                for hit in theirs:
                    assert scores[hit.doc.name] == pytest.approx(hit.score)
                    checked += 1
    assert checked >= 5


def test_weak_hits_do_not_pad_the_answer() -> None:
    found = index(GITHUB, FILES, SLACK).find("search code", limit=50)
    assert found.hits[0].doc.name == "github_search_code"
    assert all(hit.score >= 0.15 * found.hits[0].score for hit in found.hits)
    assert len(found.hits) < 9


def test_an_update_reanalyses_only_the_server_that_changed() -> None:
    first = index(GITHUB, FILES, SLACK)
    files = server("filesystem", *[t for _, _, t in FILES.tools], tool("move_file", "Move or rename a file."))
    second = first.updated([GITHUB, files, SLACK])
    assert second.segments["github"] is first.segments["github"]
    assert second.segments["slack"] is first.segments["slack"]
    assert second.segments["filesystem"] is not first.segments["filesystem"]
    assert names(second.find("rename a file"))[0] == "filesystem_move_file"
    # The frequencies kept by difference are those a fresh build counts.
    assert second.df == index(GITHUB, files, SLACK).df
    third = second.updated([GITHUB, SLACK])  # a server stopped
    assert third.df == index(GITHUB, SLACK).df
    assert "filesystem" not in {hit.doc.server for hit in third.find("file").hits}
    assert first.find("rename").hits == ()  # snapshots are immutable


def test_parameters_are_searched_by_name_and_description() -> None:
    assert parameter_texts({"properties": {"repo": {"description": "Repository name"}, "n": 3}}) == [
        "repo",
        "Repository name",
        "n",
    ]
    assert parameter_texts(None) == []
    segment = analyse(GITHUB, Analyzer())
    assert "owner" in segment.postings


def test_an_empty_index_finds_nothing() -> None:
    found = SearchIndex().find("anything")
    assert found.hits == ()
    assert not found.good
    assert found.total == 0


def test_a_synonym_finds_the_tool_at_a_lower_weight() -> None:
    idx = index(GITHUB, FILES, SLACK)
    found = idx.find("show me what is in the folder")
    assert names(found)[0] == "filesystem_list_directory"
    direct = idx.find("directory").hits[0]
    through = idx.find("folder").hits[0]
    assert direct.doc is through.doc
    assert through.score < direct.score
    # "folder" is no word of the catalog (it weighs half) and matches through "directory"
    # at the synonym weight (half): the answer is a good one.
    assert idx.find("folder").good


def test_a_name_several_servers_use_finds_each_of_their_tools_first() -> None:
    gitlab = server("gitlab", tool("create_issue", "Open an issue in a GitLab project."))
    # By its words alone this tool answers "create issue" best (both words, again and
    # again): only the rule for a name asked as it is puts the two named tools first.
    jira = server(
        "jira",
        tool(
            "issue_create",
            "Create an issue. Creates an issue in Jira: create, track and triage issues.",
            summary="Issue summary",
        ),
    )
    words_only = index(GITHUB, gitlab, jira, FILES).find("create issue")
    assert names(words_only)[0] == "jira_issue_create"
    found = index(GITHUB, gitlab, jira, FILES).find("create_issue")
    assert names(found)[:3] == ["github_create_issue", "gitlab_create_issue", "jira_issue_create"]
    assert all(hit.coverage == 1.0 for hit in found.hits[:2])
    assert names(index(GITHUB, gitlab).find("create_issue", server="gitlab")) == ["gitlab_create_issue"]
    # the exposed name picks the one tool
    assert names(index(GITHUB, gitlab).find("gitlab_create_issue"))[0] == "gitlab_create_issue"


def test_ranking_and_coverage_apart_give_what_find_gives() -> None:
    idx = index(GITHUB, FILES, SLACK)
    for query in ("create a new issue in my repo", "read_file", "post to a channel", "zebra"):
        ranked, unknown = idx.ranked(query, limit=5)
        cover = idx.coverage(query)
        found = idx.find(query, limit=5)
        assert [(hit.doc, hit.score, hit.coverage) for hit in found.hits] == [
            (doc, score, cover(doc)) for doc, score in ranked
        ]
        assert found.unknown == unknown
    assert idx.coverage("read_file")(idx.exact("read_file", None)[0]) == 1.0
    assert idx.coverage("zebra")(idx.docs()[0]) == 0.0


def test_each_field_counts_by_its_weight() -> None:
    """One word, once in one field of each tool, every field as long in each tool: the
    tools rank as their fields weigh (name 3, server 1.5, description 1, parameters 0.8,
    instructions 0.2), which the names' alphabetical order would not give."""
    sources = [
        server("a", tool("plain_words", "zeta apple pear", p="kiwi text")),  # description
        server("b", tool("plain_words", "plum apple pear", p="zeta text")),  # parameters
        server("c", tool("plain_words", "plum apple pear", p="kiwi text"), instructions="zeta"),
        server("d", tool("zeta_words", "plum apple pear", p="kiwi text")),  # name
        server("zeta", tool("plain_words", "plum apple pear", p="kiwi text")),  # server
    ]
    found = index(*sources).find("zeta", limit=5)
    assert [hit.doc.server for hit in found.hits] == ["d", "zeta", "a", "b", "c"]
    scores = [hit.score for hit in found.hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == 5  # no tie left to the names


def test_a_need_counts_once_however_many_of_its_synonyms_a_tool_uses() -> None:
    boards = server(
        "boards",
        tool("create_board", "Create a board."),
        tool(
            "add_item",
            "Add a new item to a board: make an entry, add a row, insert new cards into the board.",
            board_id="The board",
        ),
    )
    # "create" is matched by itself, or by its best synonym (add, new, make) at half
    # weight: not by all three of them added up
    idx = index(boards, FILES)
    found = idx.find("create a board")
    assert names(found)[:2] == ["boards_create_board", "boards_add_item"]
    explained = idx.explain("create a board", found.hits[1].doc)
    assert [(term["term"], term["synonym_of"]) for term in explained["terms"]] == [
        ("board", None),
        ("add", "creat"),
    ]


KANBAN = server(
    "kanban",
    tool("new_board", "Start an empty board in the workspace."),
    tool("add_card", "Add a card to a board's column.", board="The board"),
    tool("list_cards", "List the cards of a column."),
)


def test_a_tool_named_for_the_query_comes_before_one_that_only_mentions_it() -> None:
    # By words alone, add_card answers "new board" best: "add" (a synonym of "new") is
    # in its name, "board" in its description and its parameter. new_board is named for
    # all the query asks, and the bonus of its name puts it first.
    idx = index(GITHUB, FILES, SLACK, KANBAN)
    found = idx.find("new board")
    assert names(found)[:2] == ["kanban_new_board", "kanban_add_card"]
    words = {hit.doc.tool: idx.explain("new board", hit.doc)["words_score"] for hit in found.hits}
    assert words["add_card"] > words["new_board"]


def test_the_name_bonus_is_bounded_by_the_share_of_the_name_asked_for() -> None:
    idx = index(GITHUB, FILES, SLACK, KANBAN)
    assert ix.NAME_BONUS > 0
    for query in ("new board", "create a new issue in my repo", "post a message to a channel"):
        for hit in idx.find(query).hits:
            explained = idx.explain(query, hit.doc)
            share = explained["name"]["share"]
            assert 0.0 <= share <= 1.0
            assert hit.score == pytest.approx(
                explained["words_score"] * (1 + ix.NAME_BONUS * share), abs=0.01
            )


def test_the_share_of_a_name_leaves_out_the_server_name_and_counts_synonyms_at_their_weight() -> None:
    segment = analyse(
        server(
            "github",
            tool("github_create_issue", "Create an issue."),
            tool("github", "Everything GitHub."),
        ),
        Analyzer(),
    )
    named, bare = segment.docs
    assert named.named == ("creat", "issu")  # not "github": every tool of the server has it
    assert bare.named == ()
    assert name_share(named, {"creat": 1.0, "issu": 1.0}) == 1.0
    assert name_share(named, {"issu": 1.0}) == 0.5
    assert name_share(named, {"creat": 0.5}) == 0.25  # asked through a synonym
    assert name_share(bare, {"github": 1.0}) == 0.0
