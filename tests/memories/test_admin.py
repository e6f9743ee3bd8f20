"""Staff never read a tenant's memories: no admin page shows memory content, topic, tags,
scope, project or a thread name (memories/admin.py), while accounts, erasure records and the
masked OAuth objects stay available to them."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from accounts.erasure import erase_account
from tests.factories import (
    AccessTokenFactory,
    GrantFactory,
    MemoryFactory,
    RefreshTokenFactory,
    ThreadMembershipFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

TENANT_TEXT = {
    "content": "zq-content of a private memory",
    "topic": "zq-topic-of-the-memory",
    "project": "zq-project-name",
    "scope": "zq-scope-value",
    "tag": "zq-tag-value",
    "thread": "zq-thread-name",
}


@pytest.fixture
def staff_client(client):
    staff = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(staff)
    return client


@pytest.fixture
def tenant_data(tenant):
    memory = MemoryFactory(
        owner=tenant,
        content=TENANT_TEXT["content"],
        topic=TENANT_TEXT["topic"],
        project=TENANT_TEXT["project"],
        scope=TENANT_TEXT["scope"],
        tags=[TENANT_TEXT["tag"]],
        memory_type="commitment",
        embedded=True,
    )
    ThreadMembershipFactory(memory=memory, thread__owner=tenant, thread__name=TENANT_TEXT["thread"])
    refresh = RefreshTokenFactory(user=tenant)
    GrantFactory(user=tenant, application=refresh.application)
    AccessTokenFactory(user=tenant)
    erase_account(user=UserFactory(), requested_by_staff=UserFactory(is_staff=True))
    return memory


def _admin_pages(client) -> dict[str, str]:
    """Every admin page a staff member can reach for the stored objects: the index, each app's
    index, and each registered model's list, and its add, change and history pages per row."""
    pages = {}

    def visit(url: str) -> None:
        response = client.get(url)
        assert response.status_code in (200, 403), (url, response.status_code)
        pages[url] = response.content.decode()

    visit(reverse("admin:index"))
    for model in admin.site._registry:
        opts = model._meta
        visit(reverse("admin:app_list", args=[opts.app_label]))
        visit(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        visit(reverse(f"admin:{opts.app_label}_{opts.model_name}_add"))
        for obj in model._default_manager.all()[:20]:
            for view in ("change", "history"):
                visit(reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=[obj.pk]))
    return pages


def test_no_admin_page_shows_any_text_a_tenant_stored(staff_client, tenant_data):
    pages = _admin_pages(staff_client)
    assert len(pages) > 20
    for url, page in pages.items():
        for field, text in TENANT_TEXT.items():
            assert text not in page, (url, field)
    # Staff still see that the memory exists, whose it is and in what state.
    memory_page = pages[reverse("admin:memories_memory_change", args=[tenant_data.pk])]
    assert str(tenant_data.id) in memory_page and tenant_data.owner.username in memory_page
    assert "Commitment" in memory_page
    # Nor its vector, which stands for its text.
    assert "embedding" not in memory_page.lower()


def test_staff_keep_accounts_erasure_records_and_oauth_objects(staff_client, tenant_data):
    pages = _admin_pages(staff_client)
    for name in (
        "accounts_user",
        "accounts_erasurerecord",
        "oauth2_provider_application",
        "oauth2_provider_accesstoken",
        "oauth2_provider_refreshtoken",
        "oauth2_provider_grant",
    ):
        page = pages[reverse(f"admin:{name}_changelist")]
        assert "0 results" not in page and "paginator" in page, name
    assert tenant_data.owner.username in pages[reverse("admin:accounts_user_changelist")]
