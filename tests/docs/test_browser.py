"""The built site in a real browser: headless Chromium (Debian's package) driven by Playwright.

In a laptop's window (1280 x 800), every page loads without a console error or an uncaught
exception and fits: no table wider than its box, no code block or signature that scrolls
sideways, no copy button over code, every docstring section parsed (no "Args:" left as
text). The search finds a builder by name, the figures are displayed, the formulas' brackets
stretch and their accents sit over their letters, and screenshots of the home page and one
family page are written to `build/screenshots/` for review.
"""

import functools
import http.server
import os
import shutil
import threading

import pytest

from tests.docs.blocks import ROOT

SCREENSHOTS = ROOT / "build" / "screenshots"
WINDOW = {"width": 1280, "height": 800}


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
    page = browser.new_page(viewport=WINDOW)
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    response = page.goto(url, wait_until="networkidle")
    assert response is not None and response.ok, f"{url}: {response and response.status}"
    return page, errors


# What does not fit its box on a page, and how much was looked at (so that a check that saw
# nothing cannot pass). A copy button lies over code when its left edge is left of the code's
# text area (the code box less its right padding, the button's lane: docs/assets/extra.css).
_FIT = """() => {
    const article = document.querySelector("article");
    const tables = Array.from(article.querySelectorAll("table"));
    const wideTables = tables.filter((table) => {
        const box = table.closest(".md-typeset__scrollwrap") || table.parentElement;
        return table.getBoundingClientRect().width > box.clientWidth + 1;
    }).map((table) => table.rows[0].textContent.trim().slice(0, 60));
    const codes = Array.from(article.querySelectorAll("pre > code"));
    const scrolling = codes.filter((code) => code.scrollWidth > code.clientWidth + 1)
        .map((code) => code.textContent.slice(0, 60));
    // Material's copy button, in the block's top-right corner.
    const buttons = Array.from(article.querySelectorAll("pre > .md-code__nav"));
    const covering = buttons.filter((button) => {
        const code = button.parentElement.querySelector("code");
        const box = code.getBoundingClientRect();
        const textRight = box.right - parseFloat(getComputedStyle(code).paddingRight);
        return button.getBoundingClientRect().left < textRight - 1;
    }).map((button) => button.parentElement.textContent.slice(0, 60));
    const raw = Array.from(article.querySelectorAll(".doc-contents p")).filter((p) =>
        !p.querySelector(".doc-section-title") && /^(Args|Returns|Raises|Yields|Attributes):/.test(p.textContent.trim()))
        .map((p) => p.textContent.slice(0, 60));
    const parsed = article.querySelectorAll(".doc-section-title").length;
    return {wideTables, scrolling, covering, raw,
            counts: [tables.length, codes.length, buttons.length, parsed]};
}"""


# About 55-60 s: every page of the built site (over 30) loaded in Chromium with its scripts,
# fonts and formulas, one after another; one test, so that the browser starts once for them all.
def test_every_page_loads_without_errors_and_fits_a_laptop_window(served, browser):
    base, site = served
    pages = sorted(path.relative_to(site).parent.as_posix() for path in site.rglob("index.html"))
    assert len(pages) > 30
    failures, misfits, seen = {}, {}, [0, 0, 0, 0]
    for path in pages:
        url = base + ("" if path == "." else path + "/")
        page, errors = open_page(browser, url)
        if errors:
            failures[url] = errors
        fit = page.evaluate(_FIT)
        wrong = {key: fit[key] for key in ("wideTables", "scrolling", "covering", "raw") if fit[key]}
        if wrong:
            misfits[url] = wrong
        seen = [total + count for total, count in zip(seen, fit["counts"])]
        page.close()
    assert not failures, failures
    assert not misfits, misfits
    # Tables, code blocks, copy buttons and parsed docstring sections were there to check.
    assert min(seen) > 20, seen


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


_MATH = """() => {
    const height = (element) => element.getBoundingClientRect().height;
    // Brackets around a fraction (Swin's attention, Eq. 4): as tall as what they enclose.
    const fences = Array.from(document.querySelectorAll("article mrow:has(> mfrac) > mo[fence='true']"))
        .map((mo) => [height(mo), height(mo.parentElement.querySelector(":scope > mfrac"))]);
    // A hat (Swin's bias table, B with a hat): wider than tall, above its letter.
    const hats = Array.from(document.querySelectorAll("article mover[accent='true']")).map((mover) => {
        const [base, accent] = mover.children;
        const a = accent.getBoundingClientRect(), b = base.getBoundingClientRect();
        return [a.width, a.height, a.bottom - b.top];
    });
    return {fences, hats};
}"""


def test_brackets_stretch_and_accents_sit_over_their_letters(served, browser):
    # MathML drawn with a math font (docs/assets/extra.css): without one, Chromium draws `\hat`
    # as a small caret beside the letter and `\left( \right)` at the text's height.
    base, _ = served
    page, errors = open_page(browser, base + "models/swin/")
    measured = page.evaluate(_MATH)
    page.close()
    assert measured["fences"] and measured["hats"], measured
    for bracket, fraction in measured["fences"]:
        assert bracket >= 0.9 * fraction, measured["fences"]
    for width, height, overlap in measured["hats"]:
        assert width > 1.5 * height and overlap <= 2, measured["hats"]
    assert not errors, errors


def test_screenshots_for_review(served, browser):
    base, _ = served
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for name, path in (("home", ""), ("family_vit", "models/vit/")):
        page, _ = open_page(browser, base + path)
        target = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(target), full_page=False)
        assert target.stat().st_size > 10_000
        page.close()
