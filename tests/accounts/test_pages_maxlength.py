"""Text boxes never stop a person short of what the server takes. HTML's maxlength counts UTF-16
code units, two for each emoji or other character outside the Basic Multilingual Plane; the
server counts characters. A box capped at the server's limit stopped such text at half of it."""

import re

import pytest
from django.urls import reverse

from tests.factories import UserFactory

ASTRAL = "🙂"  # one character, two UTF-16 code units


def _boxes_with_maxlength(html: str) -> dict[str, int]:
    boxes = {}
    for tag in re.findall(r"<input\b[^>]*>", html):
        maxlength = re.search(r'\bmaxlength="(\d+)"', tag)
        if maxlength:
            boxes[re.search(r'\bname="([^"]+)"', tag).group(1)] = int(maxlength.group(1))
    return boxes


def _form_of(response):
    """The page's form as the server validates it (the admin's sits in its adminform)."""
    context = response.context
    return context["adminform"].form if "adminform" in context else context["form"]


@pytest.fixture
def superuser(db):
    return UserFactory(is_staff=True, is_superuser=True)


@pytest.mark.parametrize(
    ("page", "who"),
    [
        ("accounts:signup", None),
        ("accounts:login", None),
        ("accounts:memories", "tenant"),
        ("accounts:password_change", "tenant"),
        ("accounts:delete_account", "tenant"),
        ("admin:login", None),
        ("admin:accounts_user_add", "superuser"),
        ("admin:accounts_user_change", "superuser"),
    ],
)
def test_every_box_takes_as_many_emoji_as_the_server_takes_characters(client, request, page, who):
    args = []
    if who:
        user = request.getfixturevalue(who)
        client.force_login(user)
        if page == "admin:accounts_user_change":
            args = [user.pk]
    response = client.get(reverse(page, args=args))
    assert response.status_code == 200
    form = _form_of(response)
    for name, maxlength in _boxes_with_maxlength(response.text).items():
        characters = form.fields[name].max_length
        # The browser must let the server's limit in emoji through, so that the server, not a
        # silent cut, answers a longer text.
        assert maxlength >= len((ASTRAL * characters).encode("utf-16-le")) // 2, (page, name)
