"""My memories with the keyboard alone: filters that survive paging, a mistyped thread named,
and the way back from a memory to the filtered page it was opened from (the browser's own
referrer, which a test client only imitates)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memories.services import record_memory
from memories.threads import add_thread_members, create_thread
from tests.factories import PASSWORD, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.live]


def test_filtering_paging_and_coming_back_with_the_keyboard(browser, daphne_server):
    tenant = UserFactory(username="lin")
    facts = [
        record_memory(
            owner=tenant,
            memory_type="fact",
            topic=f"atlas fact {number:02d}",
            content=f"Atlas fact number {number:02d}",
            project="atlas",
        )
        for number in range(25)
    ]
    record_memory(owner=tenant, memory_type="note", topic="n", content="A note", project="atlas")
    create_thread(owner=tenant, name="Release Plan")
    add_thread_members(owner=tenant, name="Release Plan", memory_ids=[facts[0].id])
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto(daphne_server("/login/"))
    # The log-in page puts the cursor in the username field; keys typed before it has are lost.
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.type("lin")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page).to_have_url(daphne_server("/memories/"))

    page.get_by_label("Thread").focus()
    page.keyboard.type("relase plan")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_have_text(
        "You have no thread named “relase plan” (did you mean “Release Plan”?)."
    )
    # Kept in its field, to correct.
    expect(page.get_by_label("Thread")).to_have_value("relase plan")

    page.get_by_label("Thread").fill("")
    page.get_by_label("Type").select_option("fact")
    page.get_by_label("Project").focus()
    page.keyboard.type("atlas")
    page.keyboard.press("Enter")
    expect(page.get_by_text("25 memories of type fact in project atlas")).to_be_visible()
    page.get_by_role("link", name="Older").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_text("Page 2 of 2")).to_be_visible()
    expect(page.get_by_text("25 memories of type fact in project atlas")).to_be_visible()
    listed = page.url

    page.get_by_role("link", name="atlas fact 00").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("atlas fact 00")
    back = page.get_by_role("link", name="← Back to the list")
    back.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(listed)
    assert re.search(r"type=fact", listed) and re.search(r"page=2", listed)


def test_the_search_box_takes_the_servers_limit_in_emoji_and_names_a_longer_search(
    browser, daphne_server
):
    """The server counts characters, a browser's maxlength UTF-16 code units: an emoji is one of
    the first and two of the second, so a box capped at the limit stopped emoji at half of it,
    and cut a longer text without a word."""
    UserFactory(username="mei")
    page = browser.new_page()
    page.goto(daphne_server("/login/"))
    page.get_by_label("Username").fill("mei")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(daphne_server("/memories/"))

    search = page.get_by_label("Search text, topic or tag")
    search.fill("")
    search.press_sequentially("🙂" * 200)
    search.press("Enter")
    # The box shows the search the server applied.
    expect(page.get_by_label("Search text, topic or tag")).to_have_value("🙂" * 200)
    expect(page.get_by_role("alert")).to_have_count(0)

    page.get_by_label("Search text, topic or tag").fill("")
    page.get_by_label("Search text, topic or tag").press_sequentially("x" * 201)
    page.get_by_label("Search text, topic or tag").press("Enter")
    expect(page.get_by_role("alert")).to_have_text(
        "Search text is limited to 200 characters; it was not applied."
    )


FILTER_FIELDS = ("memory-search", "memory-type", "memory-project", "memory-thread", "memory-state")


@pytest.mark.parametrize("width", [1280, 960])
def test_the_filter_row_lines_up_and_its_checkbox_is_easy_to_hit(
    browser, daphne_server, screenshots, width
):
    """On a desktop screen "Commitment state" wrapped onto two lines and pushed its label out of
    line with the others; the checkbox was the browser's tiny default beside a bold label."""
    UserFactory(username="ola")
    page = browser.new_context(viewport={"width": width, "height": 800}).new_page()
    page.goto(daphne_server("/login/"))
    page.get_by_label("Username").fill("ola")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(daphne_server("/memories/"))
    screenshots(page, f"memories-filter-row-{width}")

    labels = [page.locator(f'label[for="{field}"]').bounding_box() for field in FILTER_FIELDS]
    controls = [page.locator(f"#{field}").bounding_box() for field in FILTER_FIELDS]
    one_line = labels[0]["height"]
    assert all(label["height"] == one_line for label in labels), labels
    # Those on the first row share its top; each control sits right under its label.
    first_row = [label for label in labels if abs(label["y"] - labels[0]["y"]) < 1]
    assert len(first_row) >= 3, labels
    for label, control in zip(labels, controls, strict=True):
        assert 0 <= control["y"] - (label["y"] + label["height"]) <= 8, (label, control)

    checkbox = page.locator("#show-all").bounding_box()
    assert checkbox["width"] >= 20 and checkbox["height"] >= 20, checkbox
    weight = page.locator('label[for="show-all"]').evaluate("e => getComputedStyle(e).fontWeight")
    assert weight == "400"
