"""A submission trusted grading could not read (not JSON: the catalogue's ``invalid_json``) has no autograded copy, so
the Formgrader has no notebook to show.  Stock nbgrader 0.9.6 answers its page with HTTP 500 (its formgrade_404.tpl
imports a formgrade_macros.tpl it does not ship); the course's handler (rlhf_course/grading/pages/formgrader_pages.py)
renders its own page instead, saying the grade, where the file is and what a person can do, and the class report
says the same.  In process: a graded course (tests/support/in_process_sandbox.py), the handler's render; then one
real Jupyter server answering the class report's link."""
from __future__ import annotations

import os
import shutil
import re
import urllib.error
import urllib.request
from types import SimpleNamespace
from unittest import mock

import jinja2
import pytest
from bs4 import BeautifulSoup
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.server_extensions.formgrader import handlers
from tornado import httputil, web

import rlhf_catalogue
from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.course.settings import Course
from rlhf_course.grading import examples
from rlhf_course.grading.pages import class_report, formgrader_pages
from tests.support.course import copy_course, gradebook_url, release_course
from tests.support.in_process_sandbox import grade_in_process

pytestmark = pytest.mark.slow  # a release (cached per run) and two submissions graded in process
NOTEBOOK_ID = NOTEBOOK.removesuffix(".ipynb")
UNREADABLE = "mal"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("missing_page") / "course")
    release_course(course)
    handle = Course.at(course)
    examples.write_submission(handle, "ada", examples.answers_for(handle, ()))
    folder = examples.write_submission(handle, UNREADABLE, examples.answers_for(handle, ()))
    rlhf_catalogue.tamper_notebook(folder / NOTEBOOK, "invalid_json")
    grade_in_process(handle, class_reports=True)
    with Gradebook(gradebook_url(course)) as gb:
        ids = {s: gb.find_submission_notebook(NOTEBOOK_ID, ASSIGNMENT, s).id for s in ("ada", UNREADABLE)}
    return course, ids


def _resources(course, submission_id: str) -> dict:
    """What nbgrader's SubmissionHandler.get hands its 404 page (nbgrader 0.9.6)."""
    return {"assignment_id": ASSIGNMENT, "notebook_id": NOTEBOOK_ID, "submission_id": submission_id, "index": -2,
            "total": 1, "base_url": "/base", "student": UNREADABLE, "last_name": None, "first_name": None,
            "notebook_path": f"./autograded/{UNREADABLE}/{ASSIGNMENT}/{NOTEBOOK}",
            "filename": str(course / "autograded" / UNREADABLE / ASSIGNMENT / NOTEBOOK)}


def _handler(course, handler_class):
    """``handler_class`` as the Formgrader's server would make it for one request, its settings nbgrader's."""
    config = Course.at(course).config
    settings = {"nbgrader_formgrader": SimpleNamespace(coursedir=CourseDirectory(config=config), url_prefix="."),
                "nbgrader_gradebook": None, "base_url": "/base/",
                "nbgrader_jinja2_env": jinja2.Environment(loader=jinja2.FileSystemLoader([handlers.template_path]))}
    start = httputil.RequestStartLine("GET", "/base/formgrader/submissions/x/", "HTTP/1.1")
    request = httputil.HTTPServerRequest(start_line=start, headers=httputil.HTTPHeaders({"Host": "localhost"}),
                                         connection=mock.Mock())
    return handler_class(web.Application(**settings), request)


def test_stock_nbgraders_page_of_a_missing_notebook_cannot_render(graded):
    """Why the course renders its own: nbgrader's template fails (the Formgrader's HTTP 500)."""
    course, ids = graded
    assert not (course / "autograded" / UNREADABLE / ASSIGNMENT / NOTEBOOK).exists()
    with pytest.raises(jinja2.TemplateNotFound, match="formgrade_macros.tpl"):
        _handler(course, handlers.SubmissionHandler).render("formgrade_404.tpl",
                                                             resources=_resources(course, ids[UNREADABLE]))


def test_the_courses_page_of_an_unreadable_submission_says_its_grade_its_file_and_what_to_do(graded):
    course, ids = graded
    handler = _handler(course, formgrader_pages._handler_class(1.0))
    page = handler.render("formgrade_404.tpl", resources=_resources(course, ids[UNREADABLE]))
    text = " ".join(BeautifulSoup(page, features="html.parser").get_text().split())
    with Gradebook(gradebook_url(course)) as gb:
        points = gb.find_submission_notebook(NOTEBOOK_ID, ASSIGNMENT, UNREADABLE).max_score
    assert "Trusted grading could not read this notebook: malformed notebook" in text
    assert "cannot be graded by hand in the Formgrader" in text
    assert f"Its grade in the gradebook: 0 / {points:g} (every test scored 0); flagged for review." in text
    assert f"submitted/{UNREADABLE}/{ASSIGNMENT}/{NOTEBOOK}" in text and "Open With, Editor" in text
    assert f"nbgrader collect --update {ASSIGNMENT}" in text and f"sudo make grade ASSIGNMENT={ASSIGNMENT}" in text
    assert "Submission -1" not in text  # nbgrader's index of a notebook it does not list
    # the other templates stay nbgrader's
    assert "500" in handler.render("base_500.tpl", base_url="/base", error_code=500)


