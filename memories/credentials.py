"""Credentials a memory must not hold. A memory is served to every app the tenant connected with
memory:read, cached by clients as its resource, exported and shown on the account's pages: a
secret stored there has leaked. Only formats no ordinary text takes are recognised (a fixed
issuer prefix and a fixed shape; a PEM header with a key body under it): a false refusal costs
the caller a write, so there are no entropy or keyword-in-context guesses, and a credential in
some other format is let through.

The rule is the format, never the value: an issuer's documentation example in a credential's
format (AWS's AKIAIOSFODNN7EXAMPLE) is refused like a live key, since this module cannot tell
them apart and a memory can name the example in words; but a format that carries a checksum of
its own tells: a GitHub personal token (ghp_) whose last 6 characters are not the checksum of
the rest no issuer generated (ghp_YourPersonalAccessTokenGoesHere12345), and is let through.
A body that is one character repeated (AKIA and sixteen Z) is filler no issuer generates, and is
let through too.

A credential glued to the word before it (keyAKIA..., tokenghp_...) is refused like one standing
alone: a letter before a prefix is taken for glue when the case changes there or the random part
mixes digits and letters, as every issuer's does; a word that merely runs into a prefix
(EURASIANCOUNTRIESLISTED: no change of case, no digit after its ASIA) is let through. A digit,
`_` or `-` before a prefix still means a longer token (a hash, an identifier) of which the match
is a part.

The text is read as a client would copy it out of a memory (find_credential): a credential
written in fullwidth letters or split by zero-width characters works once pasted, and is refused
like one typed plainly.

Never put the matched text in a message or a log: the refusal names the field, the kind and the
offset only."""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from memories.errors import InvalidInput


@dataclass(frozen=True)
class _Format:
    kind: str  # as a refusal names it
    markers: tuple[str, ...]  # every match holds one of these: the pattern runs only then
    pattern: re.Pattern[str]  # its one named group that matched: the part random in a real one
    # Whether an issuer could have generated the match, where its format carries a check of its
    # own: None when it carries none (every match is taken for one).
    issued: Callable[[re.Match[str]], bool] | None = None


# A token's own characters on either side of it: a match inside a longer token is no match. A
# letter before is allowed, and judged by _part_of_a_word.
_TOKEN_BUT_LETTERS = "0-9_-"
_NOT_BEFORE_TOKEN = r"(?![A-Za-z0-9_-])"


def _not_after(chars: str, first: str) -> str:
    """A pattern's first character (or set of them) `first`, not after a character of the set
    `chars`. The check comes after `first` rather than before it: re searches a text for a
    pattern's first character only when the pattern starts with it, and otherwise tries a match
    at every position."""
    return rf"{first}(?<![{chars}]{first})"


# Between the lines of a PEM block as stored: white space, or a newline escaped as in a JSON
# file pasted whole (a Google service-account key).
_LINE_BREAK = r"(?:\s|\\[rn])+"

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _github_checksum_holds(match: re.Match[str]) -> bool:
    """Whether a ghp_ token's last 6 characters are the check GitHub's own end with: CRC32 of the
    30 random characters before them, in base62 (digits, then upper case, then lower case), with
    leading zeros (GitHub's "Behind GitHub's new authentication token formats"; personal tokens
    GitHub issued check so). Another prefix, or a body of another length, is a layout this check
    was not confirmed on against tokens GitHub issued: taken for one issued (fail closed)."""
    body = match.group("body")
    if body is None or len(body) != 36 or not match.group(0).startswith("ghp_"):
        return True
    checksum = 0
    for digit in body[30:]:
        checksum = checksum * 62 + _BASE62.index(digit)
    return checksum == zlib.crc32(body[:30].encode("ascii"))


