"""Deleting my account from the account pages runs the erasure service, once, on my password."""

from django.urls import reverse
from oauth2_provider.models import get_access_token_model

from accounts.models import ErasureRecord
from memories.models import ERASED, Memory
from tests.accounts.test_pages_auth import autofocused
from tests.factories import PASSWORD, AccessTokenFactory, MemoryFactory


def test_the_page_explains_what_happens(client, tenant):
    client.force_login(tenant)
    page = client.get(reverse("accounts:delete_account")).text
    assert "<code>[erased]</code>" in page
    # All the text erasure overwrites, so none of it is thought to stay: scope and thread names
    # too.
    assert "(content, topic, tags, scope and project) and the name of every thread" in page
    assert "Every connected app is disconnected" in page
    assert "There is no undo" in page
    assert 'type="password"' in page


def test_wrong_password_deletes_nothing(client, tenant):
    memory = MemoryFactory(owner=tenant, content="keep me")
    client.force_login(tenant)
    response = client.post(reverse("accounts:delete_account"), {"password": "nope"})
    assert response.status_code == 200
    assert "That is not your password. Nothing was deleted." in response.text
    # Back at the field to type it again, not at the top of the page above the warnings.
    assert autofocused(response.text) == ["password"]
    memory.refresh_from_db()
    tenant.refresh_from_db()
    assert memory.content == "keep me" and tenant.is_active
    assert not ErasureRecord.objects.exists()


def test_a_post_without_the_password_field_says_it_is_required(client, tenant):
    client.force_login(tenant)
    response = client.post(reverse("accounts:delete_account"), {})
    assert response.status_code == 200 and "This field is required." in response.text
    tenant.refresh_from_db()
    assert tenant.is_active and not ErasureRecord.objects.exists()


def test_right_password_erases_logs_out_and_confirms(client, tenant, other_tenant):
    MemoryFactory(owner=tenant, content="private words")
    theirs = MemoryFactory(owner=other_tenant, content="someone else's")
    token = AccessTokenFactory(user=tenant)
    client.force_login(tenant)

    response = client.post(reverse("accounts:delete_account"), {"password": PASSWORD})

    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:account_deleted")
    assert "_auth_user_id" not in client.session
    confirmation = client.get(response["Location"]).text
    assert "Your account is deleted" in confirmation
    # Shown once: a reload, or the page's address opened later, is the log-in page.
    again = client.get(response["Location"])
    assert again.status_code == 302 and again["Location"] == reverse("accounts:login")
    assert set(Memory.objects.filter(owner=tenant).values_list("content", flat=True)) == {ERASED}
    assert not get_access_token_model().objects.filter(pk=token.pk).exists()
    record = ErasureRecord.objects.get(account=tenant)
    assert record.requested_by == "user" and record.staff_member is None
    theirs.refresh_from_db()
    assert theirs.content == "someone else's"
    # The old password no longer logs in.
    login = client.post(
        reverse("accounts:login"), {"username": tenant.username, "password": PASSWORD}
    )
    assert login.status_code == 200


def test_delete_needs_a_login(client, db):
    response = client.post(reverse("accounts:delete_account"), {"password": PASSWORD})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not ErasureRecord.objects.exists()


def test_the_password_re_check_is_throttled(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 5
    MemoryFactory(owner=tenant, content="keep me")
    client.force_login(tenant)
    for _ in range(5):
        response = client.post(reverse("accounts:delete_account"), {"password": "nope"})
        assert response.status_code == 200
    response = client.post(reverse("accounts:delete_account"), {"password": PASSWORD})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "Too many failed password attempts" in response.text
    tenant.refresh_from_db()
    assert tenant.erased_at is None and tenant.is_active
    assert not ErasureRecord.objects.exists()


def test_the_deleted_page_does_not_tell_someone_logged_in_their_account_is_gone(client, tenant):
    """Opened from a bookmark or the history while logged in, it would say the account is
    deleted and the visitor logged out, neither of which is so."""
    client.force_login(tenant)
    response = client.get(reverse("accounts:account_deleted"))
    assert response.status_code == 302 and response["Location"] == reverse("accounts:account")


def test_the_deleted_page_tells_no_one_who_did_not_just_delete_an_account(client, tenant):
    """Someone who logged out the ordinary way, or any visitor, has no account deleted."""
    client.force_login(tenant)
    client.post(reverse("accounts:logout"))
    response = client.get(reverse("accounts:account_deleted"))
    assert response.status_code == 302 and response["Location"] == reverse("accounts:login")
    tenant.refresh_from_db()
    assert tenant.is_active
