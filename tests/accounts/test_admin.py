"""Staff audit erasures in the admin; nobody edits memories or erasure records there."""

import re

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Group
from django.urls import reverse

from accounts.erasure import erase_account
from accounts.models import ErasureRecord, User
from tests.factories import (
    PASSWORD,
    AccessTokenFactory,
    ApplicationFactory,
    GrantFactory,
    MemoryFactory,
    ThreadFactory,
    UserFactory,
)


@pytest.fixture
def admin_client(client, db):
    superuser = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(superuser)
    return client


def test_erasure_records_are_listed_and_filterable(admin_client, tenant, staff_member):
    erase_account(user=tenant, requested_by_staff=staff_member)
    url = reverse("admin:accounts_erasurerecord_changelist")
    assert admin_client.get(url).status_code == 200
    assert str(tenant.pk) in admin_client.get(url, {"requested_by__exact": "staff"}).text
    assert "0 erasure records" in admin_client.get(url, {"requested_by__exact": "user"}).text


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_erasure_records_say_who_asked_in_the_list_and_on_the_record(
    admin_client, tenant, other_tenant, staff_member
):
    """Staff read who asked for each erasure: the account holder (their own delete-account
    page) or the staff member by name, never a bare "-" for the account holder's own request."""
    by_holder = erase_account(user=tenant).record
    by_staff = erase_account(user=other_tenant, requested_by_staff=staff_member).record
    listing = admin_client.get(reverse("admin:accounts_erasurerecord_changelist")).text
    rows = {
        _text(row).split()[0]: _text(row)
        for row in re.findall(r"<tr>\s*<th class=\"field-account_id\">.*?</tr>", listing, re.S)
    }
    assert "the account holder" in rows[str(tenant.pk)]
    assert f"staff member {staff_member.username}" in rows[str(other_tenant.pk)]
    assert " - " not in f" {rows[str(tenant.pk)]} "
    for record, who in ((by_holder, "the account holder"), (by_staff, staff_member.username)):
        page = _text(
            admin_client.get(reverse("admin:accounts_erasurerecord_change", args=[record.pk])).text
        )
        assert re.search(rf"Requested by: (staff member )?{who}", page)
        assert "Staff member: -" not in page


def test_erasure_records_are_read_only(admin_client, tenant):
    record = erase_account(user=tenant).record
    assert admin_client.get(reverse("admin:accounts_erasurerecord_add")).status_code == 403
    change = admin_client.post(
        reverse("admin:accounts_erasurerecord_change", args=[record.pk]), {"requested_by": "staff"}
    )
    assert change.status_code == 403 or "requested_by" not in change.text
    record.refresh_from_db()
    assert record.requested_by == "user"
    assert (
        admin_client.post(
            reverse("admin:accounts_erasurerecord_delete", args=[record.pk]), {"post": "yes"}
        ).status_code
        == 403
    )


def test_memories_are_read_only(admin_client, tenant):
    memory = MemoryFactory(owner=tenant, topic="private topic")
    erase_account(user=tenant)
    listing = admin_client.get(reverse("admin:memories_memory_changelist")).text
    assert str(memory.id) in listing and "private topic" not in listing
    assert admin_client.get(reverse("admin:memories_memory_add")).status_code == 403
    assert (
        admin_client.post(
            reverse("admin:memories_memory_delete", args=[memory.pk]), {"post": "yes"}
        ).status_code
        == 403
    )


def test_threads_are_listed_read_only(admin_client, tenant):
    from memories.models import Thread

    thread = Thread.objects.create(owner=tenant, name="acquisition plans")
    erase_account(user=tenant)
    listing = admin_client.get(reverse("admin:memories_thread_changelist")).text
    assert str(thread.id) in listing and "acquisition plans" not in listing
    assert admin_client.get(reverse("admin:memories_thread_add")).status_code == 403
    assert (
        admin_client.post(
            reverse("admin:memories_thread_delete", args=[thread.pk]), {"post": "yes"}
        ).status_code
        == 403
    )


