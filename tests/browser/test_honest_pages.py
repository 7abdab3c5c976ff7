"""An honest student's pages as a person reads them, in both languages, in headless Chromium: the
instructor's Formgrader grading page and the student's feedback page of a graded submission (one
mistake, so the trusted grader's verdict lines say FAILED with their reason, and written answers with
math).  What the canonical copy and its sanitiser must not take from an honest student: the notebook's
math typeset, its code highlighted, its tables readable, Chinese in CJK glyphs, one grade control per
grade cell in that cell's own panel, and every verdict read whole: wrapped inside its box, never cut at
the right edge nor inside a word or number ("-1.34" / "8").

The Formgrader's page also renders its LaTeX with MathJax served by the Jupyter server itself and asks nothing of
any other host (the control: nbgrader's stock page asks a CDN), and, graded by the real sandbox (`make grade`), shows
the trusted verdict and its message under each failing test cell.  One graded course, one instructor's Jupyter
server and one page per submission for the file (each Formgrader page costs seconds of MathJax typesetting)."""
from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import batch, examples
from rlhf_course.course import settings
from rlhf_course.grading.sandbox.sandbox import sandbox_available
from rlhf_course.course.settings import Course
from tests.support.browser import InstructorServers, LabServer
from tests.support.course import copy_course, needs_sandbox, release_course
from tests.support.in_process_sandbox import grade_in_process

pytestmark = pytest.mark.slow  # Jupyter servers and five page loads

LOCAL = {"127.0.0.1", "localhost", "::1"}

WRITTEN = {
    ASSIGNMENT: "Clipping keeps $r_t$ inside $[1-\\epsilon, 1+\\epsilon]$ only where moving further would help:\n\n"
                "$$L^{\\mathrm{CLIP}} \\le L^{\\mathrm{IS}}$$",
    ASSIGNMENT + "_zh": "裁剪只在继续移动有利时把 $r_t$ 限制在 $[1-\\epsilon, 1+\\epsilon]$ 之内：\n\n"
                        "$$L^{\\mathrm{CLIP}} \\le L^{\\mathrm{IS}}$$",
}
STUDENTS = {"ada": ASSIGNMENT, "lin": ASSIGNMENT + "_zh"}
VERDICT = {ASSIGNMENT: "[trusted grader] ", ASSIGNMENT + "_zh": "[可信评分] "}

# Per verdict box (the Formgrader's <pre>, the feedback page's panel): its box, its lines, and every word or number
# ([A-Za-z0-9_.] runs) that the browser laid out over two lines although it is shorter than the line.
VERDICT_LAYOUT = """([selector, prefix]) => Array.from(document.querySelectorAll(selector))
    .filter(pre => pre.textContent.startsWith(prefix)).map(pre => {
        const split = [], lineTops = new Set();
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const match of node.data.matchAll(/[A-Za-z0-9_.]+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
                const tops = new Set(rects.map(r => Math.round(r.top)));
                tops.forEach(t => lineTops.add(t));
                const width = rects.reduce((sum, r) => sum + r.width, 0);
                if (tops.size > 1 && width < pre.clientWidth - 20) split.push(match[0]);
            }
        }
        return {scroll: pre.scrollWidth, client: pre.clientWidth, lines: lineTops.size, split,
                text: pre.textContent.slice(0, 60)};
    })"""

# Tofu: a character the page's fonts lack is drawn as the same empty box as any other.  Two different
# Chinese characters drawn in the font of the page's text must differ.
DRAWN_APART = """([a, b, selector]) => {
    const font = getComputedStyle(document.querySelector(selector)).font;
    const draw = ch => { const c = document.createElement('canvas'); c.width = 64; c.height = 64;
        const g = c.getContext('2d'); g.font = font.replace(/\\d+(\\.\\d+)?px/, '40px'); g.fillText(ch, 4, 48);
        return Array.from(g.getImageData(0, 0, 64, 64).data).join(','); };
    return draw(a) !== draw(b) && draw(a) !== draw('\\uE000');
}"""

