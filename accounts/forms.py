"""Forms of the account pages. Django's auth forms do the work; these add the log-in throttle to
every password check, sign-up (with its own limit per address) and the password re-check before
erasure."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import (
    AdminUserCreationForm,
    AuthenticationForm,
    PasswordChangeForm,
    UserChangeForm,
    UserCreationForm,
)
from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.forms.utils import ErrorDict
from django.http import HttpRequest

from accounts.models import DEMO_USERNAME
from accounts.throttle import (
    claim_signup,
    login_retry_after,
    record_login_failure,
    record_login_success,
    record_signup_failure,
    signup_retry_after,
)
from infra.rate_limit import client_network
from memories import bounds
from memories.browsing import filter_words
from memories.models import CommitmentStatus, MemoryType

THROTTLED_MESSAGE = (
    "Too many failed password attempts for this account or from your network. "
    "Wait %(minutes)d minute(s), then try again."
)
SIGNUP_THROTTLED_MESSAGE = (
    "Too many sign-up attempts from your network. Wait %(minutes)d minute(s), then try again."
)
T = TypeVar("T")


class ThrottledPasswordCheck:
    """For every form that checks a password: refuse without checking once the log-in throttle
    (accounts/throttle.py) says so, and count the outcome otherwise. `retry_after` tells the view
    how long to wait (its 429 carries it as Retry-After)."""

    request: HttpRequest | None
    retry_after: int | None = None

    def throttled_check(self, username: str, check: Callable[[], T]) -> T:
        ip = client_network(self.request) if self.request is not None else "unknown"
        self.retry_after = login_retry_after(username=username, ip=ip)
        if self.retry_after:
            raise ValidationError(
                THROTTLED_MESSAGE,
                code="throttled",
                params={"minutes": math.ceil(self.retry_after / 60)},
            )
        try:
            result = check()
        except ValidationError:
            record_login_failure(username=username, ip=ip)
            raise
        record_login_success(username=username, ip=ip)
        return result


class CharactersNotCodeUnits:
    """A box's `maxlength` at twice the field's limit. The server counts characters; a browser
    counts UTF-16 code units, two for a character outside the Basic Multilingual Plane (an emoji,
    a rarer CJK ideograph), so a box capped at the limit cut such text at half of it, and cut a
    longer paste without a word. At twice the limit every value the server takes can be typed,
    a paste stays bounded, and anything over the limit gets the server's message naming it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if getattr(field, "max_length", None) and "maxlength" in field.widget.attrs:
                field.widget.attrs["maxlength"] = str(2 * field.max_length)


class FocusFirstError:
    """A form sent back with errors puts the cursor, and a screen reader, on the first field in
    error: not on the form's first field (the username of a sign-up whose passwords differed)
    nor nowhere (the page's top, far above the message)."""

    def full_clean(self) -> None:
        super().full_clean()
        invalid = [name for name in self.fields if name in self._errors]
        if invalid:
            for field in self.fields.values():
                field.widget.attrs.pop("autofocus", None)
            self.fields[invalid[0]].widget.attrs["autofocus"] = True


class CursorOnThePasswordAfterARefusal:
    """A refused log-in comes back with the username as typed and the password empty (a
    password is never sent back): the cursor goes to the password, the one field left to fill,
    not to the username (Django's autofocus), a Tab away from it. Without a username, it stays
    there."""

    def full_clean(self) -> None:
        super().full_clean()
        if self.is_bound and self._errors and "username" not in self._errors:
            self.fields["username"].widget.attrs.pop("autofocus", None)
            self.fields["password"].widget.attrs["autofocus"] = True


# Django's wording says both fields "may be case-sensitive"; names log in in any case here
# (accounts.models.UserManager), so it would send a person retyping a right name.
CASE_NOTE = "Note that the password is case-sensitive; the username is not."


class ThrottledAuthenticationForm(
    CursorOnThePasswordAfterARefusal,
    CharactersNotCodeUnits,
    ThrottledPasswordCheck,
    AuthenticationForm,
):
    """Django's log-in form behind the log-in throttle."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": f"Please enter a correct %(username)s and password. {CASE_NOTE}",
    }

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        return self.throttled_check(username, super().clean)


class ThrottledAdminAuthenticationForm(
    CursorOnThePasswordAfterARefusal,
    CharactersNotCodeUnits,
    ThrottledPasswordCheck,
    AdminAuthenticationForm,
):
    """The admin's log-in form (staff only) behind the same throttle."""

    error_messages = {
        **AdminAuthenticationForm.error_messages,
        "invalid_login": (
            f"Please enter the correct %(username)s and password for a staff account. {CASE_NOTE}"
        ),
    }

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        return self.throttled_check(username, super().clean)


