"""The excerpt rule of search hits, briefings and handoffs (memories.excerpts): where a cut ends.
Whole characters at a cut: tests/memories/test_unicode_text.py."""

import pytest
import regex

from memories.excerpts import excerpt, excerpt_showing

BLOCKER = (
    "Blocked: staging database credentials expired on Friday; the ops team (ticket OPS-4412) "
    "has to rotate them in Vault and redeploy the secrets operator before any migration test "
    "can run against the staging snapshot of the production database."
)


def test_a_cut_ends_at_the_end_of_a_word():
    """A brief briefing showed this blocker as '... run against the sta…': a word the agent had
    to guess. The cut gives up the partial word."""
    cut = excerpt(BLOCKER, 200)
    assert cut.text == BLOCKER[: BLOCKER.index(" staging snapshot")] + "\u2026"
    assert cut.truncated


def test_a_cut_already_at_a_word_end_or_in_punctuation_stays():
    assert excerpt("alpha beta gamma", 11).text == "alpha beta\u2026"  # "alpha beta " fits
    assert excerpt("alpha beta, gamma", 12).text == "alpha beta,\u2026"


def test_a_word_longer_than_the_backoff_is_cut_where_the_limit_falls():
    """No space near the cut (a long token, a URL, text in a script without spaces): cut at the
    limit, rather than give up most of the excerpt."""
    token = "x" * 900
    assert excerpt(token, 200).text == "x" * 199 + "\u2026"
    far = "see " + "y" * 700
    assert excerpt(far, 600).text == far[:599] + "\u2026"
    cjk = "\u6570\u5b57" * 300
    assert excerpt(cjk, 200).text == cjk[:199] + "\u2026"


def test_a_cut_before_punctuation_keeps_the_whole_word_before_it():
    """A cut that falls between a word and the punctuation after it is at a word's end: the
    word is whole ('against staging…', not 'against…')."""
    kept = "Blocked: the migration test cannot run against staging"
    assert excerpt(kept + ", so the release waits.", len(kept) + 1).text == kept + "\u2026"
    kept = "Deploy waits for the review by Dana"
    assert excerpt(kept + ". Then ship.", len(kept) + 1).text == kept + "\u2026"


# A decision whose one mention of what it decided comes near its end, as a long decision's
# conclusion does.
BURIED = (
    "Context: the workspace service checks every request against the tenant's roles, and the "
    "role tables grew with each feature until a permission check took three joins. "
) * 6 + "Decision: move authorization to SpiceDB, with a relationship per role grant."


def window_of(content: str, word: str, limit: int = 600):
    start = content.index(word)
    return excerpt_showing(content, (start, start + len(word)), limit)


def test_a_match_the_leading_excerpt_does_not_show_gets_a_window_around_it():
    cut = window_of(BURIED, "SpiceDB")
    assert cut.text.startswith("\u2026") and "SpiceDB" in cut.text and cut.truncated
    assert len(cut.text) <= 600
    # The text after the mark is the content's own, from `start`, at a word's start.
    assert BURIED[cut.start :].startswith(cut.text[1:].removesuffix("\u2026"))
    assert BURIED[cut.start - 1] == " " and BURIED[cut.start] != " "


def test_a_window_near_the_end_is_full_and_ends_with_the_content():
    """Not a fifth of the limit before the match and a short tail: as much before the match as
    fills the bound."""
    cut = window_of(BURIED, "SpiceDB")
    assert cut.text.endswith(BURIED[-40:])
    assert 600 - len(cut.text) <= 30  # a word's start at most WORD_BACKOFF_MAX later


def test_a_window_in_the_middle_starts_a_little_before_the_match_and_is_cut_as_excerpts_are():
    content = BURIED + " " + "The grant tables go once every service reads SpiceDB. " * 20
    cut = window_of(content, "SpiceDB")
    at = content.index("SpiceDB")
    assert at - 600 // 5 <= cut.start <= at
    assert cut.text.endswith("\u2026") and len(cut.text) <= 600
    assert content[cut.start :].startswith(cut.text[1:-1])


def test_a_match_the_leading_excerpt_shows_keeps_it():
    content = "SpiceDB checks permissions. " + "filler words here " * 60
    assert window_of(content, "SpiceDB") == excerpt(content, 600)
    # Nor a match within the last word the leading cut keeps.
    kept = excerpt(content, 600).text[:-1]
    last = kept.rsplit(" ", 1)[1]
    at = len(kept) - len(last)
    assert excerpt_showing(content, (at, len(kept)), 600).start == 0


def test_a_match_the_leading_cut_gives_up_gets_a_window():
    """The word the cut falls in is dropped from the leading excerpt ('against the sta…'
    ends '…against the'): a match there is not shown by it."""
    content = "word " * 119 + "SpiceDB and then " + "more " * 100
    assert "SpiceDB" not in excerpt(content, 600).text
    assert "SpiceDB" in window_of(content, "SpiceDB").text


@pytest.mark.parametrize(
    "run",
    [
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family: emoji joined by ZWJs
        "\U0001f1eb\U0001f1f7",  # a flag: two regional indicators
        "e\u0301",  # a letter and its combining accent
        "\u6570\u5b57",  # CJK, written without spaces
    ],
)
def test_a_window_in_text_without_spaces_starts_at_a_whole_character(run):
    # One code point before the match: the window's first try falls inside a character.
    content = run * (700 // len(run)) + "-SpiceDB" + run * (700 // len(run))
    cut = window_of(content, "SpiceDB")
    starts = {character.start() for character in regex.finditer(r"\X", content)}
    if len(regex.findall(r"\X", run)) == 1:  # one character of several code points
        assert content.index("SpiceDB") - 600 // 5 not in starts
    assert cut.start in starts
    assert "SpiceDB" in cut.text and len(cut.text) <= 600
    assert content[cut.start :].startswith(cut.text[1:-1])
