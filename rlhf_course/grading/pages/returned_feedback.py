"""A feedback page that is returned is the grade the gradebook holds now.

`make grade` writes each page with the scores of that moment; a person then grades the written answers (or
overrides a test's score) in the Formgrader, which changes the gradebook and not the page.  So every page is
written with its *grading record* beside it (:func:`rlhf_course.grading.pages.grading_record.keep_record`: the submission's result, the canonical copy of
its notebook and the copy as the grader ran it, and the grades the page shows), and the course's
``release_feedback`` (:class:`rlhf_course.exchange.release.StrictExchangeReleaseFeedback`, the Formgrader's
*Release feedback* too; :func:`before_release` is its ``before_release``) first rewrites every page whose grades
changed since (:func:`refresh_pages`): the gradebook's scores and comments put into the recorded result, the page
rendered again from the recorded notebooks.  No student code runs: nothing is graded again.  Then it writes
``grades.csv`` again from the gradebook (:func:`export_grades`): the file holds the grades being returned, not
those of the last `make grade`.  nbgrader's ``generate_feedback`` (the Formgrader's
*Generate Feedback* too) writes the same page through :class:`CourseFeedbackExporter`, never stock nbgrader's.

A page without a readable record (written by an older version of the course, or by hand) cannot be shown to
be current: the release is refused, naming the command that rewrites it (:class:`StalePages`).
"""
from __future__ import annotations

import json
from pathlib import Path

from nbconvert.exporters import Exporter
from traitlets import default

from rlhf_course.course.errors import CourseError
from rlhf_course.grading.pages.grading_record import page_grades, record_path
from rlhf_course.grading.results import SubmissionResult, result_from_dict
from rlhf_course.course.settings import Course


class StalePages(CourseError, RuntimeError):
    """Feedback pages that cannot be shown to hold the gradebook's grades: the message says which and what to run."""


def _read_record(path: Path) -> tuple[SubmissionResult, dict]:
    data = json.loads(path.read_text())
    return result_from_dict(data["result"]), data["shown"]


def read_records(course: Course, assignment: str, pages: list[tuple[str, str]]) -> list[tuple[SubmissionResult, dict]]:
    """The grading record of each page of ``assignment`` (``pages``: (student, notebook) pairs): each recorded
    result and the grades its page shows.  Raises :class:`StalePages` naming every page without a readable
    record and the command that writes them (before anything is rewritten or removed)."""
    records, unreadable = [], []
    for student, notebook in pages:
        path = record_path(course, student, assignment, notebook)
        try:
            records.append(_read_record(path))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = "no grading record" if isinstance(exc, OSError) else f"its grading record {path} is unreadable"
            unreadable.append(f"{student}'s {assignment}/{notebook.removesuffix('.ipynb')} ({why})")
    if unreadable:
        raise StalePages(
            "these feedback pages cannot be shown to hold the gradebook's current scores: " + "; ".join(unreadable)
            + f". Write them with `make grade ASSIGNMENT={assignment}` (as root), then try again.")
    return records


def _read_back(gb, result: SubmissionResult) -> None:
    from nbgrader.api import MissingEntry

    from rlhf_course.grading.gradebook.gradebook import read_back
    try:
        read_back(gb, result)
    except MissingEntry:
        raise StalePages(f"the gradebook has no submission of {result.student} for {result.assignment}: grade it "
                         f"with `make grade ASSIGNMENT={result.assignment}` (as root), then try again.") from None


def refresh_pages(course: Course, assignment: str, student: str = "*", log=None) -> list[str]:
    """Rewrite each feedback page of ``assignment`` (of ``student``, or everyone's) whose grades in the gradebook
    changed since it was written, from its grading record.  Returns one line per page rewritten.  Raises
    :class:`StalePages` (before rewriting anything) when a page has no readable record."""
    from nbgrader.api import Gradebook

    from rlhf_course.grading.pages.feedback import write_feedback

    pages = sorted(course.folder("feedback").glob(f"{student}/{assignment}/*.html"))
    records = read_records(course, assignment, [(page.parent.parent.name, page.stem) for page in pages])
    said = []
    with Gradebook(course.db_url) as gb:
        for result, shown in records:
            _read_back(gb, result)
            if page_grades(result) == shown:
                continue
            write_feedback(course, result)
            said.append(f"feedback for {result.student} on {assignment}/{result.notebook.removesuffix('.ipynb')} "
                        "rewritten with the gradebook's current grades (a person graded since `make grade`)")
            if log is not None:
                log.info(said[-1])
    return said


class CourseFeedbackExporter(Exporter):
    """The exporter of nbgrader's ``generate_feedback`` (the command, and the Formgrader's *Generate Feedback*),
    configured as ``c.GenerateFeedback.exporter_class``: each page is the course's, written by
    :func:`~rlhf_course.grading.pages.feedback.write_feedback` from the notebook's grading record with the gradebook's
    current grades, never stock nbgrader's.  nbgrader builds it before it removes any existing page: a
    notebook without a readable record stops it there (:class:`StalePages`), and every page stays as it was."""

    output_mimetype = "text/html"

    @default("file_extension")
    def _file_extension_default(self):
        return ".html"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        converter = self.parent
        self.course = Course.at(Path(converter.coursedir.root), converter.config)
        notebooks = [Path(name) for found in getattr(converter, "assignments", {}).values() for name in found]
        try:
            for assignment in sorted({path.parent.name for path in notebooks}):
                read_records(self.course, assignment, [(path.parent.parent.name, path.name)
                                                       for path in notebooks if path.parent.name == assignment])
        except StalePages as exc:
            self.log.error("No feedback generated: %s", exc)
            raise

    def from_filename(self, filename, resources=None, **kw):
        from nbgrader.api import Gradebook

        from rlhf_course.grading.pages.feedback import write_feedback
        path = Path(filename)
        [(result, _)] = read_records(self.course, path.parent.name, [(path.parent.parent.name, path.name)])
        with Gradebook(self.course.db_url) as gb:
            _read_back(gb, result)
        page = write_feedback(self.course, result)
        resources = dict(resources or {}, output_extension=self.file_extension)
        return page.read_text(), resources


def before_release(release) -> None:
    """``c.StrictExchangeReleaseFeedback.before_release``: the pages ``release`` (nbgrader's release_feedback app)
    is about to copy rewritten where a person's grade changed since; none released when one cannot be shown to
    be current."""
    course = Course.at(Path(release.coursedir.root), release.config)
    try:
        refresh_pages(course, release.coursedir.assignment_id, release.coursedir.student_id or "*", release.log)
    except StalePages as exc:
        release.fail(f"No feedback released: {exc}")
    export_grades(course, release.log)


def export_grades(course: Course, log) -> None:
    """``grades.csv`` written again from the gradebook, as ``make grade`` and ``nbgrader export`` write it: the
    grades being returned are the ones the file holds (a person's manual grades since `make grade` included).
    Returning feedback goes on if the file cannot be written; the log says so and names the command that writes it."""
    from nbgrader.api import Gradebook

    from rlhf_course.grading.gradebook.export import EditionsCsvExport
    destination = course.root / "grades.csv"
    try:
        with Gradebook(course.db_url) as gb:
            EditionsCsvExport(config=course.config, to=str(destination), course_root=str(course.root)).export(gb)
    except OSError as exc:
        log.error("%s not written (%s): it may hold grades older than the gradebook's; write it with "
                  "`nbgrader export` in the course root", destination, exc)
        return
    log.info("%s written again from the gradebook: it holds the grades being returned", destination)
