"""Delete dynamically registered OAuth clients that nobody uses any more (run daily, next to
DOT's `cleartokens` and `clearcimdapplications`)."""

from datetime import timedelta

from django.core.management.base import BaseCommand

from accounts.oauth_registration import delete_stale_registered_clients


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, default=30, help="only clients registered this long ago"
        )

    def handle(self, *args, days: int, **options):
        deleted = delete_stale_registered_clients(older_than=timedelta(days=days))
        self.stdout.write(f"deleted {deleted} unused dynamically registered client(s)")
