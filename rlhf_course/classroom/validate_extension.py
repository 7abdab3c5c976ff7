"""The Validate button of a student's JupyterLab, served by the course (a Jupyter server extension, enabled by
jupyter/server/rlhf_course.json for `make lab` and every server of `make hub`).

nbgrader's labextension posts the notebook's path to ``/assignments/validate`` and shows the JSON it gets back.
nbgrader's own handler answers it with its Validator, inside the request: wall-clock limits (a busy machine fails
correct work) and the server's event loop blocked until the notebook has run (the student's other tabs freeze).
This handler answers the same request, in the same JSON, with :class:`PatientValidator` (limits in the kernel's
own CPU-seconds, rlhf_course/classroom/patient_validate.py), in a thread, one Validate of the server at a time
(nbgrader's Validator sets process-wide variables while it runs), and on the hub in turn with the class's other
Validates, K at a time (rlhf_course/classroom/validate_queue.py).  While it waits,
``GET /rlhf-course/validate-status`` says so in both languages ({"busy": true, "text": {"en": ..., "zh-CN": ...}});
the course's labextension shows that text beside the Validate button and the Assignment List's.  ``GET
/rlhf-course/messages``: the labextension's other sentences (a kernel still starting), in both languages.
An answer listing cells grading takes from the release carries their headings (``taken_from_release``), which the
labextension shows in place of nbgrader's "changed, but it should not have" line; an answer for a notebook of an
edition in another language than English carries nbgrader's dialog lines in that language (``nbgrader_lines``), which
the labextension shows in place of nbgrader's English ("Validation Results", "The following cell failed:", ...).

The Assignment List's fetch / submit requests are answered by nbgrader's own handler through
:mod:`rlhf_course.classroom.submit_refusal`: a Submit the exchange refuses shows its sentence, not a traceback, and a
Fetch Feedback with nothing to fetch says why.

The route is put ahead of every other rule, whichever extension loaded first (as formgrader_pages does).
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import threading
import time
import traceback
from pathlib import Path

from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler
from tornado import web

from rlhf_course.classroom.patient_validate import PatientValidator
from rlhf_course.classroom.submit_refusal import ACTIONS, PlainRefusalActionHandler
from rlhf_course.classroom.validate_queue import ValidateQueue, validate_turn
from rlhf_course.i18n import CHINESE, ENGLISH, t

WAITING_FOR_ANOTHER = "Validate is waiting for your other Validate to finish."
KERNEL_STARTING = ("The kernel is still starting: the class is busy. Your cells run once it is ready; nothing is "
                   "wrong with your notebook.")
MESSAGES = {"kernel_starting": KERNEL_STARTING}  # what the course's labextension shows, by its key
STARTING = "Validate is starting a kernel for {notebook}."
# An answer whose "changed" cells are the ones grading takes from the release also carries, under this key, the
# heading of each (in the edition's language, as its notice): the course's labextension shows them in the dialog in
# place of nbgrader's "The source of the following cell has changed, but it should not have!"
TAKEN_FROM_RELEASE = "taken_from_release"
# nbgrader's labextension writes its Validate dialog's title and lines in English whatever the notebook: an answer
# for an edition in another language carries them in that language under this key ({English: the edition's}), which
# the course's labextension puts in their place once the dialog is open
NBGRADER_LINES = "nbgrader_lines"
DIALOG_LINES = ("Validation Results", "Success! Your notebook passes all the tests.", "The following cell failed:")


class ValidateStatus:
    """What this server's Validate is doing, for the status endpoint (one per server; thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._english, self._fields, self._busy, self._since = "", {}, False, 0.0

    def say(self, english: str, fields: dict | None = None) -> None:
        with self._lock:
            self._english, self._fields, self._busy, self._since = english, dict(fields or {}), True, time.time()

    def done(self) -> None:
        with self._lock:
            self._english, self._fields, self._busy = "", {}, False

    def as_json(self) -> dict:
        with self._lock:
            text = {language: t(self._english, language, **self._fields) if self._english else ""
                    for language in (ENGLISH, CHINESE)}
            return {"busy": self._busy, "text": text, "since": self._since}


