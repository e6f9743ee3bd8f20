"""The browser tests run after every other test of the session: pytest-playwright's Playwright
keeps an asyncio loop running in the main thread from the first of them to the end, and a test
after them that runs a loop of its own, or calls the ORM, fails for that alone (conftest.py)."""

from pathlib import Path

BROWSER_TESTS = Path(__file__).parent


def test_no_other_test_is_collected_after_the_first_browser_test(request):
    in_browser = [Path(item.path).is_relative_to(BROWSER_TESTS) for item in request.session.items]
    first = in_browser.index(True)
    after = [
        item.nodeid
        for item, here in zip(request.session.items[first:], in_browser[first:], strict=True)
        if not here
    ]
    assert after == []