# Typeset math laid out as math, not as a row of its symbols: every fraction taller than a line of text, its numerator
# above its denominator.
DRAWN_AS_MATH = """() => {
    const fractions = Array.from(document.querySelectorAll('.MathJax_MathML mfrac'));
    return fractions.length > 0 && fractions.every(f => {
        const [top, bottom] = Array.from(f.children).map(c => c.getBoundingClientRect());
        return f.getBoundingClientRect().height > 15 && top.bottom <= bottom.top + 1;
    });
}"""

# Code lines wider than their cell that a reader cannot scroll to (cut at the box's edge).
CUT_CODE = """selector => Array.from(document.querySelectorAll(selector))
    .filter(pre => pre.scrollWidth > pre.clientWidth + 1 && !['auto', 'scroll'].includes(getComputedStyle(pre).overflowX))
    .map(pre => pre.textContent.slice(0, 60))"""

# A code keyword drawn in another colour than the code's names.
HIGHLIGHTED = """([keyword, name]) => {
    const k = document.querySelector(keyword), n = document.querySelector(name);
    return !!(k && n) && getComputedStyle(k).color !== getComputedStyle(n).color;
}"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Ada (English) and Lin (Chinese): the reference answers but PPO's min forgotten, written answers
    with math; graded by trusted grading (`make grade`: the real sandbox; without one, the in-process double,
    tests/support/in_process_sandbox.py, for the tests that do not need it); a function that starts an
    instructor's Jupyter server (as `make lab-instructor` does) on a course, once per course."""
    root = tmp_path_factory.mktemp("honest")
    course = release_course(copy_course(root / "course"))
    course_handle = Course.at(course)
    for student, assignment in STUDENTS.items():
        answers = examples.answers_for(course_handle, ("ppo_clip_without_min",))
        examples.write_submission(course_handle, student, {**answers, "lab_question_1": WRITTEN[assignment]},
                                  assignment=assignment)
    real_sandbox = sandbox_available() is None
    results = {r.student: r for r in (batch.grade_all(course_handle, workers=1, show_progress=False, class_reports=False)
                                      if real_sandbox else grade_in_process(course_handle))}
    assert {s: r.state for s, r in results.items()} == {"ada": "failed tests", "lin": "failed tests"}
    from nbgrader.api import Gradebook
    with Gradebook(settings.Course.at(course).db_url, "rlhf-course") as gradebook:
        submissions = {s: gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), a, s)
                       for s, a in STUDENTS.items()}
        ids = {s: (n.id, len(n.grades)) for s, n in submissions.items()}
    servers = InstructorServers(root)
    # The control's course (test_the_formgrader_page_renders_latex_without_other_hosts): a copy without the course's
    # Formgrader template, its server started now, beside the tests before it.
    stock = course.parent / "stock course"
    shutil.copytree(course, stock)
    with open(stock / "nbgrader_config.py", "a") as config:  # nbgrader's own Formgrader templates alone
        config.write("\nc.HTMLExporter.extra_template_basedirs = c.HTMLExporter.extra_template_basedirs[1:]\n")
    servers.start(stock, wait=False)

    def start(at: Path = course) -> LabServer:
        return servers.start(at)

    yield course, start, ids, results, real_sandbox
    servers.stop()


@pytest.fixture(scope="module")
def formgrader_page(graded, browser):
    """The Formgrader's grading page of a student's submission as the logged-in instructor opens it, once for the
    file, typeset (MathJax done) and its grades and comments loaded: (page, every URL it requested, its script
    errors)."""
    course, start, ids, _, _ = graded
    opened, contexts = {}, []

    def open_page(student: str):
        if student not in opened:
            server = start()
            context = browser.new_context(extra_http_headers={"Authorization": f"token {server.token}"},
                                          viewport={"width": 1400, "height": 1000})
            contexts.append(context)
            page = context.new_page()
            requests, errors = [], []
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(server.url(f"formgrader/submissions/{ids[student][0]}/"))
            # formgrade.js sets MathJax.loaded once MathJax has typeset the page
            page.wait_for_function("window.MathJax && MathJax.loaded === true && window.formgrader"
                                   " && formgrader.grades.loaded && formgrader.comments.loaded", timeout=60_000)
            opened[student] = page, requests, errors
        return opened[student]

    yield open_page
    for context in contexts:
        context.close()


def other_hosts(requests: list[str]) -> list[str]:
    return [url for url in requests if urlparse(url).scheme in ("http", "https", "ws", "wss")
            and urlparse(url).hostname not in LOCAL]


