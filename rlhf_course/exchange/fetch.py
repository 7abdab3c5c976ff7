"""A student's commands that only read the exchange (fetch_assignment, fetch_feedback, list): a root they
may read and traverse is enough (stock nbgrader insists on one they can write).  ``nbgrader list`` and the
Assignment List (which lists through the same class) show each assignment's deadline as the exchange holds it,
with the student's own extension (:mod:`rlhf_course.exchange.deadlines`), and say of each submission whether it
was on time.  ``nbgrader fetch_feedback`` (and the Assignment List's Fetch Feedback) says when there is no feedback to
fetch, and why, rather than nothing."""
from __future__ import annotations

import contextvars
import datetime as dt
import glob
import os

from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeList
from nbgrader.utils import get_username, parse_utc

from rlhf_course import i18n
from rlhf_course.exchange import deadlines
from rlhf_course.exchange.base import PrintableNames, TraversableRoot
from rlhf_course.exchange.submit import replaced_edition


class StrictExchangeFetchAssignment(PrintableNames, TraversableRoot, ExchangeFetchAssignment):
    pass


NOT_SUBMITTED = ("No feedback for {assignment}: you have not submitted it from this account. Feedback comes after you "
                 "submit, once your instructor has graded the submission and released its feedback.")
NOT_YET = ("No feedback for {assignment} yet: your instructor releases it after grading; your submission of {when} is "
           "kept.")
NOT_FOR_THE_LATEST = ("Fetched the feedback on your {assignment} submission of {fetched} (in {folder}). Your latest "
                      "submission, of {latest}, has no feedback yet: your instructor releases it after grading.")
# What the latest fetch_feedback of this context told the student, {"language": ..., "text": ...} or None: the
# Assignment List shows it (rlhf_course/classroom/submit_refusal.py); nbgrader's manager keeps no exchange to ask.
FEEDBACK_NOTICE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("feedback_notice", default=None)


class StrictExchangeFetchFeedback(PrintableNames, TraversableRoot, ExchangeFetchFeedback):
    """Stock nbgrader fetches nothing and succeeds, saying only "Could not find feedback" per notebook (and before
    any feedback is released to anyone, fails with "Assignment not found at .../feedback").  Here, in the edition's
    language: nothing submitted, or no feedback yet for any submission, is an error naming which (nothing was
    fetched: a script that goes on to read the feedback stops here); feedback for an earlier submission but not
    the latest is fetched, with a warning naming both."""

    def start(self):
        FEEDBACK_NOTICE.set(None)
        return super().start()

    def init_src(self):
        if self.coursedir.course_id and not os.path.isdir(os.path.join(self.root, self.coursedir.course_id,
                                                                       "feedback")):
            self.feedback_files = []  # none released to anyone yet: nbgrader's "Assignment not found" misleads
        else:
            super().init_src()
        self.tell_what_is_missing()

    def tell_what_is_missing(self) -> str | None:
        """The sentence for a fetch that finds no feedback for the latest submission (an error when nothing is
        fetched), or None when it does."""
        assignment = self.coursedir.assignment_id
        submitted = _by_time(_submission_times(os.path.join(self.cache, self.coursedir.course_id), assignment))
        fetched = _by_time(timestamp for _, timestamp, _ in self.feedback_files)
        if submitted and fetched and fetched[-1][0] >= submitted[-1][0]:
            return None
        deadline = deadlines.read(self.root, self.coursedir.course_id, assignment, get_username())
        language = deadline.language if deadline is not None else i18n.ENGLISH
        if not submitted:
            sentence = i18n.t(NOT_SUBMITTED, language, assignment=assignment)
        elif not fetched:
            sentence = i18n.t(NOT_YET, language, assignment=assignment, when=deadlines.shown(submitted[-1][0]))
        else:
            folder = os.path.join(os.path.relpath(self.dest_folder(), self.assignment_dir), fetched[-1][1])
            sentence = i18n.t(NOT_FOR_THE_LATEST, language, assignment=assignment, folder=folder,
                              fetched=deadlines.shown(fetched[-1][0]), latest=deadlines.shown(submitted[-1][0]))
        FEEDBACK_NOTICE.set({"language": language, "text": sentence})
        if not fetched:
            self.fail(sentence)
        self.log.warning(sentence)
        return sentence

    def dest_folder(self) -> str:
        """Where the feedback goes (nbgrader's init_dest computes it later): ``<assignment>/feedback``."""
        parts = (self.coursedir.course_id,) if self.path_includes_course else ()
        return os.path.abspath(os.path.join(self.assignment_dir, *parts, self.coursedir.assignment_id, "feedback"))


def _submission_times(cache: str, assignment: str) -> list[str]:
    """The timestamps of the submissions of ``assignment`` in nbgrader's submit cache (the folders stock
    fetch_feedback looks in: ``<student>+<assignment>+<timestamp>``)."""
    names = (os.path.basename(path).split("+")
             for path in glob.glob(os.path.join(glob.escape(cache), f"*+{glob.escape(assignment)}+*")))
    return [parts[2] for parts in names if len(parts) == 3]


def _by_time(timestamps) -> list[tuple[dt.datetime, str]]:
    """``(UTC time, nbgrader's timestamp)`` for each distinct timestamp, oldest first; ones that do not parse are
    skipped."""
    parsed = {}
    for timestamp in timestamps:
        try:
            parsed[parse_utc(timestamp)] = timestamp
        except (ValueError, OverflowError):
            continue
    return sorted(parsed.items())


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
