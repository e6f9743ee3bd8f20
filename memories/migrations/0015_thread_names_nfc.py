"""Thread names in NFC, the one form the services now store and look names up in
(memories.bounds): a name saved decomposed (NFD) before could no longer be reached by any name a
client sends. A name whose NFC form another thread of the account already has (two threads that
looked alike) keeps a marked name instead, which its owner can rename.

Memories are not rewritten: their text is append-only (the database's trigger allows only
erasure to change it)."""

from django.db import migrations

# 90 characters of the name and the 10 of the mark: a thread name is at most 100.
FORWARD = """
UPDATE memories_thread t
SET name = CASE
    WHEN EXISTS (
        SELECT 1 FROM memories_thread o
        WHERE o.owner_id = t.owner_id AND o.id <> t.id
          AND lower(o.name) = lower(normalize(t.name, NFC))
    )
    THEN left(normalize(t.name, NFC), 90) || ' (renamed)'
    ELSE normalize(t.name, NFC)
END
WHERE t.name IS NOT NFC NORMALIZED
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0014_memory_rows_inline"),
    ]

    operations = [migrations.RunSQL(FORWARD, migrations.RunSQL.noop)]
