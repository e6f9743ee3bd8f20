"""The tenant is one user account; every memory belongs to exactly one of them."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as DjangoUserManager
from django.db import models
from django.db.models import Value
from django.db.models.functions import Lower

# The demo account's name (`manage.py demo_account`), kept from sign-up in any case.
DEMO_USERNAME = "demo"


class UserManager(DjangoUserManager):
    def get_by_natural_key(self, username: str) -> User:
        """The account named `username` in any case: names are unique regardless of case (the
        constraint on User), so "Ada" logs in to the account signed up as "ada", as sign-up
        refused the one for the other. Compared as that constraint's index compares them."""
        return self._named(username).get()

    async def aget_by_natural_key(self, username: str) -> User:
        return await self._named(username).aget()

    def _named(self, username: str) -> models.QuerySet:
        return self.alias(name_key=Lower("username")).filter(name_key=Lower(Value(username)))


def erased_username(account_id: int) -> str:
    """The name an erased account is given in place of its own."""
    return f"erased-{account_id}"


class User(AbstractUser):
    """A tenant. Erasure deactivates the row and replaces its identifying text; it never deletes
    it, so audit records and the append-only memories keep a valid owner."""

    erased_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = UserManager()

    def forget_email(self) -> None:
        """Drop the e-mail address the account gave at sign-up: the server sends no e-mail, so
        an address serves nothing and is kept only if its owner chooses to."""
        self.email = ""
        self.save(update_fields=["email"])

    class Meta(AbstractUser.Meta):
        constraints = [
            # Sign-up promises names unique regardless of case; two sign-ups at once both pass
            # the form's check, so the database decides.
            models.UniqueConstraint(
                Lower("username"),
                name="accounts_user_username_lower_unique",
                violation_error_message="A user with that username already exists.",
            ),
            # Whatever writes the row (the admin, a shell, a script), an erased account stays
            # inactive: no log-in, no token exchange, no session.
            models.CheckConstraint(
                condition=models.Q(erased_at__isnull=True) | models.Q(is_active=False),
                name="accounts_user_erased_is_inactive",
                violation_error_message="An erased account cannot be made active.",
            ),
        ]


class ErasureRecord(models.Model):
    """A content-free audit entry for one account erasure: who, when, on whose request, and how
    many rows of each table were rewritten or revoked. Never holds erased text."""

    class Requester(models.TextChoices):
        USER = "user", "the account holder"
        STAFF = "staff", "a staff member"

    account = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="erasure_record"
    )
    erased_at = models.DateTimeField(db_index=True)
    requested_by = models.CharField(max_length=8, choices=Requester.choices)
    staff_member = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="erasures_performed",
    )
    counts = models.JSONField(default=dict, help_text="Rows rewritten or revoked, per table.")

    class Meta:
        ordering = ["-erased_at"]
        constraints = [
            models.CheckConstraint(
                name="erasure_staff_iff_staff_requested",
                condition=(
                    models.Q(requested_by="staff", staff_member__isnull=False)
                    | models.Q(requested_by="user", staff_member__isnull=True)
                ),
            )
        ]

    def __str__(self) -> str:
        return f"Erasure of account #{self.account_id} at {self.erased_at:%Y-%m-%d %H:%M:%S}Z"

    @property
    def account_label(self) -> str:
        """The account as erasure left it, from the record alone: "erased-5 (#5)"."""
        return f"{erased_username(self.account_id)} (#{self.account_id})"
