"""The Formgrader's grading page, rendered off the instructor's Jupyter server: a Jupyter server
extension that serves ``/formgrader/submissions/<id>/`` with nbgrader's handler, whose render of the
autograded copy would otherwise run nbconvert inside the server's one event loop (a slow page held every
other request of the server, ``/api/status`` included).  Only that render changes: nbgrader's ``get`` runs
as it is (its checks, redirect and resources) and its one call to the exporter is deferred.

A submitted notebook without an autograded copy (one trusted grading could not read: a malformed or too large
notebook) gets nbgrader's 404 page, whose template nbgrader 0.9.6 cannot render (it imports a
``formgrade_macros.tpl`` it does not ship: HTTP 500).  That one template is the course's
(``templates/formgrade/submission_without_copy.html.j2``): the grade the gradebook holds, where the submitted file
is, and what a person can do with it (it cannot be graded by hand: there are no cells to grade).

The page is rendered by the same exporter (nbgrader's, with the course's configuration: the
sanitiser, the course's lexer, the course's page additions) in a child process forked from
:mod:`page_process`'s forkserver (nbconvert loaded); the server awaits it without blocking, and kills it at
``c.FormgraderPages.render_seconds``.  Over the budget the instructor gets a short page saying so, with a link to
the notebook; the server never stops answering.

The Students page's totals fold each assignment's language editions (rlhf and rlhf_zh are one assignment: a
student's score is their counted edition's, out of one edition's maximum; stock nbgrader counts each edition as an
assignment of its own, "21.5 / 146" for a maximum of 73): the students API answers through :func:`_folding_api_class`.

A due date changed in the Formgrader (its assignment API's PUT, nbgrader's own handler) is then put into the
exchange when the assignment is released there, where students read it (:mod:`rlhf_course.exchange.deadlines`),
as ``python -m rlhf_course.grading publish-deadlines`` does.

Every Formgrader handler, nbgrader's and these, recovers when the gradebook database drops its connection
(:mod:`formgrader_database`).

Enabled by ``jupyter_server_config.d/rlhf_course.json`` (``make`` installs it in the course's venv);
it does nothing in a server without nbgrader's Formgrader (students' servers).
"""
from __future__ import annotations

import asyncio
import html
import inspect
import os
import time

from traitlets import Float
from traitlets.config import Configurable

FORMGRADER = "nbgrader.server_extensions.formgrader"


class FormgraderPages(Configurable):
    render_seconds = Float(10.0, help="The most one Formgrader grading page may take to render (in a child "
                                      "process; the server keeps answering meanwhile).").tag(config=True)


def _render(config, filename: str, resources: dict, send) -> None:
    """In the child: nbgrader's grading page for ``filename``, sent back as UTF-8 bytes."""
    from nbconvert import HTMLExporter
    page, _ = HTMLExporter(config=config).from_filename(filename, resources=resources)
    send.send_bytes(page.encode("utf-8"))
    send.close()


def render_bounded(config, filename: str, resources: dict, seconds: float) -> str | None:
    """The grading page rendered in a child process, or None if it took more than ``seconds`` or failed.
    Blocks its (executor) thread, never the event loop."""
    from rlhf_course.grading.pages.page_process import context
    forkserver = context()
    receive, send = forkserver.Pipe(duplex=False)
    child = forkserver.Process(target=_render, args=(config, filename, resources, send), daemon=True)
    child.start()
    send.close()
    try:
        if receive.poll(seconds):
            return receive.recv_bytes().decode("utf-8")
        return None
    except (EOFError, OSError):
        return None
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join(5)


def _exporter_config(exporter):
    """The exporter's configuration, in sections a child can rebuild it from (picklable)."""
    from traitlets.config import Config
    return Config({section: exporter.config[section] for section in ("HTMLExporter", "TemplateExporter", "Exporter")
                   if section in exporter.config})


def over_budget_page(resources: dict, seconds: float) -> str:
    notebook = html.escape(str(resources.get("notebook_path", "")), quote=True)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(str(resources.get('notebook_id')))}"
            f"</title></head><body><h3>This submission's page did not render within {seconds:g} s.</h3>"
            f"<p>A busy machine is the usual reason: reload this page to try again. Its scores are in the gradebook, "
            f"unchanged. <a href='{resources.get('base_url', '')}/lab/tree/{notebook}'>Open the notebook</a> to read "
            f"it meanwhile.</p><p>A page that runs out of time on every reload needs a longer budget: "
            f"<code>c.FormgraderPages.render_seconds</code> in the Jupyter server's configuration "
            f"(<code>jupyter_server_config.py</code>, or <code>--FormgraderPages.render_seconds=30</code> on its "
            f"command line).</p>"
            f"</body></html>")


NBGRADER_MISSING_PAGE = "formgrade_404.tpl"  # nbgrader 0.9.6's; it imports a formgrade_macros.tpl nbgrader lacks
WITHOUT_COPY_TEMPLATE = "formgrade/submission_without_copy.html.j2"