FORMATS: tuple[_Format, ...] = (
    _Format(
        # RFC 7468 labels (PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA/EC/DSA/OPENSSH ...) and
        # OpenPGP's armour; then optional header lines (Proc-Type:, DEK-Info:, Version:) and a
        # base64 line. A header alone, as a note quotes it, is no key. A header's value runs to
        # the end of its line and gives nothing back (possessive): else the spaces of one line
        # of "a: a: a: ..." are as many ways to split it into headers, tried one by one.
        "a private key (PEM or OpenPGP block)",
        ("PRIVATE KEY",),
        re.compile(
            r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
            rf"(?:{_LINE_BREAK}[A-Za-z-]+: [^\n\\]{{0,200}}+){{0,4}}"
            rf"{_LINE_BREAK}(?P<body>[A-Za-z0-9+/]{{40}})"
        ),
    ),
    _Format(
        # A PuTTY key file's private part: the field name, its line count, then base64 lines.
        "a private key (PuTTY key file)",
        ("Private-Lines: ",),
        re.compile(rf"Private-Lines: \d+{_LINE_BREAK}(?P<body>[A-Za-z0-9+/]{{40}})"),
    ),
    _Format(
        # AKIA: a long-term access key id; ASIA: a temporary (STS) one (AWS STS API reference,
        # GetAccessKeyInfo). The rest is base32 (A-Z, 2-7, as gitleaks' aws-access-token rule
        # takes it): an upper-case word with a 0, 1, 8 or 9 in it is no key id.
        "an AWS access key id",
        ("AKIA", "ASIA"),
        re.compile(rf"{_not_after('0-9', 'A')}(?:KIA|SIA)(?P<body>[A-Z2-7]{{16}})(?![A-Za-z0-9])"),
    ),
    _Format(
        # ghp_ personal, gho_ OAuth, ghu_/ghs_ GitHub App user/server, ghr_ refresh (GitHub's
        # authentication token formats); github_pat_ a fine-grained personal token. A ghp_ token
        # ends with a check of its random part: a documentation placeholder in the shape
        # (ghp_YourPersonalAccessTokenGoesHere12345) fails it, and is let through.
        "a GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(
            rf"{_not_after('0-9_', 'g')}"
            r"(?:h[pousr]_(?P<body>[A-Za-z0-9]{36,})|ithub_pat_(?P<pat>[A-Za-z0-9_]{59,}))"
        ),
        _github_checksum_holds,
    ),
    _Format(
        # xoxb- bot, xoxp- user, xoxa-/xoxr- workspace and refresh, xoxs- legacy: numeric ids,
        # then a secret; xoxe- configuration tokens; xapp- app-level tokens (Slack's token types).
        # "xoxb-your-bot-token" has no ids: an example's wording, let through.
        "a Slack token",
        ("xox", "xapp-"),
        re.compile(
            rf"{_not_after(_TOKEN_BUT_LETTERS, 'x')}(?:"
            r"ox[abprs]-(?:\d-)?\d{8,}-(?:\d+-)*(?P<body>[A-Za-z0-9]{10,})"
            r"|oxe(?:\.xox[bp])?-\d-(?P<config>[A-Za-z0-9]{100,})"
            r"|app-\d-[A-Z0-9]+-\d+-(?P<app>[a-z0-9]{32,})"
            rf"){_NOT_BEFORE_TOKEN}"
        ),
    ),
    _Format(
        # Secret and restricted keys of live mode: test-mode keys move no money and publishable
        # keys are public by design (Stripe's security team on their format, to GitLab's secret
        # detection). 24 characters and more after the prefix, as in the oldest keys.
        "a Stripe live secret key",
        ("k_live_",),
        re.compile(
            rf"{_not_after('0-9_', '[sr]')}k_live_(?P<body>[A-Za-z0-9]{{24,}})(?![A-Za-z0-9_])"
        ),
    ),
    _Format(
        "a Google API key",
        ("AIza",),
        re.compile(
            rf"{_not_after(_TOKEN_BUT_LETTERS, 'A')}Iza(?P<body>[A-Za-z0-9_-]{{35}})"
            rf"{_NOT_BEFORE_TOKEN}"
        ),
    ),
    _Format(
        # OpenAI publishes no format: the keys known, legacy (sk-) or scoped (sk-proj-,
        # sk-svcacct-, sk-admin-), hold "T3BlbkFJ" between two random runs (gitleaks'
        # openai-api-key rule), and a key without it is let through. The runs are bounded so that
        # a long run of key characters costs a bounded search.
        "an OpenAI API key",
        ("T3BlbkFJ",),
        re.compile(
            rf"{_not_after(_TOKEN_BUT_LETTERS, 's')}k-(?:(?:proj|svcacct|admin)-)?"
            r"(?P<body>[A-Za-z0-9_-]{20,80}T3BlbkFJ[A-Za-z0-9_-]{20,80})"
            rf"{_NOT_BEFORE_TOKEN}"
        ),
    ),
    _Format(
        # sk-ant-api03- (API), sk-ant-admin01- (Admin API), sk-ant-oat01-/-ort01- (OAuth), as
        # gitleaks' anthropic rules take them.
        "an Anthropic API key",
        ("sk-ant-",),
        re.compile(
            rf"{_not_after(_TOKEN_BUT_LETTERS, 's')}k-ant-[a-z]+\d\d-(?P<body>[A-Za-z0-9_-]{{40,}})"
        ),
    ),
)

_SEPARATORS = frozenset("_-")


def _random_part(match: re.Match[str]) -> str:
    return next(value for value in match.groupdict().values() if value is not None)


def _filler(match: re.Match[str]) -> bool:
    """Whether the random part is one character repeated (xxxx..., 0000...), separators aside."""
    return len(set(_random_part(match)) - _SEPARATORS) <= 1


