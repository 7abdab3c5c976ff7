"""A student's commands that only read the exchange (fetch_assignment, fetch_feedback, list): a root they
may read and traverse is enough (stock nbgrader insists on one they can write).  ``nbgrader list`` and the
Assignment List (which lists through the same class) show each assignment's deadline as the exchange holds it,
with the student's own extension (:mod:`rlhf_course.exchange.deadlines`), and say of each submission whether it
was on time."""
from __future__ import annotations

import os

from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeList
from nbgrader.utils import get_username, parse_utc

from rlhf_course import i18n
from rlhf_course.exchange import deadlines
from rlhf_course.exchange.base import PrintableNames, TraversableRoot
from rlhf_course.exchange.submit import replaced_edition


class StrictExchangeFetchAssignment(PrintableNames, TraversableRoot, ExchangeFetchAssignment):
    pass


class StrictExchangeFetchFeedback(PrintableNames, TraversableRoot, ExchangeFetchFeedback):
    pass


class StrictExchangeList(PrintableNames, TraversableRoot, ExchangeList):
    """Each assignment's info gains ``deadline`` (:meth:`~deadlines.Deadline.as_json`, or None), each
    submission's ``lateness`` (the sentence the student was told on submit), and ``nbgrader list`` prints them.
    A fetched assignment's info gains ``replaces`` (:func:`~rlhf_course.exchange.submit.replaced_edition`: what
    submitting it now would replace, the sentence submit warns with, or None), which the Assignment List shows
    beside its Submit button.
    An exchange not made yet (nothing released) lists nothing and says so, in English and Chinese, rather than
    failing: the Assignment List then shows the course's sentence, not nbgrader's three errors."""

    def ensure_root(self):
        if not os.path.exists(self.root):
            from rlhf_course.exchange.local import NOTHING_RELEASED
            for language in deadlines.LANGUAGES:
                self.log.info(i18n.t(NOTHING_RELEASED, language))
            return
        super().ensure_root()

    def _deadline(self, info: dict) -> deadlines.Deadline | None:
        key = (info["course_id"], info["assignment_id"])
        cache = self.__dict__.setdefault("_deadlines", {})
        if key not in cache:
            cache[key] = deadlines.read(self.root, *key, get_username())
        return cache[key]

    def parse_assignments(self):
        assignments = super().parse_assignments()
        for info in assignments:
            deadline = self._deadline(info)
            info["deadline"] = deadline.as_json() if deadline else None
            if info.get("status") == "fetched":  # the rows with a Submit button
                info["replaces"] = replaced_edition(self.root, info["course_id"], info["assignment_id"],
                                                    os.path.join(self.cache, info["course_id"]), get_username())
            for submission in info.get("submissions", []):
                submission["deadline"] = info["deadline"]
                submission["lateness"] = self._lateness(deadline, submission)
        return assignments

    def format_outbound_assignment(self, info):
        deadline = self._deadline(info)
        line = super().format_outbound_assignment(info)
        return f"{line} [{deadline.sentence()}]" if deadline and deadline.due else line  # no "[no due date]"

    def format_inbound_assignment(self, info):
        lateness = self._lateness(self._deadline(info), info)
        line = super().format_inbound_assignment(info)
        return f"{line} [{lateness['text'][lateness['language']]}]" if lateness else line


    @staticmethod
    def _lateness(deadline: deadlines.Deadline | None, submission: dict) -> dict | None:
        """Whether one's own submission was on time (an instructor listing inbound sees others' entries: their
        extensions are not the instructor's to read here, so nothing is said of them)."""
        if submission.get("student_id") not in (None, get_username()):
            return None
        return _lateness(deadline, submission.get("timestamp"))


def _lateness(deadline: deadlines.Deadline | None, timestamp: str | None) -> dict | None:
    """Whether a submission made at ``timestamp`` (nbgrader's, from the entry) was on time, in both languages."""
    if deadline is None or deadline.due is None or not timestamp:
        return None
    try:
        when = parse_utc(timestamp)
    except (ValueError, OverflowError):
        return None
    return {"seconds_late": max(deadline.seconds_late(when), 0.0), "language": deadline.language,
            "text": {language: deadline.verdict(when, language) for language in deadlines.LANGUAGES}}