def without_copy(course, gradebook, resources: dict) -> dict:
    """What the page of a submitted notebook without an autograded copy says (``resources``: those nbgrader's
    handler gives its 404 page): the grading record's state and detail (none: not graded by `make grade`, or its
    record went with the copy), whether the gradebook holds a score (``graded``) or the row is an empty one an older
    `extend` made (``empty``: :mod:`~rlhf_course.grading.gradebook.empty_submissions`), the gradebook's score, the
    submitted file.  Paths are relative to the course root."""
    from nbgrader.api import MissingEntry

    from rlhf_course.grading.gradebook import empty_submissions
    from rlhf_course.grading.pages.grading_record import recorded_state
    from rlhf_course.grading.results import UNREADABLE_STATES, one_line
    student, assignment, notebook = resources["student"], resources["assignment_id"], resources["notebook_id"]
    state, detail = recorded_state(course, student, assignment, notebook) or ("", "")
    detail = one_line(detail)[:500]
    try:
        submitted_nb = gradebook.find_submission_notebook_by_id(resources["submission_id"])
        score, max_score, flagged = float(submitted_nb.score), float(submitted_nb.max_score), submitted_nb.flagged
        graded = any(g.auto_score is not None or g.manual_score is not None for g in submitted_nb.grades)
        empty = empty_submissions.is_empty(course, submitted_nb.assignment)
    except MissingEntry:
        score = max_score = None
        flagged = graded = empty = False
    submitted = course.folder("submitted", student, assignment) / f"{notebook}.ipynb"
    autograded = course.folder("autograded", student, assignment) / f"{notebook}.ipynb"
    # keys are never a dict method's name (copy, items, ...): the template's page.<key> would find the method
    return {"student": student, "assignment": assignment, "notebook": notebook,
            "base_url": resources.get("base_url", ""), "state": state, "detail": detail,
            "unreadable": state in UNREADABLE_STATES, "graded": graded, "empty": empty, "score": score,
            "max_score": max_score, "flagged": flagged, "submitted": os.path.relpath(submitted, course.root),
            "submitted_exists": submitted.is_file(), "autograded": os.path.relpath(autograded, course.root)}


def without_copy_page(page: dict) -> str:
    """The page of :func:`without_copy`'s data, every value escaped."""
    from jinja2 import Environment, FileSystemLoader

    from rlhf_course.grading.pages import TEMPLATES
    environment = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True)
    return environment.get_template(WITHOUT_COPY_TEMPLATE).render(page=page)


class _DeferredRender:
    """Stands in for nbgrader's exporter while nbgrader's handler runs: it keeps what the handler asks to render
    (the autograded notebook and the page's resources) for :func:`render_bounded`, and hands back an empty page."""

    def __init__(self, exporter):
        self.exporter = exporter
        self.asked: tuple[str, dict] | None = None

    def from_filename(self, filename: str, resources: dict | None = None, **kwargs) -> tuple[str, dict]:
        self.asked = (filename, dict(resources or {}))
        return "", {}


def _handler_class(seconds: float):
    from nbgrader.server_extensions.formgrader import handlers

    class BoundedSubmissionHandler(handlers.SubmissionHandler):
        """nbgrader's grading page (its checks, redirect and resources, unchanged), whose render, the one call to
        its exporter, is deferred to a child process the server awaits; its 404 page is the course's."""

        def render(self, name, **namespace):
            """nbgrader's templates, but its 404 page (a notebook without an autograded copy, a malformed
            submission's) is the course's: nbgrader's own cannot render."""
            if name != NBGRADER_MISSING_PAGE:
                return super().render(name, **namespace)
            from pathlib import Path

            from rlhf_course.course.settings import Course
            course = Course.at(Path(self.coursedir.root), self.coursedir.config)
            return without_copy_page(without_copy(course, self.gradebook, namespace["resources"]))

        @property
        def exporter(self):
            if getattr(self, "_deferred", None) is None:
                self._deferred = _DeferredRender(super().exporter)
            return self._deferred

        async def get(self, submission_id):
            handled = super().get(submission_id)
            if inspect.isawaitable(handled):
                await handled
            deferred = getattr(self, "_deferred", None)
            if deferred is None or deferred.asked is None:
                return  # nbgrader's answer (a redirect, a 404 page, an error) is already written
            filename, resources = deferred.asked
            start = time.monotonic()
            page = await asyncio.get_running_loop().run_in_executor(
                None, render_bounded, _exporter_config(deferred.exporter), filename, resources, seconds)
            if page is None:
                self.log.warning("formgrader page of submission %s: no page within %.1f s", submission_id,
                                 time.monotonic() - start)
                page = over_budget_page(resources, seconds)
            self.write(page)

    return BoundedSubmissionHandler


