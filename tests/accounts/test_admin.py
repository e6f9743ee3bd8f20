"""Staff audit erasures in the admin; nobody edits memories or erasure records there."""

import pytest
from django.urls import reverse

from accounts.erasure import erase_account
from tests.factories import MemoryFactory, UserFactory


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


def test_an_erased_account_can_still_be_saved_in_the_admin(admin_client, tenant):
    erase_account(user=tenant)
    tenant.refresh_from_db()
    form = {"username": tenant.username, "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    response = admin_client.post(reverse("admin:accounts_user_change", args=[tenant.pk]), form)
    assert response.status_code == 302, response.text[:2000]
