"""How a person proves who they are: Django's username and password check, for live accounts
only."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend


class AccountBackend(ModelBackend):
    """Django's ModelBackend, refusing an erased account whatever its row says: erasure leaves it
    inactive with an unusable password, and the database keeps it inactive, but a password set
    on it later (a shell, a script) must still open nothing. Asked at log-in and for every
    request of a session."""

    def user_can_authenticate(self, user) -> bool:
        return super().user_can_authenticate(user) and getattr(user, "erased_at", None) is None