def _assignment_handler_class():
    from nbgrader.server_extensions.formgrader import apihandlers

    from rlhf_course.course.settings import Course
    from rlhf_course.exchange.deadlines import PublishError, publish

    class PublishingAssignmentHandler(apihandlers.AssignmentHandler):
        """nbgrader's (its checks, the gradebook's new due date), then that date into the exchange."""

        def put(self, assignment_id):
            super().put(assignment_id)
            assignment_id = assignment_id.strip()
            root, course_id = self.api.exchange_root, self.coursedir.course_id
            if not (root and course_id and os.path.isdir(os.path.join(root, course_id, "outbound", assignment_id))):
                return  # not released: the release will publish it
            try:
                for line in publish(Course.at(self.coursedir.root, self.coursedir.config), root, course_id, [assignment_id],
                                    self.log):
                    self.log.info("rlhf_course: %s", line)
            except (PublishError, OSError) as exc:  # the gradebook has the date; students do not see it yet
                self.log.warning("rlhf_course: the due date of %s is not in the exchange: %s", assignment_id, exc)

    return PublishingAssignmentHandler


def _folding_api_class():
    from pathlib import Path

    from nbgrader.apps.api import NbGraderAPI

    from rlhf_course.course.settings import Course
    from rlhf_course.grading.gradebook.lms_export import grade_table, offered, totals

    class EditionsFoldedAPI(NbGraderAPI):
        """nbgrader's API, each student's ``score`` and ``max_score`` with the editions folded
        (:func:`~rlhf_course.grading.gradebook.lms_export.totals`), over the assignments students were given, as the
        LMS export counts them (:func:`~rlhf_course.grading.gradebook.lms_export.offered`: one only recorded by
        `make release` adds nothing to the maximum); a student only in submitted/ (not in the gradebook) keeps
        nbgrader's 0 / 0."""

        def get_students(self):
            return self._folded(super().get_students())

        def get_student(self, student_id, submitted=None):
            student = super().get_student(student_id, submitted)
            return None if student is None else self._folded([student])[0]

        def _folded(self, students: list[dict]) -> list[dict]:
            course = Course.at(Path(self.coursedir.root), self.coursedir.config)
            with self.gradebook as gradebook:
                folded = totals(grade_table(gradebook, course, offered(gradebook, course)[0]))
            for student in students:
                if student["id"] in folded:
                    student["score"], student["max_score"] = folded[student["id"]]
            return students

    return EditionsFoldedAPI


def _student_handler_classes():
    """nbgrader's students API handlers (the Students page's rows, one student's row after an edit), answering
    through :func:`_folding_api_class`."""
    from nbgrader.server_extensions.formgrader import apihandlers

    api_class = _folding_api_class()

    class FoldedEditions:
        @property
        def api(self):  # nbgrader's BaseApiHandler.api, with the course's API class
            level = self.log.level
            self.coursedir.parent.load_config_file()
            api = api_class(self.coursedir, self.authenticator, parent=self.coursedir.parent)
            api.log_level = level
            return api

    class FoldedStudentCollectionHandler(FoldedEditions, apihandlers.StudentCollectionHandler):
        pass

    class FoldedStudentHandler(FoldedEditions, apihandlers.StudentHandler):
        pass

    return FoldedStudentCollectionHandler, FoldedStudentHandler


def _jupyter_server_extension_points():
    return [{"module": "rlhf_course.grading.pages.formgrader_pages"}]


def _load_jupyter_server_extension(serverapp):
    if not serverapp.jpserver_extensions.get(FORMGRADER):
        return  # a student's server: no Formgrader, nothing to serve
    from jupyter_server.utils import url_path_join
    from tornado.routing import HostMatches, Rule
    from tornado.web import _ApplicationRouter

    webapp = serverapp.web_app
    pattern = url_path_join(webapp.settings["base_url"], r"/formgrader/submissions/([^/]+)/?")
    # Ahead of every other rule, whichever extension loaded first: this path is served here only.
    assignment_api = url_path_join(webapp.settings["base_url"], r"/formgrader/api/assignment/([^/]+)/?")
    students, student = _student_handler_classes()
    webapp.default_router.rules.insert(0, Rule(HostMatches(".*$"), _ApplicationRouter(webapp, [
        (pattern, _handler_class(FormgraderPages(config=serverapp.config).render_seconds)),
        (assignment_api, _assignment_handler_class()),
        (url_path_join(webapp.settings["base_url"], r"/formgrader/api/students/?"), students),
        (url_path_join(webapp.settings["base_url"], r"/formgrader/api/student/([^/]+)/?"), student)])))
    serverapp.log.info("rlhf_course: the Formgrader's grading pages render in a bounded child process")
    recovering = _recovering_from_database_errors(webapp.default_router)
    serverapp.log.info("rlhf_course: %d Formgrader handlers recover from a dropped gradebook connection", recovering)


def _recovering_from_database_errors(router) -> int:
    """Give every Formgrader handler routed by ``router`` (and the routers within it) the course's recovery from
    a dropped gradebook connection (:class:`~rlhf_course.grading.pages.formgrader_database.GradebookRecovery`);
    the number of handlers given it."""
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    from rlhf_course.grading.pages.formgrader_database import GradebookRecovery, recovering
    given = 0
    for rule in router.rules:
        target = rule.target
        if isinstance(target, type) and issubclass(target, BaseHandler):
            if not issubclass(target, GradebookRecovery):
                rule.target = recovering(target)
                given += 1
        elif hasattr(target, "rules"):
            given += _recovering_from_database_errors(target)
    return given
