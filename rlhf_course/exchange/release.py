"""The instructor's side of nbgrader's release commands: release_assignment publishes only what `make release`
generated (:mod:`rlhf_course.course.release_manifest`: no edited notebook, no solution, no hidden test), keeps the
root 0755 and inbound sticky, records the configured due date where the gradebook has none, and puts the
assignment's deadline (the gradebook's due date, every student's extension) into the exchange
(:mod:`rlhf_course.exchange.deadlines`); release_feedback reads the root without writing to it, after the check the
course's configuration names (``before_release``).  A course other accounts on this machine could read is not
released to an exchange outside it (:mod:`rlhf_course.course.private_files`): its students could read the solutions."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from nbgrader.exchange.default import ExchangeReleaseAssignment, ExchangeReleaseFeedback
from traitlets import DottedObjectName
from traitlets.utils.importstring import import_item

from rlhf_course.course.settings import Course
from rlhf_course.exchange.base import PrintableNames, ROOT_MODE, TraversableRoot


class StrictExchangeReleaseAssignment(PrintableNames, ExchangeReleaseAssignment):
    def init_src(self):
        super().init_src()
        from rlhf_course.course import release_manifest
        assignment = self.coursedir.assignment_id
        release_folder = Path(os.path.normpath(self.src_path)).parent
        source_folder = Path(os.path.normpath(
            self.coursedir.format_path(self.coursedir.source_directory, ".", assignment))).parent
        reasons = release_manifest.problems(release_folder, source_folder, assignment, list(self.coursedir.ignore))
        if reasons:
            self.fail(f"{assignment} is not released: " + "; ".join(reasons))
        self.refuse_a_course_students_could_read()

    def refuse_a_course_students_could_read(self) -> None:
        """Before anything is copied: where students have accounts, a course they could read is refused."""
        from rlhf_course.course.private_files import exposure_reason
        from rlhf_course.course.settings import RlhfCourse
        if not RlhfCourse(config=self.config).students_share_this_machine:
            return
        if exposure := exposure_reason(Path(self.coursedir.root), Path(self.root)):
            self.fail(f"{self.coursedir.assignment_id} is not released: {exposure}  (Where no student can reach "
                      f"this machine's files, c.RlhfCourse.students_share_this_machine = False.)")

    def copy_files(self):
        course = Course.at(Path(self.coursedir.root), self.config)
        self.record_due_date(course)
        super().copy_files()
        from rlhf_course.exchange.deadlines import PublishError, publish
        try:
            said = publish(course, self.root, self.coursedir.course_id, [self.coursedir.assignment_id], self.log)
        except PublishError as exc:  # the assignment is released all the same; students see no due date
            self.log.warning("The deadline is not in the exchange: %s", exc)
            return
        for line in said:
            self.log.info(line)

    def record_due_date(self, course: Course) -> None:
        """The configured due date (c.RlhfCourse.due_dates / due_date) into the gradebook where it has none, as
        `make release` does: a course released straight from a checkout's committed release/ has its due date too."""
        from nbgrader.api import Gradebook

        from rlhf_course.course.due_dates import due_date_for, kept_date_note, record_due_date
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            record_due_date(gradebook, self.coursedir.assignment_id, due_date_for(course, self.coursedir.assignment_id))
            if note := kept_date_note(gradebook, course, self.coursedir.assignment_id):
                self.log.warning(note)

    def init_dest(self):
        super().init_dest()
        # Students may create entries in inbound (and not list it); the sticky bit stops them
        # renaming or deleting each other's entries, which a writable folder otherwise allows.
        mode = os.stat(self.inbound_path).st_mode
        if not mode & 0o1000:
            os.chmod(self.inbound_path, (mode & 0o7777) | 0o1000)

    def ensure_root(self):
        if not os.path.exists(self.root):
            self.log.warning("Creating exchange directory: %s", self.root)
            try:
                os.makedirs(self.root)
                os.chmod(self.root, ROOT_MODE)
            except PermissionError:
                self.fail(f"Could not create {self.root}, permission denied.")
        elif os.stat(self.root).st_mode & 0o002:  # tighten a world-writable root left by stock nbgrader
            try:
                os.chmod(self.root, ROOT_MODE)
            except PermissionError:
                self.fail(f"The exchange {self.root} is world-writable and cannot be changed.")


class StrictExchangeReleaseFeedback(PrintableNames, TraversableRoot, ExchangeReleaseFeedback):
    """nbgrader's release_feedback on the strict exchange.  Before copying, the function that
    ``before_release`` names (the course's configuration sets it: the grader's check that every page shows the
    gradebook's current grades) is called with this app; it may rewrite pages, or stop the release with
    :meth:`fail`.  The exchange names it by its dotted path and imports nothing of grading."""

    before_release = DottedObjectName(
        None, allow_none=True, help="A function called with this app before the pages are copied (None: none)"
    ).tag(config=True)

    def copy_files(self):
        if self.before_release:
            import_item(self.before_release)(self)
        said_right = _FinalPageName()
        self.log.addFilter(said_right)
        try:
            super().copy_files()
        finally:
            self.log.removeFilter(said_right)


class _FinalPageName(logging.Filter):
    """nbgrader's release_feedback copies a page to ``<hash>-tmp.html``, moves it to ``<hash>.html`` and then logs
    the temporary name: the log names the file it leaves in the exchange instead."""

    PREFIX, TEMPORARY = "Feedback released to: ", "-tmp.html"

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(self.PREFIX) and message.endswith(self.TEMPORARY):
            record.msg, record.args = message.removesuffix(self.TEMPORARY) + ".html", ()
        return True