class PatientValidateHandler(ValidateAssignmentHandler):
    """nbgrader's Validate request, answered by :class:`PatientValidator` off the event loop."""

    @property
    def status(self) -> ValidateStatus:
        return self.settings["rlhf_validate_status"]

    @property
    def one_at_a_time(self) -> asyncio.Lock:
        return self.settings["rlhf_validate_lock"]

    @property
    def validate_queue(self) -> ValidateQueue | None:
        return self.settings.get("rlhf_validate_queue")

    def validate_notebook(self, path):  # nbgrader's handler calls it; its errors are reported as nbgrader's are
        root = Path(self.root_dir).resolve()
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            raise web.HTTPError(403, "Access denied: path outside allowed directory")
        with validate_turn(self.validate_queue, self.status.say):  # the class's turn, before a kernel starts
            self.status.say(STARTING, {"notebook": target.name})
            try:
                validator = PatientValidator(config=self.load_config(), on_wait=self.status.say)
                answer = {"success": True, "value": validator.validate(str(target))}
                if validator.told_restored:  # nbgrader's labextension reads only "success" and "value"
                    answer[TAKEN_FROM_RELEASE] = validator.restored_headings
                if validator.language != ENGLISH:
                    answer[NBGRADER_LINES] = {line: t(line, validator.language) for line in DIALOG_LINES}
                return answer
            except Exception:
                self.log.error(traceback.format_exc())
                return {"success": False, "value": traceback.format_exc()}

    @web.authenticated
    async def post(self):
        try:
            path = self.get_argument("path")
        except web.MissingArgumentError:
            path = self.get_json_body()["path"]
        if self.one_at_a_time.locked():
            self.status.say(WAITING_FOR_ANOTHER)
        async with self.one_at_a_time:
            try:
                # a fresh context: nbclient's run_sync finds its event loop in a context variable, which would be
                # this server's running loop in a copy of this context (asyncio.to_thread's)
                in_fresh_context = functools.partial(contextvars.Context().run, self.validate_notebook, path)
                output = await asyncio.get_running_loop().run_in_executor(None, in_fresh_context)
            finally:
                self.status.done()
        self.finish(json.dumps(output))


def _status_handler():
    from jupyter_server.base.handlers import APIHandler

    class StatusHandler(APIHandler):
        @web.authenticated
        def get(self):
            self.finish(json.dumps(self.settings["rlhf_validate_status"].as_json()))

    return StatusHandler


def _messages_handler():
    from jupyter_server.base.handlers import APIHandler

    class MessagesHandler(APIHandler):
        @web.authenticated
        def get(self):
            self.finish(json.dumps({key: {language: t(english, language) for language in (ENGLISH, CHINESE)}
                                    for key, english in MESSAGES.items()}))

    return MessagesHandler


def _jupyter_server_extension_points():
    return [{"module": "rlhf_course.classroom.validate_extension"}]


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join
    from tornado.routing import HostMatches, Rule
    from tornado.web import _ApplicationRouter

    webapp = serverapp.web_app
    webapp.settings["rlhf_validate_status"] = ValidateStatus()
    webapp.settings["rlhf_validate_lock"] = asyncio.Lock()
    webapp.settings["rlhf_validate_queue"] = ValidateQueue.from_environment()  # the hub's (none on a laptop)
    base = webapp.settings["base_url"]
    webapp.settings.setdefault("root_dir", serverapp.root_dir)  # nbgrader's handler reads it
    webapp.default_router.rules.insert(0, Rule(HostMatches(".*$"), _ApplicationRouter(webapp, [
        (url_path_join(base, r"/assignments/validate"), PatientValidateHandler),
        (url_path_join(base, r"/rlhf-course/validate-status"), _status_handler()),
        (url_path_join(base, r"/rlhf-course/messages"), _messages_handler()),
        (url_path_join(base, ACTIONS), PlainRefusalActionHandler)])))
    serverapp.log.info("rlhf_course: Validate waits for a busy machine (limits in the kernel's CPU-seconds)")
