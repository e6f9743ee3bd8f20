"""No memory stores a credential: a write whose text holds one in a format no ordinary text takes
is refused naming the field, the kind and where it starts, never repeating it, and writes
nothing; text that only resembles one is stored."""

import json
import time
from pathlib import Path

import pytest

from memories.errors import InvalidInput
from memories.models import Memory
from memories.services import MemoryFields, record_memory, revise_memory
from tests.factories import MemoryFactory
from tests.memories.made_up_credentials import CREDENTIALS, PEM_BODY, github_token

# More spellings of the same kinds: the other prefixes and shapes a kind has.
MORE_CREDENTIALS = [
    ("an AWS access key id", "ASIA" + "Y34FZKBOKMUTVV7A"),
    # AWS's documentation example: refused like a live key (see memories.credentials).
    ("an AWS access key id", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("a GitHub token", github_token("ghs_", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1")),
    # A layout the checksum is not known for (a refresh token's longer body): refused as it is.
    ("a GitHub token", "ghr_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5" * 2 + "xY3z"),
    ("a GitHub token", "github_pat_" + "11ABCDEFG0abcdefghijkl_" + "aB3dE5gH7jK9" * 5),
    ("a Slack token", "xoxp-" + "41684372915-1320496754-45609968301-e708ba56e1517a99f6b5fb07"),
    ("a Stripe live secret key", "rk_live_" + "51H8aBcDeFgHiJkLmNoPqRsTuVwXyZ01"),
    (
        "an OpenAI API key",
        "sk-" + "aB3dE5gH7jK9mN1pQ3sT" + "T3Blbk" + "FJ" + "aB3dE5gH7jK9mN1pQ3sT",
    ),
    (
        "a private key (PEM or OpenPGP block)",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----",
    ),
    # A key copied out of a JSON file (a service-account key): its newlines are JSON escapes.
    (
        "a private key (PEM or OpenPGP block)",
        "-----BEGIN PRIVATE KEY-----\\n" + PEM_BODY + '\\n-----END PRIVATE KEY-----\\n"}',
    ),
    (
        "a private key (PEM or OpenPGP block)",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n" + PEM_BODY,
    ),
    # A PuTTY key file: named where its private part starts.
    ("a private key (PuTTY key file)", "Private-Lines: 14\r\n" + PEM_BODY),
]
NEAR_MISSES = [
    "The AKIA prefix marks a long-term AWS key id and ASIA a temporary one.",
    "AWS key ids look like AKIAXXXXXXXXXXXXXXXX; ours is in the vault.",
    "ASIAPACIFIC office moved; AKIA" + "IOSFODNN7EXAMPLEX is 21 characters, one too many.",
    # A key id's last 16 characters are base32: no 0, 1, 8 or 9.
    "Campaign code ASIAPACIFICSALES2026 goes live on Monday.",
    "Keys start with sk- then a long random part; ask-me-anything, task-list, desk-based.",
    "Anthropic keys start with sk-ant-api03-... and live in the team vault.",
    "-----BEGIN PUBLIC KEY-----\n" + PEM_BODY + "\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\n" + PEM_BODY + "\n-----END CERTIFICATE-----",
    "The file must start with -----BEGIN RSA PRIVATE KEY----- and sits in /etc/ssl/private.",
    "-----BEGIN PRIVATE KEY-----\n" + "X" * 64 + "\n-----END PRIVATE KEY-----",
    "PuTTY keys list Private-Lines: 14 before the private part.",
    "Fixed in 3f786850e387550fdab836ed7e6dc881de23001b on main.",
    "See memory 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.",
    "SLACK_BOT_TOKEN=xoxb-your-bot-token-goes-here",
    "sk_test_" + "z63FfkCzJr4i0B3JrTAwR4y9 is a test-mode key; pk_live_ ones are public.",
    "sk_live_" + "x" * 28,
    "ghp_ tokens are 40 characters; GITHUB_PAT_TOKEN is set in CI.",
    # A documentation placeholder: its last 6 characters are not the check of the rest.
    "export GITHUB_TOKEN=ghp_" + "YourPersonalAccessTokenGoesHere12345",
    # Fullwidth, as a client copies it: ASIAPACIFICSALES2026, no key id (a 0 in it).
    "Campaign code " + "".join(chr(ord(c) + 0xFEE0) for c in "ASIAPACIFICSALES2026") + ".",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    # Words running into a prefix: letters before it, and no digit in what follows.
    "Report EURASIANCOUNTRIESLISTED is due on Friday.",
    "The flag risk_live_monitoringdashboardforteams is on.",
    "Chart stock_highs_ofthequarterlyrevenuereportcomparison weekly.",
]


def note(owner, **fields):
    return record_memory(owner=owner, **({"memory_type": "note", "topic": "t"} | fields))


def assert_refusal(error: InvalidInput, field: str, kind: str, offset: int, credential: str):
    message = str(error)
    assert message.startswith(f"invalid_input: {field}: holds what looks like {kind} ")
    assert f"at character {offset} " in message
    assert "store where the secret lives instead" in message
    assert credential not in message and credential[-12:] not in message


@pytest.mark.parametrize(("kind", "credential"), CREDENTIALS.items(), ids=list(CREDENTIALS))
def test_content_holding_a_credential_is_refused_and_nothing_is_written(tenant, kind, credential):
    content = f"  Deploy with {credential} tomorrow"
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=content)
    # The offset counts in the text as stored: after the leading spaces are trimmed.
    assert_refusal(error.value, "content", kind, len("Deploy with "), credential)
    assert not Memory.objects.exists()


def test_the_offset_counts_in_the_text_as_stored_and_says_so(tenant):
    """A decomposed accent (as macOS input sends it) is one code point once stored in NFC: the
    offset counts there, and the refusal says so, since it differs from the sender's count."""
    key = CREDENTIALS["an AWS access key id"]
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=f"Cafe\u0301 {key}")
    assert "at character 5 (Unicode code points from 0, in NFC, after trimming)" in str(error.value)


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


SPLIT_CREDENTIALS = [
    # As a client copies them: the compatibility forms folded, the format characters left out.
    ("an AWS access key id", fullwidth(CREDENTIALS["an AWS access key id"])),
    ("a GitHub token", "gh\u200bp_" + CREDENTIALS["a GitHub token"][4:]),
    (
        "a GitHub token",
        CREDENTIALS["a GitHub token"][:20] + "\u2060\u200d" + CREDENTIALS["a GitHub token"][20:],
    ),
    (
        "a Stripe live secret key",
        "sk_live_" + "\u00ad".join(CREDENTIALS["a Stripe live secret key"][8:]),
    ),
    (
        "a Google API key",
        fullwidth(CREDENTIALS["a Google API key"][:10])
        + "\u202d"
        + CREDENTIALS["a Google API key"][10:],
    ),
]


@pytest.mark.parametrize(("kind", "credential"), SPLIT_CREDENTIALS)
def test_a_credential_written_fullwidth_or_split_by_invisible_characters_is_refused(
    tenant, kind, credential
):
    content = f"note \u200b\u200b{credential}"
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=content)
    # The offset counts in the text as sent: the invisible characters before it count too.
    assert_refusal(error.value, "content", kind, len("note \u200b\u200b"), credential)
    assert not Memory.objects.exists()


