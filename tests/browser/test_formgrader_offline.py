"""The Formgrader's grading page for a graded submission, in headless Chromium: it renders its
LaTeX with MathJax served by the Jupyter server itself and asks nothing of any other host, and shows the trusted
grader's verdict under each test cell.

One graded course and one instructor's lab for the file: trusted grading of one submission (the real sandbox;
without it, the in-process double, tests/support/in_process_sandbox.py, for the page that does not need it)."""

import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, settings
from rlhf_course.grading.sandbox import sandbox_available
from tests.support.course import copy_course, needs_sandbox, release_course
from tests.support.in_process_sandbox import grade_in_process

from tests.support.browser import LabServer

LOCAL = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory, repo):
    """Bo's PPO without the min, graded (`make grade`); his submission's id; a function that starts an
    instructor's lab (`make lab-instructor`) on a course, once per course."""
    from nbgrader.api import Gradebook

    from rlhf_course.grading import batch
    tmp_path = tmp_path_factory.mktemp("formgrader")
    course = copy_course(tmp_path / "course")
    release_course(course)
    examples.write_submission(course, "bo", examples.answers_for(repo, ("ppo_clip_without_min",)))
    real_sandbox = sandbox_available() is None
    [result] = (batch.grade_all(course, workers=1, show_progress=False) if real_sandbox else grade_in_process(course))
    with Gradebook(settings.Course.at(course).db_url, "rlhf-course") as gradebook:
        submission_id = gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, "bo").id
    servers = {}

    def start(root: Path = course) -> LabServer:  # as `make lab-instructor` does, on this course
        if root not in servers:
            scratch = tmp_path / f"server{len(servers)}"
            scratch.mkdir()
            servers[root] = LabServer(root, scratch, env_extra={"PYTHONPATH": f"{root / 'instructor'}:{root}"})
        return servers[root]

    yield course, submission_id, (result, real_sandbox), start
    for server in servers.values():
        server.stop()


def visit(browser, url: str):
    """Open the page; return it with every URL it requested and every script error."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    return page, requests, errors


def other_hosts(requests: list[str]) -> list[str]:
    return [url for url in requests if urlparse(url).scheme in ("http", "https", "ws", "wss")
            and urlparse(url).hostname not in LOCAL]


@pytest.mark.slow
def test_formgrader_page_renders_latex_without_other_hosts(graded_course, browser, artifacts):
    course, submission_id, _, start = graded_course
    page, requests, errors = visit(browser, start().url(f"formgrader/submissions/{submission_id}/"))
    # formgrade.js sets MathJax.loaded once MathJax has typeset the page
    page.wait_for_function("window.MathJax && MathJax.loaded === true", timeout=60_000)
    math = page.locator(".MathJax, .MathJax_Display, .MathJax_CHTML")
    assert math.count() > 10, "the derivations' LaTeX was not typeset"
    page.locator(".MathJax_Display").first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "formgrader_submission_mathjax.png"))
    assert not other_hosts(requests), other_hosts(requests)
    assert any("/static/jupyter_server_mathjax/MathJax.js" in url for url in requests), requests
    assert not errors, errors

    page.close()

    # The control: nbgrader's stock page (without the course's template) asks a CDN for MathJax,
    # and with no network its script stops (the issue this fixes).  On a copy of the course: the file's lab
    # keeps the course's template.
    stock = course.parent / "stock course"
    shutil.copytree(course, stock, ignore=shutil.ignore_patterns("formgrader"))
    assert not (stock / "jupyter" / "formgrader").exists() and (stock / "gradebook.db").exists()
    page, requests, errors = visit(browser, start(stock).url(f"formgrader/submissions/{submission_id}/"))
    page.locator("#notebook").first.wait_for(timeout=60_000)
    for _ in range(150):  # until the page has asked another host for MathJax (at most 30 s)
        if any("mathjax" in url.lower() for url in other_hosts(requests)):
            break
        page.wait_for_timeout(200)
    page.screenshot(path=str(artifacts / "formgrader_submission_stock_cdn.png"))
    assert any("mathjax" in url.lower() for url in other_hosts(requests)), requests
    print("stock page, script errors:", errors)


@pytest.mark.slow
@needs_sandbox
def test_formgrader_shows_why_a_hidden_test_scored_zero(graded_course, browser, artifacts):
    """Trusted grading (`make grade`, the real sandbox) of a PPO without the min: the instructor's Formgrader
    page for that submission shows, under each failing test cell, the trusted verdict and its message."""
    _, submission_id, (result, real_sandbox), start = graded_course
    assert real_sandbox and result.state == "failed tests"
    page, _, _ = visit(browser, start().url(f"formgrader/submissions/{submission_id}/"))
    verdict = page.get_by_text("[trusted grader] FAILED (0 / 2): clipping must not apply to r < 1 - eps when A > 0")
    verdict.first.wait_for(timeout=60_000)
    verdict.first.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "formgrader_trusted_verdict.png"))
    assert page.get_by_text("[trusted grader] passed").count() > 5  # the cells it got right say so too
    assert page.get_by_text("What went wrong:").count() >= len(
        [c for c in result.cells.values() if c.score < c.points])
