"""The Formgrader's Students page totals fold each assignment's language editions: a student's score is their counted
edition's (the latest submission of rlhf or rlhf_zh), out of one edition's maximum, not each edition counted as an
assignment of its own (stock nbgrader: "21.5 / 146" for a maximum of 73).  In process: the course's students API
class, and the server extension's routes to it."""
from __future__ import annotations

import datetime as dt
import logging

import pytest
from nbgrader.api import Gradebook
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.apps.api import NbGraderAPI
from traitlets.config import Config

from rlhf_course.grading.pages import formgrader_pages
from tests.support.course import REPO

DUE = dt.datetime(2026, 12, 18, 23, 59)
RLHF_MAX = 71 + 2  # tests and a written answer: one edition's, the course's 73


@pytest.fixture
def course(tmp_path):
    """A gradebook with rlhf, its Chinese edition rlhf_zh (the repository's i18n/ names it) and kl_penalty: ada submitted
    rlhf then rlhf_zh (the later counts), bea rlhf_zh only, cy nothing."""
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        for assignment, cells in (("rlhf", {"tests": 71, "lab_question_1": 2}),
                                  ("rlhf_zh", {"tests": 71, "lab_question_1": 2}), ("kl_penalty", {"kl": 11})):
            gb.add_assignment(assignment, duedate=DUE)
            gb.add_notebook("nb", assignment)
            for name, points in cells.items():
                gb.add_grade_cell(name, "nb", assignment, max_score=points, cell_type="code")
        for student in ("ada", "bea", "cy"):
            gb.add_student(student)
        _submit(gb, "rlhf", "ada", {"tests": 20, "lab_question_1": 1.5}, DUE - dt.timedelta(hours=3))
        _submit(gb, "rlhf_zh", "ada", {"tests": 18, "lab_question_1": 0}, DUE - dt.timedelta(hours=1))
        _submit(gb, "kl_penalty", "ada", {"kl": 11}, DUE)
        _submit(gb, "rlhf_zh", "bea", {"tests": 30, "lab_question_1": 2}, DUE + dt.timedelta(hours=3))
    config = Config()
    config.CourseDirectory.root = str(REPO)  # its i18n/ names the editions; nothing is written there
    config.CourseDirectory.db_url = url
    return config


def _submit(gb, assignment, student, scores, when):
    gb.add_submission(assignment, student, timestamp=when)
    for name, score in scores.items():
        gb.find_grade(name, "nb", assignment, student).auto_score = score
    gb.db.commit()


def _api(cls, config):
    return cls(CourseDirectory(config=config), Authenticator(config=config), config=config)


def test_the_students_totals_are_out_of_what_a_student_can_earn(course):
    stock = {s["id"]: (s["score"], s["max_score"]) for s in _api(NbGraderAPI, course).get_students()}
    assert stock["ada"] == (20 + 1.5 + 18 + 11, 2 * RLHF_MAX + 11)  # the defect: both editions counted
    folded_api = _api(formgrader_pages._folding_api_class(), course)
    folded = {s["id"]: (s["score"], s["max_score"]) for s in folded_api.get_students()}
    assert folded == {"ada": (18 + 11, RLHF_MAX + 11),  # rlhf_zh, the later, counts: rlhf's 21.5 does not
                      "bea": (32, RLHF_MAX + 11), "cy": (0, RLHF_MAX + 11)}
    one = folded_api.get_student("ada")  # the row the page redraws after an edit
    assert (one["score"], one["max_score"]) == folded["ada"]
    assert folded_api.get_student("nobody") is None


def test_the_server_extension_serves_the_students_api_with_the_editions_folded():
    from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine
    from tornado.web import Application

    class Server:  # what _load_jupyter_server_extension reads of a Jupyter server with the Formgrader
        jpserver_extensions = {formgrader_pages.FORMGRADER: True}
        web_app = Application(base_url="/base/")
        config = Config()
        log = logging.getLogger("test-formgrader-totals")

    formgrader_pages._load_jupyter_server_extension(Server)
    router = Server.web_app.default_router
    for path, stock in (("/base/formgrader/api/students", "StudentCollectionHandler"),
                        ("/base/formgrader/api/student/ada", "StudentHandler")):
        request = HTTPServerRequest(start_line=RequestStartLine("GET", path, "HTTP/1.1"),
                                    headers=HTTPHeaders(Host="localhost"))
        handler = router.find_handler(request).handler_class
        assert stock in [base.__name__ for base in handler.__mro__] and handler.__name__ == "Folded" + stock, handler
        assert handler.api.fget.__qualname__.startswith("_student_handler_classes"), handler.api