def test_a_credential_after_a_word_and_an_invisible_character_is_refused(tenant):
    """Left out, the zero-width space joins the key to the word before it ("keyAKIA..."); the
    offset still counts in the text as sent, where the key starts after that space."""
    key = CREDENTIALS["an AWS access key id"]
    for content in (f"deploy key\u200b{key}", f"\uff4b\uff45\uff59\u200b{key}"):
        with pytest.raises(InvalidInput) as error:
            note(tenant, content=content)
        assert_refusal(error.value, "content", "an AWS access key id", content.index(key), key)
    assert not Memory.objects.exists()


GLUED_KINDS = [kind for kind in CREDENTIALS if not kind.startswith("a private key")]


@pytest.mark.parametrize("word", ["key", "token", "KEY", "Schl\u00fcssel"])
@pytest.mark.parametrize("kind", GLUED_KINDS)
def test_a_credential_glued_to_the_word_before_it_is_refused(tenant, kind, word):
    """Pasted with no space after its label ("keyAKIA...", "tokenghp_..."), a credential works
    as well as one standing alone; it used to be stored."""
    credential = CREDENTIALS[kind]
    content = f"the deploy {word}{credential} for staging"
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=content)
    assert_refusal(error.value, "content", kind, content.index(credential), credential)
    assert not Memory.objects.exists()