class RulesUnderTheChosenPassword:
    """The password rules judge the password chosen, not its repetition: their message goes
    under that field (`chosen_password`), where Django's forms put it under the confirmation."""

    chosen_password = "password1"

    def validate_password_for_user(self, user, password_field_name: str | None = None) -> None:
        super().validate_password_for_user(user, self.chosen_password)


class ThrottledPasswordChangeForm(
    FocusFirstError, RulesUnderTheChosenPassword, ThrottledPasswordCheck, PasswordChangeForm
):
    """The old password is a password check like a log-in: a left-open session must not allow
    unlimited guessing of it."""

    chosen_password = "new_password1"

    def __init__(self, user, *args, request: HttpRequest | None = None, **kwargs) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        return self.throttled_check(self.user.get_username(), super().clean_old_password)

    def clean(self) -> dict:
        cleaned = super().clean()
        # Compared with the old password only once it was checked: a wrong one says nothing
        # about the new.
        old, new = cleaned.get("old_password"), cleaned.get("new_password1")
        if old and new == old and "new_password1" not in self.errors:
            self.add_error(
                "new_password1",
                ValidationError(
                    "The new password must differ from your current one.", code="password_unchanged"
                ),
            )
        return cleaned


def refuse_reserved_username(username: str | None) -> None:
    """Erasure renames accounts to erased-<id>: a live account must never look like one (nor
    take the name an erasure will need). `demo` (in any case) is the demo account's, which
    `manage.py demo_account` gives its published password at every start: once an erasure has
    freed the name, a person who took it would have their account opened to anyone."""
    if username and username.casefold().startswith("erased-"):
        raise ValidationError("Usernames may not start with “erased-”.", code="reserved")
    if username and username.casefold() == DEMO_USERNAME:
        raise ValidationError(
            "The username “demo” is kept for the demo account; choose another.", code="reserved"
        )


class ThrottledSignUp:
    """Sign-up behind its limit per client address (accounts/throttle.py). Once it is used up,
    the form is refused with that message alone, before any check: nothing is created, and
    whether the name is taken is not looked up. Otherwise a refused form counts as a failure and
    a valid one claims an account, refused if that goes over the limit (sign-ups sent all at
    once). `retry_after` tells the view how long to wait (its 429 carries it as Retry-After)."""

    request: HttpRequest | None = None
    retry_after: int | None = None

    def full_clean(self) -> None:
        if not self.is_bound:
            super().full_clean()
            return
        ip = client_network(self.request) if self.request is not None else "unknown"
        self.retry_after = signup_retry_after(ip=ip)
        if self.retry_after:
            self._errors = ErrorDict(renderer=self.renderer)
            self.cleaned_data = {}
            self._refuse()
            return
        super().full_clean()
        if self._errors:
            record_signup_failure(ip=ip)
            return
        self.retry_after = claim_signup(ip=ip)
        if self.retry_after:
            self._refuse()

    def _refuse(self) -> None:
        self.add_error(
            None,
            ValidationError(
                SIGNUP_THROTTLED_MESSAGE,
                code="throttled",
                params={"minutes": math.ceil(self.retry_after / 60)},
            ),
        )


class SignUpForm(
    CharactersNotCodeUnits,
    FocusFirstError,
    ThrottledSignUp,
    RulesUnderTheChosenPassword,
    UserCreationForm,
):
    """Username (unique regardless of case) and password twice (Django's password validators
    apply), behind the sign-up limit per address. No e-mail: the server sends none, so asking for
    one would keep personal data that serves nothing."""

    def __init__(self, *args, request: HttpRequest | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.request = request

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)

    def clean_username(self) -> str:
        username = super().clean_username()
        refuse_reserved_username(username)
        return username


class StaffUserCreationForm(CharactersNotCodeUnits, AdminUserCreationForm):
    """The admin's "add user" form, with sign-up's reserved names."""

    def clean_username(self) -> str:
        username = super().clean_username()
        refuse_reserved_username(username)
        return username


