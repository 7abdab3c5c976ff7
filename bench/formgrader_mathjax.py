"""What one Formgrader grading page costs Chromium, per MathJax 2 renderer: CPU seconds of the browser's processes
(the page's renderer, the browser, its GPU and network services) from the page's request until MathJax has typeset
it and the Formgrader has loaded its grades, and the server's CPU seconds meanwhile (it renders the page in a child
process).

One scratch course (this checkout's course files, a fresh release; an honest submission with written answers in
math), graded by the trusted grader (`make grade`'s command: root and bubblewrap), then `jupyter lab` on it as
`make lab-instructor` starts it.  The course's template (rlhf_course/grading/pages/templates/formgrade/mathjax.html.j2) picks the
renderer with ``menuSettings``; the bench opens the page with each renderer the server's MathJax
(jupyter_server_mathjax, MathJax 2.7) carries, and HTML-CSS also with MathJax's fast preview (nbconvert's default
configuration, the course's before NativeMML), in turn, ``--repeat`` times,
each in a new browser context (no cache, as a person opening the page the first time).  Chromium's CPU is read
from /proc (psutil) over the processes Playwright started; run it on a quiet machine or compare one run's figures.

    python bench/formgrader_mathjax.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from formgrader import CHROMIUM, TOKEN, Server, grade, load, new_course  # noqa: E402

from rlhf_course import ASSIGNMENT, NOTEBOOK  # noqa: E402
from rlhf_course.grading import examples
from rlhf_course.course import settings  # noqa: E402
from rlhf_course.course.settings import Course

WRITTEN = ("Clipping keeps $r_t$ inside $[1-\\epsilon, 1+\\epsilon]$ only where moving further would help:\n\n"
           "$$L^{\\mathrm{CLIP}} \\le L^{\\mathrm{IS}}$$")
TEMPLATE = Path("rlhf_course") / "grading" / "pages" / "templates" / "formgrade" / "mathjax.html.j2"
SETTINGS = re.compile(r"menuSettings: \{[^}]*\}")
# Output jax the server's combined configuration (TeX-AMS-MML_HTMLorMML-full) holds, and whether MathJax first shows
# a quick preview of each formula (its fast-preview extension, on unless configured off) before the final output.
VARIANTS = {"NativeMML": 'menuSettings: {renderer: "NativeMML", FastPreview: false}',
            "HTML-CSS": 'menuSettings: {renderer: "HTML-CSS", FastPreview: false}',
            "HTML-CSS + preview": 'menuSettings: {renderer: "HTML-CSS", FastPreview: true}',
            "PreviewHTML": 'menuSettings: {renderer: "PreviewHTML", FastPreview: false}'}
TYPESET = ("window.MathJax && MathJax.loaded === true && window.formgrader && formgrader.grades.loaded"
           " && formgrader.comments.loaded")


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds of the processes still alive."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()  # its own and its waited-for children's (the server's page renders)
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def tree(root: psutil.Process) -> list[psutil.Process]:
    return [root] + root.children(recursive=True)


def open_page(browser, driver: psutil.Process, server_process: psutil.Process, url: str) -> tuple[float, float, int]:
    """(Chromium CPU s, server CPU s, typeset formulas) for one page in a new context, from request to typeset."""
    context = browser.new_context(extra_http_headers={"Authorization": f"token {TOKEN}"},
                                  viewport={"width": 1400, "height": 1000})
    try:
        before_browser = {p.pid: p for p in tree(driver)}
        browser_start = cpu_seconds(list(before_browser.values()))
        server_start = cpu_seconds(tree(server_process))
        page = context.new_page()
        page.goto(url, timeout=180_000)
        page.wait_for_function(TYPESET, timeout=180_000)
        formulas = page.evaluate("MathJax.Hub.getAllJax().length")
        processes = {p.pid: p for p in tree(driver)}
        # a process that started during the page began at 0 s; one that was there is counted from its start figure
        browser_cpu = cpu_seconds(list(processes.values())) - browser_start
        browser_cpu += cpu_seconds([p for pid, p in before_browser.items() if pid not in processes])  # none expected
        server_cpu = cpu_seconds(tree(server_process)) - server_start
        return browser_cpu, server_cpu, formulas
    finally:
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="opens of the page per renderer, in turn")
    args = parser.parse_args()
    from rlhf_course.grading.sandbox.sandbox import sandbox_available
    problem = sandbox_available()
    if problem:
        raise SystemExit(f"trusted grading needs the sandbox (root, bubblewrap): {problem}")
    print(f"load average at the start: {load()}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-mathjax-"))
    course = scratch / "course"
    new_course(course)
    course_handle = Course.at(course)
    examples.write_submission(course_handle, "honest", {**examples.answers_for(course_handle, ()), "lab_question_1": WRITTEN})
    grade(course, 1)
    from nbgrader.api import Gradebook
    with Gradebook(settings.Course.at(course).db_url, "rlhf-course") as gradebook:
        submission = gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, "honest").id
    template = course / TEMPLATE
    shipped = SETTINGS.search(template.read_text()).group(0)
    server = Server(course, scratch / "server", None)
    figures: dict[str, list[tuple[float, float, int]]] = {v: [] for v in VARIANTS}
    from playwright.sync_api import sync_playwright
    try:
        server.get(f"formgrader/submissions/{submission}/")  # starts the pages' forkserver
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            driver = psutil.Process().children()[-1]  # Playwright's driver, Chromium's parent
            for _ in range(args.repeat):
                for variant, menu_settings in VARIANTS.items():
                    # the server reads the template each time it renders a page
                    template.write_text(SETTINGS.sub(menu_settings, template.read_text()))
                    figures[variant].append(open_page(browser, driver, psutil.Process(server.process.pid),
                                                       server.url(f"formgrader/submissions/{submission}/")))
                print(f"round done (load {load()})", flush=True)
            browser.close()
    finally:
        server.stop()
    print(f"\nOne Formgrader grading page (honest submission), {args.repeat} opens per renderer; the course ships "
          f"{shipped!r}; load average {load()} at the end")
    print(f"{'renderer':<20}{'Chromium CPU s (median / max)':>32}{'server CPU s (median)':>24}{'formulas':>10}")
    for renderer, opens in figures.items():
        browser_cpu = [b for b, _, _ in opens]
        print(f"{renderer:<20}{f'{statistics.median(browser_cpu):.2f} / {max(browser_cpu):.2f}':>32}"
              f"{statistics.median(s for _, s, _ in opens):>24.2f}{'/'.join(sorted({str(f) for *_, f in opens})):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
