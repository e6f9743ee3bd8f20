"""Connected apps as a screen reader or voice-control user meets them: each app's controls name
the app, and a button's spoken name starts with the words it shows."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.factories import PASSWORD, ApplicationFactory, RefreshTokenFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.live]


def test_each_apps_revoke_controls_name_that_app(page, daphne_server):
    tenant = UserFactory(username="noor")
    for name in ("VS Code", "Cursor"):
        RefreshTokenFactory(user=tenant, application=ApplicationFactory(name=name))
    page.goto(daphne_server("/login/"))
    page.get_by_label("Username").fill("noor")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(daphne_server("/apps/"))

    # Tabbing through the page, a screen reader said "Revoke…" once per app, the same each
    # time: which app a disclosure belongs to was only in the layout around it. Chromium's own
    # accessibility tree says what a screen reader is given.
    tree = page.context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
    spoken = sorted(
        node["name"]["value"]
        for node in tree
        if node.get("role", {}).get("value") == "DisclosureTriangle"
    )
    # With when it was connected: one app registered twice is two cards of one name.
    connected = re.compile(r", connected \d{1,2} \w{3} \d{4}, \d\d:\d\d UTC")
    assert [connected.sub("", name) for name in spoken] == ["Revoke Cursor…", "Revoke VS Code…"]
    for name in ("VS Code", "Cursor"):
        card = page.locator("li.card", has=page.get_by_role("heading", name=name))
        card.get_by_text("Revoke…").click()
        # Spoken as it reads ("Yes, revoke …"), so "click Yes, revoke" finds it by voice.
        button = re.compile(rf"^Yes, revoke {re.escape(name)}{connected.pattern}$")
        expect(page.get_by_role("button", name=button)).to_be_visible()