def test_the_class_report_says_an_unreadable_submission_cannot_be_graded_by_hand_and_links_it(graded):
    course, ids = graded
    soup = BeautifulSoup((course / class_report.FOLDER / f"{ASSIGNMENT}.html").read_text(), features="html.parser")
    manual = soup.find(id="manual").find_next_siblings("p")
    said = next(p for p in manual if "cannot be graded by hand" in p.get_text())
    assert "1 submission(s) have no notebook the Formgrader can show" in said.get_text()
    assert [a.get_text() for a in said.find_all("a")] == [UNREADABLE]
    assert said.find("a")["href"].endswith(f"/submissions/{ids[UNREADABLE]}/")
    assert not any("cannot be graded by hand" in p.get_text() and "ada" in p.get_text() for p in manual)


def test_the_report_link_of_an_unreadable_submission_answers_the_page_not_a_500(graded, tmp_path):
    from tests.support.browser import LabServer
    course, ids = graded
    link = BeautifulSoup((course / class_report.FOLDER / f"{ASSIGNMENT}.html").read_text(),
                         features="html.parser").find("a", string=UNREADABLE)["href"]
    path = re.sub(r"^https?://[^/]+/", "", link)
    (tmp_path / "config").mkdir()
    python_path = os.pathsep.join(filter(None, [str(course / "instructor"), str(course), os.environ.get("PYTHONPATH")]))
    server = LabServer(course, tmp_path, env_extra={"PYTHONPATH": python_path})
    try:
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(server.url(path), timeout=60)
        body = answered.value.read().decode()
        assert answered.value.code == 404, body[:2000]
        assert "malformed notebook" in body and "cannot be graded by hand" in body
        honest = urllib.request.urlopen(server.url(f"formgrader/submissions/{ids['ada']}/"), timeout=60)
        assert honest.status == 200
    finally:
        server.stop()


def _page_text(course, student: str, assignment: str, submission_id: str) -> str:
    resources = {**_resources(course, submission_id), "student": student, "assignment_id": assignment}
    page = _handler(course, formgrader_pages._handler_class(1.0)).render("formgrade_404.tpl", resources=resources)
    return " ".join(BeautifulSoup(page, features="html.parser").get_text().split())


def test_a_graded_submission_whose_copy_was_lost_is_not_called_ungraded(graded, tmp_path):
    """ada was graded (the gradebook holds her score); her autograded folder, and the grading record in it, went
    missing since: the page says she was graded, her score, and how to write the copy again."""
    course, ids = graded
    folder = course / "autograded" / "ada" / ASSIGNMENT
    shutil.move(folder, tmp_path / "kept")
    try:
        text = _page_text(course, "ada", ASSIGNMENT, ids["ada"])
    finally:
        shutil.move(tmp_path / "kept", folder)
    with Gradebook(gradebook_url(course)) as gb:
        graded_nb = gb.find_submission_notebook(NOTEBOOK_ID, ASSIGNMENT, "ada")
        score, points = graded_nb.score, graded_nb.max_score
    assert "Not graded" not in text and "built-in method" not in text, text
    assert f"Graded, but its autograded copy is missing: autograded/ada/{ASSIGNMENT}/{NOTEBOOK}" in text, text
    assert f"sudo make grade ASSIGNMENT={ASSIGNMENT} writes it again" in text
    assert f"Its grade in the gradebook: {score:g} / {points:g}" in text


def test_an_empty_submission_row_says_there_is_no_submission_and_how_to_remove_it(graded):
    """A row an older `extend` made for an edition ben never took: no file, no time, no grade.  Grading would find
    nothing to grade; the page says so and names the command that removes such rows."""
    import datetime as dt
    import warnings

    from sqlalchemy.exc import SAWarning
    course, _ = graded
    edition = f"{ASSIGNMENT}_zh"
    with Gradebook(gradebook_url(course)) as gb:
        gb.update_or_create_student("ben")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)
            gb.update_or_create_submission(edition, "ben", extension=dt.timedelta(hours=48))
        submission_id = gb.find_submission_notebook(NOTEBOOK_ID, edition, "ben").id
    try:
        text = _page_text(course, "ben", edition, submission_id)
    finally:
        with Gradebook(gradebook_url(course)) as gb:
            gb.remove_submission(edition, "ben")
    assert "Not graded" not in text and "make grade" not in text and "built-in method" not in text, text
    assert f"ben did not submit {edition}: this is an empty submission row" in text, text
    assert "python -m rlhf_course.grading empty-submissions --remove" in text
