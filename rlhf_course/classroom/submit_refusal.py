"""A refused Submit, as the Assignment List shows it: the exchange's sentence, not a Python traceback.

nbgrader's server answers a failed Submit with the whole traceback (``traceback.format_exc()``), which its
labextension shows in an unwrapped ``<pre>`` under "Assignment not submitted:": the student reads dozens of lines of
the server's code, and the course's sentence (rlhf_course/exchange/submit.py's, in the edition's language: what
happened, that the earlier submission stays, what to do) is the last line, cut at the dialog's right edge.  This
handler answers the same request as nbgrader's, through nbgrader's own code, with only that sentence, wrapped to
fit the dialog.  Any other failure (not the exchange's refusal) keeps nbgrader's traceback.

Fetch Feedback: nbgrader's handler discards what fetching said and answers with the list, so a fetch with nothing to
fetch looked like one that worked.  Here the list's answer also carries ``notice``, ``{"title": ..., "text": ...}``:
the course exchange's sentence (rlhf_course/exchange/fetch.py: nothing submitted, no feedback released yet, or
feedback only for an earlier submission, in the edition's language) or another refusal of the exchange's; the
course's labextension shows it in a dialog (nbgrader's own ignores the key).

Routed by :mod:`rlhf_course.classroom.validate_extension`, the course's extension of every student's server.
"""
from __future__ import annotations

import unicodedata

from nbgrader.server_extensions.assignment_list.handlers import AssignmentActionHandler
from tornado import web

from rlhf_course import i18n
from rlhf_course.exchange.fetch import FEEDBACK_NOTICE

ACTIONS = r"/assignments/(?P<action>fetch|submit|fetch_feedback)"  # nbgrader's route for the three, as it names it
EXCHANGE_ERROR = "nbgrader.exchange.abc.exchange.ExchangeError: "  # how the traceback names a refusal
COLUMNS = 80  # the dialog's <pre> shows about 110 columns at its narrowest (1100 px wide); 80 leaves a margin


def refusal(traceback_text: str) -> str | None:
    """The exchange's sentence at the end of a formatted traceback, or None when the failure was another
    exception (the traceback is then worth showing)."""
    head, found, message = traceback_text.rpartition(EXCHANGE_ERROR)
    if not found or (head and not head.endswith("\n")):
        return None
    return message.strip() or None


def _columns(text: str) -> int:
    """Display columns of ``text``: two for a wide (CJK) character, one for any other."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


CLOSING = "，。、；：！？）」』》" + ",.;:!?)"  # never first on a line (Chinese typesetting's rule, and English's)


def _break_before(line: str, at: int, following: str) -> bool:
    """May a line break before ``line[at]`` (``following`` when ``at`` is the end)?  After a space, or beside a
    wide character (Chinese breaks between any two characters), never before closing punctuation; never inside
    a word or a file name."""
    after = line[at] if at < len(line) else following
    if after in CLOSING:
        return False
    return line[at - 1] == " " or _columns(line[at - 1]) == 2 or _columns(after) == 2


def wrapped(text: str, columns: int = COLUMNS) -> str:
    """``text`` broken into lines of at most ``columns`` display columns where it may break (:func:`_break_before`);
    a word longer than a line stays whole; its own line breaks are kept."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for character in paragraph:
            if line and _columns(line + character) > columns:
                at = next((i for i in range(len(line), 0, -1) if _break_before(line, i, character)), 0)
                if at:
                    lines.append(line[:at].rstrip())
                    line = line[at:].lstrip()
                    if not line and character == " ":
                        continue
            line += character
        lines.append(line.rstrip())
    return "\n".join(lines)


class _PlainRefusals:
    """nbgrader's assignment list manager, whose failed Submit says the exchange's sentence alone, and whose list
    after a Fetch Feedback says what the fetch told the student (one per request: the handler calls
    ``fetch_feedback`` then ``list_assignments``)."""

    def __init__(self, manager):
        self._manager = manager
        self._feedback_notice: dict | None = None

    def __getattr__(self, name):
        return getattr(self._manager, name)

    def submit_assignment(self, course_id, assignment_id) -> dict:
        output = self._manager.submit_assignment(course_id, assignment_id)
        if not output.get("success") and (said := refusal(str(output.get("value", "")))):
            output = {**output, "value": wrapped(said)}
        return output

    def fetch_feedback(self, course_id, assignment_id) -> dict:
        FEEDBACK_NOTICE.set(None)  # a context outlives a request (a kept-alive connection's)
        output = self._manager.fetch_feedback(course_id, assignment_id)
        told = FEEDBACK_NOTICE.get()
        if told is None and not output.get("success") and (said := refusal(str(output.get("value", "")))):
            told = {"language": i18n.ENGLISH, "text": said}  # nbgrader's or the course's other refusals: English
        if told is not None:
            self._feedback_notice = {"title": i18n.t("Feedback for {assignment}", told["language"],
                                                     assignment=assignment_id), "text": told["text"]}
        return output

    def list_assignments(self, course_id=None) -> dict:
        listed = self._manager.list_assignments(course_id=course_id)
        notice, self._feedback_notice = self._feedback_notice, None
        return {**listed, "notice": notice} if notice else listed


class PlainRefusalActionHandler(AssignmentActionHandler):
    """nbgrader's fetch / submit / fetch_feedback handler, answering through :class:`_PlainRefusals`."""

    @property
    def manager(self):
        manager = self.settings.get("assignment_list_manager")
        if manager is None:  # nbgrader's Assignment List is not enabled in this server
            raise web.HTTPError(404)
        if getattr(self, "_plain_refusals", None) is None:
            self._plain_refusals = _PlainRefusals(manager)
        return self._plain_refusals
