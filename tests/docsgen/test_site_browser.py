"""The built site, read as a reader's browser renders it: `mkdocs build --strict` into a
temporary folder, served on 127.0.0.1, pages loaded in headless Chromium (tests/docsgen/
browser.py). The nav, a generated table, a benchmark plot and a problem's anchor must
render. Screenshots go to $STRICTCALL_DOCS_SCREENSHOTS when set (to look at), else the
test's temporary folder."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import in_ci
from tests.docsgen.browser import Page, chromium, chromium_path

pytestmark = [pytest.mark.slow, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[2]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the base names it `format`
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built from this checkout, served; its base URL."""
    if chromium_path() is None:
        what = "no chromium on PATH: `make setup-browser` installs Debian's package"
        if in_ci():
            pytest.fail(f"{what}. CI=true: the browser tier cannot pass without it")
        pytest.skip(what)
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                   cwd=ROOT, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with chromium() as tab:
        yield tab


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("STRICTCALL_DOCS_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_home_page_has_the_whole_nav(site: str, page: Page, shots: Path) -> None:
    page.open(site)
    sections = page.evaluate("[...document.querySelectorAll('.md-nav--primary "
                             ".md-nav__item--section > .md-nav__link')]"
                             ".map(e => e.textContent.trim())")
    for name in ("APIs", "Models", "Operations", "Benchmarks", "Reference"):
        assert any(name in s for s in sections), (name, sections)
    links = page.evaluate("document.querySelectorAll('.md-nav--primary a.md-nav__link').length")
    assert links >= 25
    assert page.evaluate("document.querySelector('h1').firstChild.textContent") == "StrictCall"


def test_the_flags_page_is_a_table_of_every_setting(site: str, page: Page) -> None:
    page.open(site + "reference/flags/")
    rows = page.evaluate("[...document.querySelectorAll('article table tbody tr')]"
                         ".map(r => r.cells[0].textContent)")
    assert "--max-tools" in rows and "--api-keys" in rows and len(rows) > 60
    shown = page.evaluate("(() => { const t = document.querySelector('article table');"
                          " const r = t.getBoundingClientRect();"
                          " return r.width > 300 && r.height > 100; })()")
    assert shown


def test_a_benchmark_page_shows_its_plot_and_table(site: str, page: Page, shots: Path) -> None:
    page.open(site + "benchmarks/tool-selection/")
    plot = page.evaluate("(() => { const i = document.querySelector('article img[src$=\".png\"]');"
                         " return i && [i.complete, i.naturalWidth, i.naturalHeight]; })()")
    assert plot and plot[0] and plot[1] > 300 and plot[2] > 200, plot
    assert page.evaluate("document.querySelectorAll('article table tbody tr').length") >= 3
    assert "strictcall-bench tool-selection" in page.evaluate("document.body.innerText")
    page.evaluate("document.querySelector('article img').scrollIntoView({block: 'center'})")
    page.screenshot(shots / "benchmark-tool-selection.png")


def test_a_problem_type_uri_lands_on_its_explanation(site: str, page: Page,
                                                     shots: Path) -> None:
    page.open(site + "reference/problems/#contract-violation")
    heading = page.evaluate("document.getElementById('contract-violation')?.textContent")
    assert heading and heading.startswith("contract-violation")
    assert page.evaluate("document.getElementById('contract-violation')"
                         ".getBoundingClientRect().top") < 400  # scrolled to it
    page.screenshot(shots / "problem-contract-violation.png")
