import factory
import numpy as np
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from memories.embedding import embed_memories, memory_text
from memories.models import Memory, MemoryType, Thread, ThreadMembership

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"tenant{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    password = factory.django.Password(PASSWORD)


def embed(memory) -> np.ndarray | None:
    """The vector of a memory's text, as the services compute it (None with no model)."""
    [vector] = embed_memories(
        [
            memory_text(
                topic=memory.topic,
                content=memory.content,
                tags=getattr(memory, "tags", None) or [],
                project=getattr(memory, "project", None),
            )
        ]
    )
    return vector


class MemoryFactory(factory.django.DjangoModelFactory):
    """Inserts rows directly (bypassing services) for read-side tests."""

    class Meta:
        model = Memory

    owner = factory.SubFactory(UserFactory)
    memory_type = MemoryType.NOTE
    topic = factory.Sequence(lambda n: f"topic {n}")
    content = factory.Sequence(lambda n: f"memory number {n}")
    content_length = factory.LazyAttribute(lambda memory: len(memory.content))
    recorded_at = factory.LazyFunction(timezone.now)
    commitment_status = factory.LazyAttribute(
        lambda memory: "open" if memory.memory_type == MemoryType.COMMITMENT else None
    )

    class Params:
        # With the vector `record_memory` stores with the row; without it, a row from before
        # semantic search (or stored while SEARCH_EMBEDDER was none).
        embedded = factory.Trait(embedding=factory.LazyAttribute(embed))


class ThreadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Thread

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"thread {n}")


class ThreadMembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ThreadMembership

    thread = factory.SubFactory(ThreadFactory)
    owner = factory.SelfAttribute("thread.owner")
    memory = factory.SubFactory(MemoryFactory, owner=factory.SelfAttribute("..owner"))
    state = "member"
    decided_at = factory.LazyAttribute(
        lambda row: None if row.state == "proposed" else timezone.now()
    )


class ApplicationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_application_model()

    name = factory.Sequence(lambda n: f"MCP client {n}")
    client_type = "public"
    authorization_grant_type = "authorization-code"
    redirect_uris = "http://127.0.0.1:33418/callback"


class AccessTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_access_token_model()

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    token = factory.Sequence(lambda n: f"access-token-{n}-" + "x" * 20)
    scope = "memory:read memory:write"
    expires = factory.LazyFunction(lambda: timezone.now() + timezone.timedelta(hours=1))


class RefreshTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_refresh_token_model()

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    token = factory.Sequence(lambda n: f"refresh-token-{n}")
    access_token = factory.SubFactory(
        AccessTokenFactory,
        user=factory.SelfAttribute("..user"),
        application=factory.SelfAttribute("..application"),
    )


class GrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_grant_model()

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    code = factory.Sequence(lambda n: f"grant-code-{n}")
    expires = factory.LazyFunction(lambda: timezone.now() + timezone.timedelta(minutes=1))
    redirect_uri = "http://127.0.0.1:33418/callback"
    code_challenge = "x" * 43
    code_challenge_method = "S256"


class IDTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_id_token_model()

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(ApplicationFactory)
    scope = "openid"
    expires = factory.LazyFunction(lambda: timezone.now() + timezone.timedelta(hours=1))


def insert_commitment_due_at(owner, due_at_sql: str, content: str = "stored long ago") -> object:
    """A commitment written with raw SQL, bypassing the services' bounds, due at the SQL
    timestamptz literal `due_at_sql` (e.g. year 10000, which a caller could once store through an
    offset): a row as old data may hold it. Returns its id."""
    from django.db import connection

    from memories.models import new_memory_id

    memory_id = new_memory_id()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, "
            "topic, scope, tags, recorded_at, due_at, status, commitment_status) "
            "VALUES (%s, %s, %s, %s, 'commitment', 'old data', 'personal', '{}', now(), "
            "%s::timestamptz, 'active', 'open')",
            [memory_id, owner.pk, content, len(content), due_at_sql],
        )
    return memory_id


def insert_memory_as_once_stored(owner, memory_type: str, topic: str, content: str) -> object:
    """A memory written with raw SQL, naming only the columns every schema of the memories table
    has had: a row stored under an older schema (a test migrated back to it), which the model's
    INSERT, naming the columns added since, could not write. Returns it as the model reads it."""
    from django.db import connection

    from memories.models import Memory, new_memory_id

    memory_id = new_memory_id()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type, "
            "topic, scope, tags, recorded_at, status) "
            "VALUES (%s, %s, %s, %s, %s, %s, 'personal', '{}', now(), 'active')",
            [memory_id, owner.pk, content, len(content), memory_type, topic],
        )
    return Memory(id=memory_id, owner=owner)
