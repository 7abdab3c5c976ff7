"""The Formgrader's grading page, rendered off the instructor's Jupyter server: a Jupyter server
extension that serves ``/formgrader/submissions/<id>/`` in place of nbgrader's handler, which renders
the autograded copy with nbconvert inside the server's one event loop (a slow page held every other
request of the server, ``/api/status`` included).

Here the page is rendered by the same exporter (nbgrader's, with the course's configuration: the
sanitiser, the course's lexer, the course's page additions) in a child process forked from
:mod:`page_process`'s forkserver (nbconvert loaded); the server awaits it without blocking, and kills it at
``c.FormgraderPages.render_seconds``.  Over the budget the instructor gets a short page saying so, with a link to
the notebook; the server never stops answering.

A due date changed in the Formgrader (its assignment API's PUT, nbgrader's own handler) is then put into the
exchange when the assignment is released there, where students read it (:mod:`rlhf_course.exchange.deadlines`),
as ``python -m rlhf_course.grading publish-deadlines`` does.

Enabled by ``jupyter_server_config.d/rlhf_course.json`` (``make`` installs it in the course's venv);
it does nothing in a server without nbgrader's Formgrader (students' servers).
"""
from __future__ import annotations

import asyncio
import html
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
            f"<p>Its scores are in the gradebook; the submission is flagged for review. "
            f"<a href='{resources.get('base_url', '')}/lab/tree/{notebook}'>Open the notebook</a> to read it.</p>"
            f"</body></html>")


def _handler_class(seconds: float):
    from nbgrader.api import MissingEntry
    from nbgrader.server_extensions.formgrader import handlers
    from nbgrader.server_extensions.formgrader.base import check_notebook_dir, check_xsrf
    from tornado import web

    class BoundedSubmissionHandler(handlers.SubmissionHandler):
        """nbgrader's grading page, rendered in a child process the server awaits."""

        @web.authenticated
        @check_xsrf
        @check_notebook_dir
        async def get(self, submission_id):
            try:
                submission = self.gradebook.find_submission_notebook_by_id(submission_id)
                assignment, notebook = submission.assignment.assignment.name, submission.notebook.name
                student = submission.student
            except MissingEntry:
                raise web.HTTPError(404, f"Invalid submission: {submission_id}")
            if not self.request.path.endswith("/"):
                query = f"?{self.request.query}" if self.request.query else ""
                return self.redirect(self.request.path + "/" + query, permanent=True)
            folder = self.coursedir.format_path(self.coursedir.autograded_directory, student.id, assignment)
            filename = os.path.join(os.path.abspath(folder), f"{notebook}.ipynb")
            indices = self.api.get_notebook_submission_indices(assignment, notebook)
            resources = {
                "assignment_id": assignment, "notebook_id": notebook, "submission_id": submission.id,
                "index": indices.get(submission.id, -2), "total": len(indices), "base_url": self.base_url,
                "student": student.id, "last_name": student.last_name, "first_name": student.first_name,
                "notebook_path": self.url_prefix + "/" + os.path.relpath(filename, self.coursedir.root)}
            if not os.path.exists(filename):
                resources["filename"] = filename
                self.set_status(404)
                return self.write(self.render("formgrade_404.tpl", resources=resources))
            start = time.monotonic()
            page = await asyncio.get_running_loop().run_in_executor(
                None, render_bounded, _exporter_config(self.exporter), filename, resources, seconds)
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
    webapp.default_router.rules.insert(0, Rule(HostMatches(".*$"), _ApplicationRouter(webapp, [
        (pattern, _handler_class(FormgraderPages(config=serverapp.config).render_seconds)),
        (assignment_api, _assignment_handler_class())])))
    serverapp.log.info("rlhf_course: the Formgrader's grading pages render in a bounded child process")
