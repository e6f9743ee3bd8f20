"""Forms of the account pages. Django's auth forms do the work; these add throttling, sign-up
and the password re-check before erasure."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.exceptions import ValidationError

from accounts.throttle import clear_login_failures, login_is_throttled, record_login_failure

THROTTLED_MESSAGE = (
    "Too many failed log-in attempts for this account or from your network. "
    "Wait %(minutes)d minutes, then try again."
)


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's log-in form, refusing to check any password once the username or the client IP
    has too many recent failures."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        ip = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        if login_is_throttled(username=username, ip=ip):
            raise ValidationError(
                THROTTLED_MESSAGE,
                code="throttled",
                params={"minutes": max(1, settings.LOGIN_FAILURE_WINDOW_SECONDS // 60)},
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            record_login_failure(username=username, ip=ip)
            raise
        clear_login_failures(username=username)
        return cleaned

    @property
    def is_throttled(self) -> bool:
        return any(error.code == "throttled" for error in self.non_field_errors().as_data())


class SignUpForm(UserCreationForm):
    """Username (unique regardless of case), optional e-mail, password twice (Django's password
    validators apply)."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")
        help_texts = {"email": "Optional."}

    def clean_username(self) -> str:
        username = super().clean_username()
        # Erasure renames accounts to erased-<id>; a live account must never look like one.
        if username and username.casefold().startswith("erased-"):
            raise ValidationError("Usernames may not start with “erased-”.", code="reserved")
        return username


class DeleteAccountForm(forms.Form):
    """Asks for the password again: erasure cannot be undone, so a left-open session is not
    enough to trigger it."""

    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            raise ValidationError("That is not your password. Nothing was deleted.", code="wrong")
        return password
