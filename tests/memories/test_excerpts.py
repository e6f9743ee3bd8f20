"""The excerpt rule of search hits, briefings and handoffs (memories.excerpts): where a cut ends.
Whole characters at a cut: tests/memories/test_unicode_text.py."""

from memories.excerpts import excerpt

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
