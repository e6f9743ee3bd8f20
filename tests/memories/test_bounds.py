"""Every bound on tenant-written fields: enforced on the way in, with a message naming the field
and the limit, and nothing written."""

import pytest

from memories.errors import InvalidInput
from memories.models import Memory
from memories.services import remember


def remember_note(owner, **overrides):
    fields = {"memory_type": "note", "topic": "t", "content": "c"} | overrides
    return remember(owner=owner, **fields)


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"content": ""}, "content", "at least 1"),
        ({"content": "   \n\t "}, "content", "at least 1"),
        ({"content": "x" * 2001}, "content", "at most 2000 characters (Unicode code points)"),
        ({"content": 42}, "content", "must be a string"),
        ({"content": "a\x00b"}, "content", "NUL"),
        ({"topic": ""}, "topic", "at least 1"),
        ({"topic": "t" * 257}, "topic", "at most 256"),
        ({"scope": "Not Kebab"}, "scope", "kebab-case"),
        ({"scope": "trailing-"}, "scope", "kebab-case"),
        ({"scope": "a" * 65}, "scope", "at most 64"),
        ({"project": "p" * 257}, "project", "at most 256"),
        ({"tags": [f"t{i}" for i in range(33)]}, "tags", "at most 32 tags"),
        ({"tags": ["ok", "x" * 65]}, "tags[1]", "at most 64"),
        ({"tags": ["ok", "  "]}, "tags[1]", "at least 1"),
        ({"tags": "not-a-list"}, "tags", "list of strings"),
        ({"memory_type": "rumour"}, "memoryType", "must be one of: decision, commitment"),
    ],
)
def test_out_of_bounds_input_is_rejected_and_writes_nothing(tenant, overrides, field, fragment):
    with pytest.raises(InvalidInput) as error:
        remember_note(tenant, **overrides)
    assert error.value.field == field
    assert fragment in str(error.value)
    assert str(error.value).startswith(f"invalid_input: {field}:")
    assert not Memory.objects.exists()


def test_content_limit_counts_code_points_not_bytes(tenant):
    emoji = "\N{BRAIN}"  # 4 bytes in UTF-8, one code point
    memory = remember_note(tenant, content=emoji * 2000)
    assert memory.content_length == 2000
    with pytest.raises(InvalidInput, match="got 2001"):
        remember_note(tenant, content=emoji * 2001)


def test_strings_are_trimmed_and_defaults_applied(tenant):
    memory = remember_note(
        tenant, topic="  launch  ", content="\n  ship it \t", tags=[" a ", "a", "b"]
    )
    memory.refresh_from_db()
    assert (memory.topic, memory.content, memory.content_length) == ("launch", "ship it", 7)
    assert memory.tags == ["a", "b"]
    assert memory.scope == "personal"
    assert memory.project is None


def test_limits_themselves_are_accepted(tenant):
    memory = remember_note(
        tenant,
        content="c" * 2000,
        topic="t" * 256,
        scope="s" * 64,
        project="p" * 256,
        tags=[f"{i:02d}" + "x" * 62 for i in range(32)],
    )
    memory.refresh_from_db()
    assert memory.content_length == 2000 and len(memory.tags) == 32
