"""A score typed in the Formgrader (Chromium, the instructor's JupyterLab server on the course) reaches the student:
`make grade` wrote the page before, `nbgrader release_feedback` rewrites it with the gradebook's score, and the
student's `fetch_feedback` brings the new score.  A save the server refuses (the gradebook database not answering:
HTTP 503 with its message) shows as failed: a red cross by the score and the server's reason above the page."""
from __future__ import annotations

import json
import time

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from tests.support.feedback_loop import fetched_page, loop  # noqa: F401  (loop: a fixture)
from tests.support.browser import LabServer
from tests.support.course import gradebook_url

pytestmark = pytest.mark.slow  # the loop's nbgrader commands and a JupyterLab server


def _manual_score(course, student: str) -> float | None:
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        return gb.find_grade("lab_question_1", NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student).manual_score


def test_a_score_saved_in_the_formgrader_is_what_the_student_fetches(loop, browser, tmp_path, artifacts):  # noqa: F811
    from nbgrader.api import Gradebook
    course, student = loop["course"], loop["student"]
    with Gradebook(gradebook_url(course)) as gb:
        submission = gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, student).id
    (tmp_path / "server" / "config").mkdir(parents=True)
    server = LabServer(course, tmp_path / "server",
                       env_extra={"PYTHONPATH": f"{course / 'instructor'}:{course}", **loop["env"]})
    context = browser.new_context(extra_http_headers={"Authorization": f"token {server.token}"},
                                  viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        page.goto(server.url(f"formgrader/submissions/{submission}/"), wait_until="load")
        score = page.locator("input.score#lab_question_1")
        score.wait_for(state="visible", timeout=60_000)
        score.fill("1.5")
        score.press("Tab")  # the Formgrader saves on change, through its grade API
        deadline = time.monotonic() + 30
        while _manual_score(course, student) != 1.5 and time.monotonic() < deadline:
            time.sleep(0.2)
        page.screenshot(path=str(artifacts / "formgrader_manual_grade.png"))
        assert _manual_score(course, student) == 1.5
        said = ("The gradebook database (sqlite:///gradebook.db) did not answer: connection refused. "
                "Nothing was saved by this request; reload when it is back.")
        page.route("**/formgrader/api/grade/**", lambda route: route.fulfill(
            status=503, content_type="application/json", body=json.dumps({"message": said})))
        score.fill("2")
        score.press("Tab")
        banner = page.locator("#rlhf-not-saved")
        banner.wait_for(state="visible", timeout=30_000)
        assert banner.inner_text() == f"Not saved (score of lab_question_1): {said}"
        cross = page.locator(".nbgrader_cell > .panel-heading .score-saved.rlhf-save-failed")
        assert cross.count() == 1 and cross.is_visible()
        page.screenshot(path=str(artifacts / "formgrader_save_failed.png"))
        page.unroute("**/formgrader/api/grade/**")
        score.fill("1.5")
        score.press("Tab")  # saved again: the cross and the message go
        banner.wait_for(state="hidden", timeout=30_000)
        assert cross.count() == 0
    finally:
        context.close()
        server.stop()
    assert _manual_score(course, student) == 1.5
    loop["commands"].nbgrader("release_feedback", ASSIGNMENT, env=loop["env"])
    loop["commands"].nbgrader("fetch_feedback", ASSIGNMENT, cwd=loop["home"], env=loop["env"])
    fetched = fetched_page(loop)
    assert f"{ASSIGNMENT}: 45.5 / 50" in fetched and "awaiting a person" not in fetched and "1.5 / 2" in fetched