def _shoot(page, element, path) -> None:
    """A picture of one cell, cut from the whole page: its place on the page read in one step (the Formgrader's
    page scrolls to the answer to grade as it opens, and a scroll between two reads would move the cut)."""
    box = element.evaluate("e => { const r = e.getBoundingClientRect();"
                           " return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height}; }")
    page.screenshot(path=str(path), full_page=True, clip=box)


def _verdicts_read_whole(page, selector: str, prefix: str, tests: int) -> None:
    verdicts = page.evaluate(VERDICT_LAYOUT, [selector, prefix])
    assert len(verdicts) == tests, [v["text"] for v in verdicts]
    assert [v for v in verdicts if v["scroll"] > v["client"]] == []  # nothing past the right edge
    assert [v for v in verdicts if v["split"]] == []  # no word or number cut over two lines
    assert any(v["lines"] > 1 for v in verdicts)  # the long FAILED ones do wrap


@pytest.mark.parametrize("student", STUDENTS)
def test_the_formgrader_page_of_an_honest_submission(graded, formgrader_page, artifacts, student):
    _, _, ids, results, _ = graded
    assignment, (submission_id, grades) = STUDENTS[student], ids[student]
    page, _, errors = formgrader_page(student)
    _shoot(page, page.locator(".output_subarea pre").filter(has_text=VERDICT[assignment]).nth(2).locator(
        "xpath=ancestor::div[contains(@class, 'code_cell')][1]"), artifacts / f"formgrader_honest_{assignment}.png")
    # one score box per grade cell of the gradebook, each in the heading of its own nbgrader cell, bound
    assert page.locator("input.score").count() == grades
    assert page.locator(".nbgrader_cell > .panel-heading input.score").count() == grades
    # each test cell's verdict beside its score box, in the heading, from the gradebook
    tests = [c for c in results[student].cells.values()]
    assert page.locator(".nbgrader_cell > .panel-heading .rlhf-verdict").count() == len(tests)
    assert page.locator(".nbgrader_cell > .panel-heading .rlhf-verdict-failed").count() == len(
        [c for c in tests if c.score < c.points])
    # it opens at the written answer to grade, not at the top
    page.wait_for_function("window.formgraderShowedAnswer", timeout=30_000)
    shown = page.evaluate("formgraderShowedAnswer")
    assert shown.startswith("lab_question") and page.evaluate("window.scrollY") > 0
    box = page.locator(f"input.score#{shown}").bounding_box()  # in the viewport (1000 px high)
    assert box is not None and 0 <= box["y"] <= 1000
    assert page.evaluate("formgrader.grade_uis.length") == grades
    assert page.evaluate("formgrader.comment_uis.length") == page.locator("textarea.comment").count() > 0
    # the derivations' and the written answer's math, typeset; the code, highlighted
    # (MathJax's NativeMML output, the course's renderer: MathML that Chromium lays out itself)
    assert page.locator(".MathJax_MathML math").count() > 50
    assert page.locator(".nbgrader_cell .panel-body div.MathJax_MathML math[display='block']").count() >= 1  # the written answer's
    assert page.evaluate(DRAWN_AS_MATH)  # every fraction drawn as one
    assert page.locator(".MathJax_MathML mi", has_text="\U0001D53C").count() >= 1  # \mathbb{E}: 𝔼, not E
    assert page.evaluate(HIGHLIGHTED, [".input_area .highlight .kn", ".input_area .highlight .n"])
    assert page.evaluate(CUT_CODE, ".input_area pre") == []
    # a markdown table's cells apart, a hint's disclosure marker shown
    assert page.evaluate("parseFloat(getComputedStyle(document.querySelector('.rendered_html td'))"
                         ".paddingLeft)") >= 4
    assert page.evaluate("getComputedStyle(document.querySelector('.rendered_html summary')).display") \
        == "list-item"
    _verdicts_read_whole(page, "pre", VERDICT[assignment], len(results[student].cells))
    if assignment.endswith("_zh"):
        assert page.get_by_text("裁剪只在继续移动有利时").count() == 1  # the written answer
        assert page.evaluate(DRAWN_APART, ["裁", "剪", ".rendered_html p"])
        assert page.evaluate(DRAWN_APART, ["未", "通", ".output_subarea pre"])
    assert errors == []