def test_the_admin_refuses_a_username_reserved_for_erased_accounts(admin_client, tenant):
    """Erasure renames account N to erased-N: a live account holding that name would make the
    erasure fail."""
    reserved = f"Erased-{tenant.pk}"
    added = admin_client.post(
        reverse("admin:accounts_user_add"),
        {"username": reserved, "usable_password": "true",
         "password1": "Staff-chosen-pass-123", "password2": "Staff-chosen-pass-123"},
    )  # fmt: skip
    assert added.status_code == 200 and "may not start with" in added.text
    other = UserFactory()
    change_url = reverse("admin:accounts_user_change", args=[other.pk])
    form = {"username": reserved, "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    changed = admin_client.post(change_url, form)
    assert changed.status_code == 200 and "may not start with" in changed.text
    assert not type(tenant).objects.filter(username__iexact=reserved).exists()
    erase_account(user=tenant)
    tenant.refresh_from_db()
    assert tenant.username == f"erased-{tenant.pk}"


def _form_inputs(page: str) -> set[str]:
    return set(re.findall(r'<(?:input|select|textarea)[^>]*\bname="([^"]+)"', page)) - {
        "csrfmiddlewaretoken"
    }


def test_an_erased_account_is_shown_read_only_and_never_revived(admin_client, tenant):
    """Ticked active, renamed and given a password, an erased account was a live one again,
    holding the erased one's records: its page shows it, and nothing of it changes."""
    erase_account(user=tenant)
    change_url = reverse("admin:accounts_user_change", args=[tenant.pk])
    shown = admin_client.get(change_url)
    assert shown.status_code == 200 and f"erased-{tenant.pk}" in shown.text
    assert not {"username", "is_active", "password"} & _form_inputs(shown.text)
    revived = admin_client.post(
        change_url,
        {"username": "revived", "is_active": "on",
         "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"},
    )  # fmt: skip
    assert revived.status_code == 403
    password_url = reverse("admin:auth_user_password_change", args=[tenant.pk])
    assert admin_client.get(password_url).status_code == 403
    new_password = "Staff-chosen-pass-123"
    given = admin_client.post(
        password_url,
        {"usable_password": "true", "set_usable_password": "true",
         "password1": new_password, "password2": new_password},
    )  # fmt: skip
    assert given.status_code == 403
    tenant.refresh_from_db()
    assert tenant.username == f"erased-{tenant.pk}" and not tenant.is_active
    assert not tenant.has_usable_password()


def test_a_live_accounts_page_still_changes_it(admin_client, tenant):
    form = {"username": "renamed-by-staff", "is_active": "on",
            "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}  # fmt: skip
    response = admin_client.post(reverse("admin:accounts_user_change", args=[tenant.pk]), form)
    assert response.status_code == 302, response.text[:2000]
    tenant.refresh_from_db()
    assert tenant.username == "renamed-by-staff"


def test_an_erasure_record_names_the_account_as_erasure_left_it(admin_client, tenant):
    """The record is the audit: a later change of the account's row (a rename from before
    erased accounts were read only) does not rewrite what it says."""
    record = erase_account(user=tenant).record
    type(tenant).objects.filter(pk=tenant.pk).update(username="renamed-after-erasure")
    page = _text(
        admin_client.get(reverse("admin:accounts_erasurerecord_change", args=[record.pk])).text
    )
    assert f"Account: erased-{tenant.pk} (#{tenant.pk})" in page
    assert "renamed-after-erasure" not in page


# --- the address bar takes only the filters a list offers ---------------------------------------


@pytest.mark.parametrize(
    ("model", "make", "lookup"),
    [
        ("memories_memory", lambda t: MemoryFactory(owner=t, content="PIN is 4711"),
         {"content__icontains": "PIN is 4711"}),
        ("memories_memory", lambda t: MemoryFactory(owner=t, topic="Salary"),
         {"topic__startswith": "Sal"}),
        ("memories_thread", lambda t: ThreadFactory(owner=t, name="Divorce"),
         {"name__icontains": "divorce"}),
        ("oauth2_provider_grant", lambda t: GrantFactory(user=t), {"code__startswith": "a"}),
        ("oauth2_provider_application", lambda t: ApplicationFactory(),
         {"client_secret__startswith": "pbkdf2"}),
        ("oauth2_provider_accesstoken", lambda t: AccessTokenFactory(user=t),
         {"token_checksum__startswith": "0"}),
        # A list filter of its own (the tokens' kind) takes its parameter as it is, nothing more.
        ("oauth2_provider_accesstoken", lambda t: AccessTokenFactory(user=t),
         {"kind__exact": "user"}),
        # A malformed lookup, which the database would fail on, is refused the same way.
        ("memories_memory", lambda t: MemoryFactory(owner=t), {"content__regex": "("}),
        ("memories_memory", lambda t: MemoryFactory(owner=t),
         {"recorded_at__year": "99999999999"}),
        ("accounts_user", lambda t: t, {"username__regex": "("}),
    ],
)  # fmt: skip
def test_a_list_refuses_a_lookup_it_does_not_offer(admin_client, tenant, model, make, lookup):
    """Django lets any column lookup through the address bar: `?content__icontains=…` would
    answer yes or no to each guess at a tenant's text, or at a live authorization code."""
    make(tenant)
    url = reverse(f"admin:{model}_changelist")
    assert admin_client.get(url).status_code == 200
    refused = admin_client.get(url, lookup)
    assert refused.status_code == 400
    assert f"this list cannot be filtered by “{next(iter(lookup))}”" in refused.text


@pytest.mark.parametrize(
    ("model", "lookup"),
    [
        # The erasure records' date drill-down adds a year or a day to the one asked for.
        ("accounts_erasurerecord", {"erased_at__year": "9999"}),
        ("accounts_erasurerecord", {"erased_at__year": "9999", "erased_at__month": "12"}),
        ("accounts_erasurerecord",
         {"erased_at__year": "9999", "erased_at__month": "12", "erased_at__day": "31"}),
        ("accounts_erasurerecord", {"erased_at__year": "2026", "erased_at__month": "13"}),
        ("accounts_user", {"erased_at__year": "0"}),
        ("accounts_user", {"erased_at__year": "10000"}),
        ("accounts_user", {"erased_at__year": "99999999999"}),
        ("accounts_user", {"erased_at__year": "twenty"}),
        ("memories_memory", {"valid_to__year": "0"}),
        ("memories_memory", {"valid_to__year": "10000"}),
    ],
)  # fmt: skip
def test_an_offered_date_filter_refuses_a_date_part_no_date_has(
    admin_client, tenant, model, lookup
):
    """A 400, not a server error: the database, or the drill-down's arithmetic, would fail on
    them."""
    erase_account(user=UserFactory())
    url = reverse(f"admin:{model}_changelist")
    refused = admin_client.get(url, lookup)
    assert refused.status_code == 400
    assert re.search(r"“\w+__(year|month|day)” must be a whole number from 1 to", refused.text)
    assert admin_client.get(url, {next(iter(lookup)): "2026"}).status_code == 200


@pytest.mark.parametrize(
    ("model", "lookup", "reason"),
    [
        ("accounts_user", {"is_active__exact": "maybe"},
         "“maybe” value must be either True or False."),
        ("accounts_erasurerecord", {"erased_at__gte": "2026-13-45"},
         "“2026-13-45” value has the correct format (YYYY-MM-DD) but it is an invalid date."),
        ("memories_memory", {"owner__id__exact": "abc"},
         "Field &#x27;id&#x27; expected a number but got &#x27;abc&#x27;."),
        ("memories_memory", {"valid_to__isempty": "2"}, "it is not one the filter takes"),
    ],
)  # fmt: skip
def test_an_offered_filter_given_a_value_it_cannot_apply_is_refused_naming_the_value(
    admin_client, tenant, model, lookup, reason
):
    """Django answered with the whole, unfiltered list (a redirect to `?e=1`) and no word: a
    mistyped filter read as a filter that matched every row."""
    MemoryFactory(owner=tenant)
    erase_account(user=UserFactory())
    refused = admin_client.get(reverse(f"admin:{model}_changelist"), lookup)
    assert refused.status_code == 400
    assert f"a filter&#x27;s value cannot be applied: {reason}" in refused.text


def a_row_of(model: str, tenant):
    """A row of the admin list `model` (the account `tenant` for the users' list)."""
    return {
        "accounts_user": lambda: tenant,
        "oauth2_provider_application": ApplicationFactory,
        "auth_group": lambda: Group.objects.create(name="support"),
    }[model]()


@pytest.mark.parametrize(
    ("model", "action"),
    [
        ("accounts_user", "erase_accounts"),
        ("oauth2_provider_application", "delete_selected"),
        ("auth_group", "delete_selected"),
    ],
)
def test_a_bulk_action_on_a_selection_that_is_no_id_changes_nothing_and_says_so(
    admin_client, tenant, model, action
):
    """A stale or hand-edited list form: Django's lookup of the selection was a server error."""
    row = a_row_of(model, tenant)
    url = reverse(f"admin:{model}_changelist")
    selection = {"action": action, ACTION_CHECKBOX_NAME: [row.pk, "abc"], "post": "yes"}
    response = admin_client.post(url, selection, follow=True)
    assert response.status_code == 200
    assert "“abc” is not the id of a row in this list; nothing was done." in response.text
    assert type(row).objects.filter(pk=row.pk).exists()


@pytest.mark.parametrize(
    ("model", "action"),
    [
        ("accounts_user", "erase_accounts"),
        ("oauth2_provider_application", "delete_selected"),
        ("auth_group", "delete_selected"),
    ],
)
def test_a_bulk_action_on_an_id_of_no_row_changes_nothing_and_says_so(
    admin_client, tenant, model, action
):
    """An id no row has (one deleted since the list was shown, one typed in): Django acted on
    the others, or on none, without a word."""
    row = a_row_of(model, tenant)
    url = reverse(f"admin:{model}_changelist")
    confirmed = {"action": action, "post": "yes", "confirm": "yes"}
    for selection, said in (
        (["999999"], "“999999” is not the id of a row in this list; nothing was done."),
        ([row.pk, "999999", "2" * 30], "“999999”, “" + "2" * 30 + "” are not ids of rows"),
    ):
        response = admin_client.post(
            url, {**confirmed, ACTION_CHECKBOX_NAME: selection}, follow=True
        )
        assert response.status_code == 200
        assert said in response.text
    assert type(row).objects.filter(pk=row.pk).exists()
    if model == "accounts_user":
        tenant.refresh_from_db()
        assert tenant.erased_at is None and not ErasureRecord.objects.exists()


def test_a_list_keeps_the_filters_it_offers(admin_client, tenant):
    archived = MemoryFactory(owner=tenant, status="archived")
    url = reverse("admin:memories_memory_changelist")
    offered = [
        {"status__exact": "archived"},
        {"owner__id__exact": tenant.pk},
        {"valid_to__isempty": "1"},
        {"memory_type__exact": archived.memory_type},
    ]
    for lookup in offered:
        response = admin_client.get(url, lookup)
        assert response.status_code == 200 and str(archived.pk) in response.text, lookup


def test_an_oauth_application_offers_no_page_on_the_site_and_its_shortcut_is_a_404(admin_client):
    from django.contrib.contenttypes.models import ContentType

    application = ApplicationFactory()
    change = admin_client.get(
        reverse("admin:oauth2_provider_application_change", args=[application.pk])
    )
    assert change.status_code == 200 and "View on site" not in change.text
    content_type = ContentType.objects.get_for_model(application)
    shortcut = reverse("admin:view_on_site", args=[content_type.pk, application.pk])
    assert admin_client.get(shortcut).status_code == 404


def test_the_admins_own_password_change_is_throttled_on_the_log_in_budget(db, client, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 5
    staff = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(staff)

    def change(old: str):
        new = "Brand-new-pass-98765"
        return client.post(
            reverse("admin:password_change"),
            {"old_password": old, "new_password1": new, "new_password2": new},
        )

    for _ in range(5):
        assert change("wrong-guess").status_code == 200
    refused = change(PASSWORD)
    assert refused.status_code == 429 and refused["Retry-After"]
    staff.refresh_from_db()
    assert staff.check_password(PASSWORD)
    client.logout()
    login = client.post(reverse("admin:login"), {"username": staff.username, "password": PASSWORD})
    assert login.status_code == 429  # one budget with the log-in


def test_an_account_is_never_deleted_from_the_admin_only_erased(admin_client, tenant):
    """Django's delete would drop an account of no memories without an erasure record (and
    refuse one with memories by a permission no one lacks): the user list offers Erase alone."""
    listing = admin_client.get(reverse("admin:accounts_user_changelist"))
    assert "erase_accounts" in listing.text and "delete_selected" not in listing.text
    change = admin_client.get(reverse("admin:accounts_user_change", args=[tenant.pk]))
    assert reverse("admin:accounts_user_delete", args=[tenant.pk]) not in change.text
    posted = admin_client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "delete_selected", ACTION_CHECKBOX_NAME: [tenant.pk], "post": "yes"},
    )
    assert posted.status_code in (200, 302)
    deleting = admin_client.post(reverse("admin:accounts_user_delete", args=[tenant.pk]))
    assert deleting.status_code == 403
    assert User.objects.filter(pk=tenant.pk).exists()
