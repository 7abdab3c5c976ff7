"""The Formgrader's grading page is nbgrader's handler with one change (rlhf_course/grading/pages/formgrader_pages.py):
its render goes to a child process.  Whatever nbgrader's ``SubmissionHandler.get`` does (here a stand-in for a
newer nbgrader's) runs as it is; only what it asks its exporter to render is rendered elsewhere."""
from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from nbgrader.server_extensions.formgrader import handlers
from tornado import httputil, web

from rlhf_course.grading.pages import formgrader_pages


def _named_render(config, filename, resources, seconds) -> str:
    """The child process's render stood in for by a page naming what it was asked."""
    return f"<{config}: {filename} {resources}>"


def _served(nbgrader_get, render_bounded=_named_render, seconds: float = 1.0) -> tuple[bytes, web.RequestHandler]:
    """What the course's handler, with a render budget of ``seconds``, writes for submission 7 when nbgrader's
    ``get`` is ``nbgrader_get`` and the child process's render is ``render_bounded``."""
    app = web.Application(nbgrader_exporter="nbgrader's exporter")
    start = httputil.RequestStartLine("GET", "/formgrader/submissions/7/", "HTTP/1.1")
    request = httputil.HTTPServerRequest(start_line=start, headers=httputil.HTTPHeaders({"Host": "localhost"}),
                                         connection=mock.Mock())
    with mock.patch.object(handlers.SubmissionHandler, "get", nbgrader_get), \
            mock.patch.object(formgrader_pages, "_exporter_config", lambda exporter: exporter), \
            mock.patch.object(formgrader_pages, "render_bounded", render_bounded):
        handler = formgrader_pages._handler_class(seconds)(app, request)
        asyncio.run(handler.get("7"))
    return b"".join(handler._write_buffer), handler


def test_nbgrader_s_handler_runs_and_only_its_render_is_deferred():
    def newer_get(self, submission_id):
        html, _ = self.exporter.from_filename(f"/course/autograded/{submission_id}.ipynb",
                                              resources={"submission_id": submission_id})
        self.set_header("X-Nbgrader", "a newer handler")
        self.write(html)

    page, handler = _served(newer_get)
    assert page == b"<nbgrader's exporter: /course/autograded/7.ipynb {'submission_id': '7'}>"
    assert handler._headers["X-Nbgrader"] == "a newer handler"


@pytest.mark.parametrize("status", [301, 404])
def test_what_nbgrader_answers_without_a_render_is_the_answer(status):
    def answers_itself(self, submission_id):
        self.set_status(status)
        self.write(f"nbgrader's {status} page")

    page, handler = _served(answers_itself)
    assert page == f"nbgrader's {status} page".encode() and handler.get_status() == status


def test_a_page_out_of_time_says_how_to_get_it_and_claims_no_flag():
    """Over its budget (a busy machine: 24 s for a page's first render at load 8 on 2 cores) the instructor reads
    what to do, and nothing the server did not do: it flags nothing."""
    def asks_for_a_page(self, submission_id):
        html, _ = self.exporter.from_filename(f"/course/autograded/{submission_id}.ipynb",
                                              resources={"notebook_path": "autograded/ada/rlhf/x.ipynb"})
        self.write(html)

    served, _ = _served(asks_for_a_page, render_bounded=lambda config, filename, resources, seconds: None, seconds=2.5)
    page = served.decode()
    assert "did not render within 2.5 s" in page
    assert "flagged" not in page
    assert "reload this page" in page and "c.FormgraderPages.render_seconds" in page
    assert "/lab/tree/autograded/ada/rlhf/x.ipynb" in page
