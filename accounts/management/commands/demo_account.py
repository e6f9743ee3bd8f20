"""Create (or reset) the demo account printed by the quick start, with a few memories.

`dev.py serve` runs it at every start: an erased demo account (erasure renames it) comes back at
the next start as a new account, with its password and its few memories again."""

import os

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.models import DEMO_USERNAME
from memories import tenancy
from memories.models import Memory
from memories.services import record_memory

DEFAULT_PASSWORD = "demo-password-change-me"

DEMO_MEMORIES = [
    ("decision", "storage", "We keep memories append-only: revise inserts a successor."),
    ("commitment", "release", "Ship the first public build once the conformance suite passes."),
    ("preference", "style", "Prefer short answers with the reasoning first."),
]


class Command(BaseCommand):
    help = "Create the demo account (username 'demo') and print its login."

    def handle(self, *args, **options):
        User = get_user_model()
        # Empty (`DEMO_PASSWORD=` in a compose file or .env) is unset, as `dev.py serve` reads it.
        password = os.environ.get("DEMO_PASSWORD") or DEFAULT_PASSWORD
        # Usernames are unique whatever their case: after the demo account was erased, someone
        # may have signed up as "Demo". That account is theirs, not the demo's to reset.
        others = User.objects.filter(username__iexact=DEMO_USERNAME)
        taken = others.exclude(username=DEMO_USERNAME).first()
        if taken is not None:
            self.stdout.write(
                f"no demo login: the name is taken by the account {taken.username!r}, "
                "signed up on this server"
            )
            return
        defaults = {"email": "demo@example.com"}
        # The password every account is held to (AUTH_PASSWORD_VALIDATORS): DEMO_PASSWORD is
        # set for a server others can reach, where "a" would open the account to anyone.
        named = others.first() or User(username=DEMO_USERNAME, **defaults)
        try:
            validate_password(password, named)
        except ValidationError as refused:
            raise CommandError(
                f"DEMO_PASSWORD is refused: {' '.join(refused.messages)} Set a stronger one; "
                "the demo account was not changed."
            ) from None
        user, _ = User.objects.get_or_create(username=DEMO_USERNAME, defaults=defaults)
        user.set_password(password)
        user.is_active = True
        user.save()
        with tenancy.acting_for(user.pk):  # row-level security, when DATABASE_APP_ROLE is set
            if not Memory.objects.owned_by(user).exists():
                for memory_type, topic, content in DEMO_MEMORIES:
                    record_memory(owner=user, memory_type=memory_type, topic=topic, content=content)
        self.stdout.write(f"demo login: username 'demo', password '{password}'")
