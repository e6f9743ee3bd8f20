"""Delete dynamically registered OAuth clients that nobody uses any more (run daily, next to
DOT's `cleartokens` and `clearcimdapplications`)."""

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from accounts.oauth_registration import delete_stale_registered_clients

# A client registered moments ago may be on its consent page; a century is past any use.
DAYS_MIN, DAYS_MAX = 1, 36_500


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument(
            "--days",
            type=int,
            default=30,
            help=f"only clients registered this long ago ({DAYS_MIN} to {DAYS_MAX})",
        )

    def handle(self, *args, days: int, **options):
        if not DAYS_MIN <= days <= DAYS_MAX:
            raise CommandError(f"--days must be between {DAYS_MIN} and {DAYS_MAX}; got {days}")
        deleted = delete_stale_registered_clients(older_than=timedelta(days=days))
        self.stdout.write(f"deleted {deleted} unused dynamically registered client(s)")