def _part_of_a_word(text: str, match: re.Match[str]) -> bool:
    """Whether the match runs on from the ASCII letters before it as one word does
    (EURASIANCOUNTRIESLISTED, risk_live_monitoring...) rather than being a credential glued to
    them (keyAKIA..., tokenghp_...): the case goes on unchanged across the join, and the random
    part does not mix digits and letters, as every issuer's does. A letter of another script
    before a prefix ends a word of its own, as a space would."""
    start = match.start()
    before = text[start - 1] if start else ""
    if not (before.isascii() and before.isalpha()):
        return False
    if before.islower() != text[start].islower():
        return False  # a lower-case label before an upper-case prefix, or the other way round
    body = _random_part(match)
    return not (any(c.isdigit() for c in body) and any(c.isalpha() for c in body))


@dataclass(frozen=True)
class Credential:
    kind: str
    offset: int  # where it starts, in code points from 0


# No format above matches fewer characters (an AWS access key id): a shorter text (most tags, a
# scope) is not searched.
SHORTEST = 20


def find_credential(text: str) -> Credential | None:
    """The credential that starts first in `text` as a client would copy it out: compatibility
    forms folded (NFKC: a fullwidth A is A) and format characters (Unicode category Cf:
    zero-width spaces and joiners, marks of direction, soft hyphens) left out, as a copy of
    "gh" U+200B "p_..." pasted into a shell or a config file works as the token. Its offset
    counts in `text` itself. None when there is none."""
    if text.isascii() or (
        # Checked whole first (as most text folds to itself), so that only a text that may fold
        # is looked at character by character.
        unicodedata.is_normalized("NFKC", text) and _printable(text)
    ):
        return _first_credential(text)
    folds = _folds(text)
    if not folds:
        return _first_credential(text)
    folded = text
    for char, spelled in folds.items():  # str.translate takes several times as long
        folded = folded.replace(char, spelled)
    found = _first_credential(folded)
    if found is not None:
        found = Credential(found.kind, _offset_in(text, folds, found.offset))
    # Leaving a format character out may join a credential to the word before it ("key" U+200B
    # "AKIA..."), where a random part of letters only is no match; one that stands alone in the
    # text as sent still is.
    as_sent = _first_credential(text)
    if found is None or (as_sent is not None and as_sent.offset < found.offset):
        return as_sent
    return found


def _printable(text: str) -> bool:
    """Whether `text` holds no format character, nor white space but the space and line breaks:
    a format character is not printable (str.isprintable), and a line break is, in most text,
    the only other character that is not."""
    return all(line.isprintable() for line in text.splitlines())


@lru_cache(maxsize=4096)
def _folded(char: str) -> str:
    if unicodedata.category(char) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", char)


def _folds(text: str) -> dict[str, str]:
    """How each character of `text` that folds is spelled folded. Each folds on its own, not
    with its neighbours as NFKC of the whole text would (a combining mark after a fullwidth
    letter): so every character of the folded text comes of one of `text`'s, and an offset maps
    back; none of a credential's characters is one a mark composes with."""
    folds = {}
    for char in set(text):
        if not char.isascii() and (folded := _folded(char)) != char:
            folds[char] = folded
    return folds


def _offset_in(text: str, folds: dict[str, str], offset: int) -> int:
    """The index in `text` of the character whose fold holds the folded text's `offset`."""
    position = 0
    for index, char in enumerate(text):
        position += len(folds.get(char, char))
        if position > offset:
            return index
    raise ValueError(offset)


def _first_credential(text: str) -> Credential | None:
    if len(text) < SHORTEST:
        return None
    found: Credential | None = None
    for form in FORMATS:
        if not any(marker in text for marker in form.markers):
            continue
        for match in form.pattern.finditer(text):
            if (
                _filler(match)
                or (form.issued is not None and not form.issued(match))
                or _part_of_a_word(text, match)
            ):
                continue
            if found is None or match.start() < found.offset:
                found = Credential(form.kind, match.start())
            break
    return found


def refuse_credential(field: str, text: str, *, carried_over: bool = False) -> None:
    """InvalidInput when `text` holds a credential: naming `field`, the kind and where it starts,
    and what to store instead; never the credential. `carried_over`: the text is the memory's
    being revised, which the caller left out (the revision would copy it)."""
    credential = find_credential(text)
    if credential is None:
        return
    carried = " (carried over from the memory revised: give the revision a new one)"
    raise InvalidInput(
        field,
        f"holds what looks like {credential.kind} at character {credential.offset} (Unicode "
        f"code points from 0, in NFC, after trimming){carried if carried_over else ''}; a memory "
        "is served to every app connected to this account, cached and exported, so it holds no "
        "credentials: store where the secret lives instead, e.g. 'the deploy key is in the team "
        "vault under aws/prod'",
    )
