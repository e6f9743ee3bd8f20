"""manage.py erase_account USERNAME [--staff STAFF_USERNAME] [--yes]"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError

from accounts.erasure import erase_account
from memories.bounds import unstorable_text


def _shown(name: str) -> str:
    """A name as a refusal repeats it: usernames are at most 150 characters, a typo is short."""
    return name if len(name) <= 150 else f"{name[:150]}…"


class Command(BaseCommand):
    help = (
        "Erase an account: overwrite all its memories with [erased], revoke every OAuth "
        "credential, deactivate it. Irreversible."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--staff", help="username of the staff member requesting the erasure")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, *args, username, staff, yes, **options):
        # A name no account can have (NUL, or bytes a shell passed that are not UTF-8) cannot be
        # looked up: PostgreSQL refuses it.
        for option, value in (("USERNAME", username), ("--staff", staff)):
            if value is not None and (problem := unstorable_text(value)):
                raise CommandError(f"{option} {problem}; nothing was changed")
        User = get_user_model()
        try:
            user = User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"no account named {_shown(username)!r}") from None
        staff_member = None
        if staff is not None:  # an empty one (an unset variable) names no staff member: refused
            staff_member = User.objects.filter(
                username=staff, is_staff=True, is_active=True
            ).first()
            if staff_member is None:
                raise CommandError(f"{_shown(staff)!r} is not an active staff account")
        if not yes:
            try:
                answer = input(
                    f"Erase account {username!r} and every memory in it? This cannot be undone. "
                    "Type the username to confirm: "
                )
            except EOFError:
                raise CommandError(
                    "no terminal to confirm on (pass --yes to erase without asking); "
                    "nothing was changed"
                ) from None
            if answer.strip() != username:
                raise CommandError("confirmation did not match; nothing was changed")
        try:
            result = erase_account(user=user, requested_by_staff=staff_member)
        except OperationalError as error:
            # A row the erasure must rewrite was held past the lock timeout (a backfill batch, a
            # write in flight), or the database went away: one transaction, so nothing changed.
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise CommandError(
                f"the database could not erase {username!r} now ({reason}); nothing was changed, "
                "run the command again"
            ) from None
        if result.already_erased:
            self.stdout.write(f"account #{user.pk} was already erased; nothing changed")
        else:
            counts = ", ".join(f"{table}={n}" for table, n in sorted(result.counts.items()))
            self.stdout.write(self.style.SUCCESS(f"erased account #{user.pk}: {counts}"))