def test_a_key_id_without_a_digit_is_refused_after_a_change_of_case_or_script(tenant):
    """One key id in 28 holds no digit. Glued to a lower-case label, or to a word of another
    script (CJK runs need no space), it is no upper-case word running into AKIA (the near
    misses above): refused all the same."""
    key = "AKIA" + "QWERTYUIOPASDFGH"
    for content in (f"deploy key{key}", f"\u5bc6\u94a5{key}", f"cl\u00e9{key}"):
        with pytest.raises(InvalidInput) as error:
            note(tenant, content=content)
        assert_refusal(error.value, "content", "an AWS access key id", content.index(key), key)
    assert not Memory.objects.exists()


def test_the_offset_of_a_folded_credential_points_at_its_first_character_as_sent(tenant):
    """Characters that fold to more than one (the ligature U+FB01 is "fi") or to none move the
    folded text against the sent one; the refusal counts in the sent one."""
    key = CREDENTIALS["an AWS access key id"]
    content = "\ufb01le \u00bd \u200bkey: \u200b" + fullwidth(key[:4]) + key[4:]
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=content)
    assert_refusal(error.value, "content", "an AWS access key id", content.index("\uff21"), key)


def test_a_github_token_is_one_only_when_its_checksum_holds(tenant):
    """A ghp_ token ends with the CRC32 of its random part (base62): one whose end is not it no
    issuer generated, and is stored. The other prefixes' tokens were not checked against tokens
    GitHub issued: refused whatever their end."""
    random_part = "Rk3Vx9Qm2Lz8Tc5Wd7Nb4Yp6Hj1Fs0"
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
        token = github_token(prefix, random_part)
        with pytest.raises(InvalidInput) as error:
            note(tenant, content=f"token {token}")
        assert_refusal(error.value, "content", "a GitHub token", 6, token)
    token = github_token("ghp_", random_part)
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")  # a made-up token: stored
    memory = note(tenant, content=f"example: {altered}")
    assert Memory.objects.get(id=memory.id).content == f"example: {altered}"
    for prefix in ("gho_", "ghu_", "ghs_", "ghr_"):
        other = prefix + altered.removeprefix("ghp_")
        with pytest.raises(InvalidInput) as error:
            note(tenant, content=f"example: {other}")
        assert_refusal(error.value, "content", "a GitHub token", 9, other)


@pytest.mark.parametrize(("kind", "credential"), MORE_CREDENTIALS)
def test_each_spelling_of_a_kind_is_refused(tenant, kind, credential):
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=credential)
    assert_refusal(error.value, "content", kind, 0, credential)
    assert not Memory.objects.exists()


def test_topic_tags_and_project_are_held_to_it_too(tenant):
    key = CREDENTIALS["an AWS access key id"]
    for fields, field, offset in [
        ({"topic": f"key {key}"}, "topic", 4),
        ({"tags": ["aws", key]}, "tags[1]", 0),
        ({"project": f"infra/{key}"}, "project", 6),
    ]:
        with pytest.raises(InvalidInput) as error:
            note(tenant, content="the deploy key is in the team vault", **fields)
        assert_refusal(error.value, field, "an AWS access key id", offset, key)
    assert not Memory.objects.exists()