class StaffUserChangeForm(CharactersNotCodeUnits, UserChangeForm):
    """The admin's user form: a username changed there keeps clear of the reserved names (an
    erased account keeps its own)."""

    def clean_username(self) -> str:
        username = self.cleaned_data.get("username")
        if "username" in self.changed_data:
            refuse_reserved_username(username)
        return username


class DeleteAccountForm(FocusFirstError, ThrottledPasswordCheck, forms.Form):
    """Asks for the password again: erasure cannot be undone, so a left-open session is not
    enough to trigger it."""

    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, *args, user, request: HttpRequest | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.request = request

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]

        def check() -> str:
            if not self.user.check_password(password):
                raise ValidationError(
                    "That is not your password. Nothing was deleted.", code="wrong"
                )
            return password

        return self.throttled_check(self.user.get_username(), check)


def nearest_names_hint(names: list[str]) -> str:
    """' (did you mean “a” or “b”?)' for a person's own names near the one typed, '' for none: the
    page's wording (memories.errors.did_you_mean is the tools')."""
    return f" (did you mean {' or '.join(f'“{name}”' for name in names)}?)" if names else ""


class _FilterTextField(forms.CharField):
    """A text filter of My memories, refused (named, and not applied) when the database could not
    store it: the site's guard against NUL and lone surrogates (accounts.middleware) leaves these
    fields to this form, so that such a filter is refused as any other one is, not the page."""

    def __init__(self, *, what: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.what = what
        # Replaced by the check below, which names the field and also refuses lone surrogates.
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(validator, ProhibitNullCharactersValidator)
        ]

    def validate(self, value: str) -> None:
        super().validate(value)
        if problem := bounds.unstorable_text(value):
            raise ValidationError(f"{self.what} {problem}; it was not applied.", code="unstorable")


class _NameField(_FilterTextField):
    """A project or thread name as the tools read one (bounds.trimmed): pasted with an invisible
    mark at an end, or typed decomposed, it is still the name its memories carry."""

    def to_python(self, value: object) -> str:
        return bounds.trimmed(super().to_python(value))


def _name_filter(label: str, what: str, maximum: int) -> forms.CharField:
    return _NameField(
        label=label,
        what=what,
        required=False,
        max_length=maximum,
        error_messages={
            "max_length": f"{what} is at most {maximum} characters; it was not applied."
        },
    )


class MemoryFilterForm(CharactersNotCodeUnits, forms.Form):
    """My memories' filters, from the query string. A filter that is not valid is named with its
    limit and left out; the others still apply. A project or thread name is valid whether or not
    the account has it: the view applies it and says so (a mistyped name is no reason to list
    everything)."""

    SEARCH_MAX = 200

    q = _FilterTextField(
        what="Search text",
        label="Search text, topic or tag",
        required=False,
        max_length=SEARCH_MAX,
        error_messages={
            "max_length": f"Search text is limited to {SEARCH_MAX} characters; it was not applied."
        },
    )
    type = forms.ChoiceField(
        label="Type",
        required=False,
        choices=[("", "any"), *((value, value) for value in MemoryType.values)],
        error_messages={"invalid_choice": "Type must be one of the listed types; not applied."},
    )
    project = _name_filter("Project", "A project", bounds.PROJECT_MAX)
    thread = _name_filter("Thread", "A thread name", bounds.THREAD_NAME_MAX)
    state = forms.ChoiceField(
        label="Commitment state",
        required=False,
        choices=[("", "any"), *((value, value) for value in CommitmentStatus.values)],
        error_messages={
            "invalid_choice": "Commitment state must be one of the listed ones; not applied."
        },
    )
    show = forms.ChoiceField(
        required=False,
        choices=[("", "current"), ("all", "all")],
        error_messages={"invalid_choice": "Show is 'all' or nothing; not applied."},
    )

    def clean_q(self) -> str:
        """The search text, unless it has more words than the filter takes."""
        text = self.cleaned_data["q"]
        if (count := len(filter_words(text))) > bounds.FILTER_WORDS_MAX:
            raise ValidationError(
                f"Search text is limited to {bounds.FILTER_WORDS_MAX} words (it has {count}); "
                "it was not applied."
            )
        return text

    def applied(self) -> dict[str, str]:
        """The filters given and valid, by name (none blank)."""
        self.is_valid()
        return {name: value for name, value in self.cleaned_data.items() if value}

    def problems(self) -> list[str]:
        return [message for errors in self.errors.values() for message in errors]
