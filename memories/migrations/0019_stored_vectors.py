"""Which embedder made the stored vectors (memories.models.StoredVectors). An installation
upgraded to this has vectors of the model it runs with, `SEARCH_EMBEDDER` as it migrates; under
`none` it records nothing (not known). The application role reads the row and never writes it:
`embed_memories` does, as the migrating role."""

from django.conf import settings
from django.db import migrations, models

ROLE = "threengram_app"  # as in 0007


def record_the_running_model(apps, schema_editor) -> None:
    if settings.SEARCH_EMBEDDER != "none":
        apps.get_model("memories", "StoredVectors").objects.create(
            id=1, embedder=settings.SEARCH_EMBEDDER
        )


READ_ONLY = f"""
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON memories_storedvectors FROM {ROLE};
    END IF;
END $$;
"""  # noqa: S608 (constants only)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0018_word_matches_return_what_scoring_reads"),
    ]

    operations = [
        migrations.CreateModel(
            name="StoredVectors",
            fields=[
                (
                    "id",
                    models.PositiveSmallIntegerField(
                        default=1, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("embedder", models.TextField()),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("id", 1)), name="stored_vectors_one_row"
                    )
                ],
            },
        ),
        migrations.RunPython(record_the_running_model, migrations.RunPython.noop),
        migrations.RunSQL(READ_ONLY, migrations.RunSQL.noop),
    ]