def test_a_tag_is_named_by_its_index_in_the_list_sent(tenant):
    """Repeated tags (the same once trimmed) are stored once; a refusal still counts them, so the
    index it names is the one the caller wrote."""
    key = CREDENTIALS["an AWS access key id"]
    with pytest.raises(InvalidInput) as error:
        note(tenant, content="the deploy key is in the team vault", tags=["aws", " aws ", key])
    assert_refusal(error.value, "tags[2]", "an AWS access key id", 0, key)
    assert not Memory.objects.exists()


def test_the_first_credential_in_the_text_is_the_one_named(tenant):
    aws, github = CREDENTIALS["an AWS access key id"], CREDENTIALS["a GitHub token"]
    with pytest.raises(InvalidInput) as error:
        note(tenant, content=f"{github} and {aws}")
    assert_refusal(error.value, "content", "a GitHub token", 0, github)


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_text_that_only_resembles_a_credential_is_stored(tenant, text):
    memory = note(tenant, content=text, topic=text[:256], tags=[text[:64]])
    assert Memory.objects.get(id=memory.id).content == text


def test_a_revision_holding_a_credential_is_refused_and_its_predecessor_stays(tenant):
    first = note(tenant, content="deploy key: see the vault")
    key = CREDENTIALS["a Stripe live secret key"]
    with pytest.raises(InvalidInput) as error:
        revise_memory(owner=tenant, predecessor_id=first.id, content=f"key {key}")
    assert_refusal(error.value, "content", "a Stripe live secret key", 4, key)
    with pytest.raises(InvalidInput) as error:
        revise_memory(owner=tenant, predecessor_id=first.id, content="v2", tags=[key])
    assert_refusal(error.value, "tags[0]", "a Stripe live secret key", 0, key)
    assert list(Memory.objects.values_list("id", "valid_to")) == [(first.id, None)]


def test_a_credential_already_stored_is_left_as_it_is_and_a_revision_replaces_it(tenant):
    """A memory stored before the rule keeps its text; a revision that would copy the
    credential into the new version says where it came from, and one that replaces it works."""
    key = CREDENTIALS["an AWS access key id"]
    old = MemoryFactory(owner=tenant, topic=f"aws {key}", content="rotate quarterly")
    with pytest.raises(InvalidInput) as error:
        revise_memory(owner=tenant, predecessor_id=old.id, content="rotate monthly")
    assert_refusal(error.value, "topic", "an AWS access key id", 4, key)
    assert "carried over from the memory revised" in str(error.value)
    old.refresh_from_db()
    assert old.valid_to is None and old.topic == f"aws {key}"

    successor = revise_memory(
        owner=tenant, predecessor_id=old.id, content="rotate monthly", topic="aws deploy key"
    )
    assert successor.topic == "aws deploy key"


def test_every_memory_of_the_retrieval_eval_sets_is_accepted():
    """The eval sets stand for what agents store: none of it may be taken for a credential."""
    checked = 0
    for path in sorted(Path(__file__).parent.glob("retrieval_eval/*.json")):
        data = json.loads(path.read_text())
        for memory in data["memories"] + data["revisions"]:
            MemoryFields.clean(
                memory_type=memory.get("memory_type", "note"),
                topic=memory["topic"],
                content=memory["content"],
                project=memory.get("project"),
                tags=memory.get("tags"),
            )
            checked += 1
    assert checked > 200


def test_text_shaped_to_make_the_key_pattern_backtrack_is_stored_at_once(tenant):
    """Below a private key's header, one line of "a: a: a: ..." splits into up to four header
    lines at any of its spaces: were the splits tried one by one, a 2,000-character content would
    hold its write for seconds."""
    block = "-----BEGIN PRIVATE KEY-----\n" + "a: " * 194
    content = (block * 3)[:2000]
    started = time.perf_counter()
    memory = note(tenant, content=content)
    assert time.perf_counter() - started < 1
    assert Memory.objects.get(id=memory.id).content == content.strip()
