"""The models and the migrations describe one schema: a model change without its migration would
reach a database only by accident (an index declared in Meta and never created)."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    out = StringIO()
    try:
        call_command(
            "makemigrations", "--check", "--dry-run", interactive=False, stdout=out, stderr=out
        )
    except SystemExit:
        pytest.fail(f"models changed without a migration:\n{out.getvalue()}")