def test_the_formgrader_page_renders_latex_without_other_hosts(graded, formgrader_page, browser, artifacts):
    """MathJax from the Jupyter server (rlhf_course/grading/pages/templates/formgrade/mathjax.html.j2), nothing asked of another
    host; the control: nbgrader's stock page (without the course's template) asks a CDN for MathJax, and with no
    network its script stops (the issue the template fixes)."""
    course, start, ids, _, _ = graded
    page, requests, errors = formgrader_page("ada")
    page.locator("div.MathJax_MathML").first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "formgrader_submission_mathjax.png"))
    assert not other_hosts(requests), other_hosts(requests)
    assert any("/static/jupyter_server_mathjax/MathJax.js" in url for url in requests), requests
    assert not errors, errors

    # On a copy of the course (made by the fixture, as graded): the file's server keeps the course's template.
    stock = course.parent / "stock course"
    assert "extra_template_basedirs[1:]" in (stock / "nbgrader_config.py").read_text()
    assert (stock / "gradebook.db").exists()
    server = start(stock)
    page = browser.new_context(extra_http_headers={"Authorization": f"token {server.token}"},
                               viewport={"width": 1400, "height": 1000}).new_page()
    asked_a_cdn = []
    page.on("request", lambda request: asked_a_cdn.append(request.url) if (
        "mathjax" in request.url.lower() and other_hosts([request.url])) else None)
    try:
        page.goto(server.url(f"formgrader/submissions/{ids['ada'][0]}/"), wait_until="commit")
        page.locator("#notebook").first.wait_for(timeout=60_000)
        for _ in range(150):  # until the page has asked another host for MathJax (at most 30 s)
            if asked_a_cdn:
                break
            page.wait_for_timeout(200)
        page.screenshot(path=str(artifacts / "formgrader_submission_stock_cdn.png"))
    finally:
        page.context.close()
    assert asked_a_cdn


@needs_sandbox
def test_the_formgrader_shows_why_a_hidden_test_scored_zero(graded, formgrader_page, artifacts):
    """Trusted grading (`make grade`, the real sandbox) of a PPO without the min: the instructor's Formgrader
    page for that submission shows, under each failing test cell, the trusted verdict and its message."""
    _, _, _, results, real_sandbox = graded
    assert real_sandbox
    page, _, _ = formgrader_page("ada")
    verdict = page.get_by_text("[trusted grader] FAILED (0 / 2): clipping must not apply to r < 1 - eps when A > 0")
    verdict.first.wait_for(timeout=10_000)
    verdict.first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "formgrader_trusted_verdict.png"))
    assert page.get_by_text("[trusted grader] passed").count() > 5  # the cells it got right say so too
    assert page.get_by_text("What went wrong:").count() >= len(
        [c for c in results["ada"].cells.values() if c.score < c.points])


@pytest.mark.parametrize("student", STUDENTS)
def test_the_feedback_page_of_an_honest_submission(graded, browser, artifacts, student):
    course, _, _, results, _ = graded
    assignment = STUDENTS[student]
    path = course / "feedback" / student / assignment / NOTEBOOK.replace(".ipynb", ".html")
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    try:
        page.goto(path.as_uri(), wait_until="load")
        _shoot(page, page.locator("div.rlhf-verdict").nth(2), artifacts / f"feedback_honest_{assignment}.png")
        assert page.locator("math").count() > 50
        assert page.evaluate(HIGHLIGHTED, [".jp-InputArea-editor .highlight .kn", ".jp-InputArea-editor .highlight .n"])
        assert page.evaluate(CUT_CODE, ".jp-InputArea-editor pre") == []  # a hidden test's long header scrolls
        _verdicts_read_whole(page, "div.rlhf-verdict", "", len(results[student].cells))
        if assignment.endswith("_zh"):
            assert page.get_by_text("裁剪只在继续移动有利时").count() == 1
            assert page.evaluate(DRAWN_APART, ["裁", "剪", ".jp-RenderedMarkdown p"])
            assert page.evaluate(DRAWN_APART, ["未", "通", "div.rlhf-verdict"])
    finally:
        page.close()
