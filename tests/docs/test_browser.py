"""The built site in a real browser: headless Chromium (Debian's package) driven by Playwright.

Every page loads without a console error or an uncaught exception, the search finds a
builder by name, the figures and the mathematics are displayed, and screenshots of the
home page and one family page are written to `build/screenshots/` for review.
"""

import functools
import http.server
import os
import shutil
import threading

import pytest

from tests.docs.blocks import ROOT

SCREENSHOTS = ROOT / "build" / "screenshots"


def chromium_path():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, ("Debian's chromium is not installed: apt-get install -y chromium (the README's test command "
                  "installs it; Playwright's own browser download is not used)")
    return path


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", site
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    # Chromium's sandbox needs an unprivileged user; as root (CI, containers) it must be off.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=args)
        yield browser
        browser.close()


def open_page(browser, url):
    """The page at `url` and the console errors and uncaught exceptions it raised while loading."""
    page = browser.new_page()
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    response = page.goto(url, wait_until="networkidle")
    assert response is not None and response.ok, f"{url}: {response and response.status}"
    return page, errors


# The tables wider than the text column whose container does not scroll: their last columns would
# be cut off. Material wraps tables in a box that scrolls sideways; this checks it does.
# `[cut off, wider than their box]`: a table's box is Material's scrolling wrapper, or its parent.
_WIDE_TABLES = """() => {
    const wide = Array.from(document.querySelectorAll("article table")).map((table) => {
        const box = table.closest(".md-typeset__scrollwrap") || table.parentElement;
        return [box, table.getBoundingClientRect().width > box.clientWidth + 1];
    }).filter(([box, wider]) => wider);
    const cut = wide.filter(([box]) => !["auto", "scroll"].includes(getComputedStyle(box).overflowX));
    return [cut.length, wide.length];
}"""


# About 55-60 s: every page of the built site (over 30) loaded in Chromium with its scripts,
# MathJax and fonts, one after another; one test, so that the browser starts once for them all.
def test_every_page_loads_without_console_errors_and_no_table_is_cut_off(served, browser):
    base, site = served
    pages = sorted(path.relative_to(site).parent.as_posix() for path in site.rglob("index.html"))
    assert len(pages) > 30
    failures, cut_off, scrolling = {}, {}, 0
    for path in pages:
        url = base + ("" if path == "." else path + "/")
        page, errors = open_page(browser, url)
        if errors:
            failures[url] = errors
        cut, wide = page.evaluate(_WIDE_TABLES)
        if cut:
            cut_off[url] = cut
        scrolling += wide
        page.close()
    assert not failures, failures
    assert not cut_off, cut_off
    assert scrolling > 0  # the checkpoint and benchmark tables are wider than the column: the check saw them


def test_search_finds_a_builder_by_name(served, browser):
    base, _ = served
    page, errors = open_page(browser, base)
    page.keyboard.press("/")  # Material's shortcut: opens and focuses the search box
    # Typed key by key: the search listens to keyboard events, which fill() does not send.
    page.locator("input.md-search__input").press_sequentially("Swin_T", delay=50)
    # The results render as the index answers; wait for the builder's entry among them.
    page.locator(".md-search-result__item", has_text="Swin_T").first.wait_for(timeout=20000)
    assert "matching" in page.locator(".md-search-result__meta").inner_text()
    assert not errors, errors
    page.close()


def test_figures_and_mathematics_are_displayed(served, browser):
    base, _ = served
    page, errors = open_page(browser, base + "experiments/")
    images = page.locator("article img")
    assert images.count() >= 5
    for index in range(images.count()):
        image = images.nth(index)
        image.scroll_into_view_if_needed()
        width = image.evaluate("(element) => element.complete ? element.naturalWidth : 0")
        assert width > 100, image.get_attribute("src")
    page.close()
    page, errors = open_page(browser, base + "models/vit/")
    formula = page.locator("article math").first
    box = formula.bounding_box()
    assert box and box["width"] > 20 and box["height"] > 5, box
    assert not errors, errors
    page.close()


def test_screenshots_for_review(served, browser):
    base, _ = served
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name, path in (("home", ""), ("family_vit", "models/vit/")):
        page, _ = open_page(browser, base + path)
        target = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(target), full_page=False)
        assert target.stat().st_size > 10_000
        page.close()
