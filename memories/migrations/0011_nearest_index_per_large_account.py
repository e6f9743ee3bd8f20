"""The HNSW index over every account's vectors gives way to one per large account, which
`manage.py index_accounts` and `manage.py embed_memories` build (memories/nearest.py). Until they
have run, every search scans its account's vectors exactly.

Dropped CONCURRENTLY: reads and writes go on meanwhile (hence not atomic)."""

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memories", "0010_membership_recent_members"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="memory", name="memory_embedding_current"),
    ]
