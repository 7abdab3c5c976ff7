"""What a written answer of thousands of formulas costs the Formgrader's MathJax in Chromium, with the course's bound
on the formulas a cell gives MathJax and without it.

    python bench/formgrader_formulas.py [--formulas 15000] [--repeat 2]

The grading page is rendered in-process as the Formgrader renders it (nbgrader's formgrade template, the course's
filters from nbgrader_config.py) for one markdown answer of ``--formulas`` ``$x$`` (15,000 is the most one cell's
64 KiB of HTML holds); "unbounded" is the same page with ``safe_html``'s bounds raised past the count.  The page is
opened from a file in headless Chromium with the server's MathJax 2.7 (jupyter_server_mathjax's files, the
page's own configuration; the page's Content-Security-Policy, which names the server, left out), and timed from
the request until MathJax's queue is empty.  nbgrader's own scripts (served by the Formgrader) do not load from a
file: the page's MathJax is all that runs.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlhf_course.grading.pages import safe_html  # noqa: E402

RESOURCES = {"assignment_id": "a", "notebook_id": "n", "submission_id": "s", "index": 0, "total": 1,
             "base_url": "", "student": "s", "last_name": "", "first_name": "", "notebook_path": "n.ipynb"}
BOUNDS = (safe_html.MAX_FORMULAS_PER_CELL, safe_html.MAX_FORMULAS_PER_PAGE)


CHROMIUM = "/usr/bin/chromium"  # as the browser tests (a script never imports the tests)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

def grading_page(formulas: int, bounded: bool) -> str:
    import jupyter_server_mathjax
    import nbformat
    from nbconvert import HTMLExporter

    from rlhf_course.course.settings import course_config
    safe_html.MAX_FORMULAS_PER_CELL, safe_html.MAX_FORMULAS_PER_PAGE = BOUNDS if bounded else (10**9, 10**9)
    config = course_config(REPO)
    config.HTMLExporter.template_name = "formgrade"
    answer = nbformat.v4.new_markdown_cell("My answer: " + " ".join(["$x$"] * formulas))
    page, _ = HTMLExporter(config=config).from_notebook_node(nbformat.v4.new_notebook(cells=[answer]),
                                                             resources=dict(RESOURCES))
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static" / "MathJax.js"
    page = page.replace('server + "/static/jupyter_server_mathjax/MathJax.js', f'"{mathjax.as_uri()}')
    return re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formulas", type=int, default=15_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="formgrader-formulas-"))
    pages = {}
    for bounded in (True, False):
        pages[bounded] = folder / f"{'bounded' if bounded else 'unbounded'}.html"
        pages[bounded].write_text(grading_page(args.formulas, bounded))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=[*CHROMIUM_FLAGS, "--allow-file-access-from-files"])
        for _ in range(args.repeat):
            for bounded, path in pages.items():
                page = browser.new_context().new_page()
                started = time.monotonic()
                page.goto(path.as_uri())
                page.wait_for_function("window.MathJax && MathJax.Hub && MathJax.isReady", timeout=900_000)
                page.evaluate("() => new Promise(done => MathJax.Hub.Queue(done))")
                seconds = time.monotonic() - started
                typeset = page.evaluate("document.querySelectorAll('script[type^=\"math/tex\"]').length")
                print(f"{'bounded' if bounded else 'unbounded'}: {typeset} formulas given to MathJax, "
                      f"{seconds:.2f} s until it was done", flush=True)
                page.close()
        browser.close()


if __name__ == "__main__":
    main()
