"""Small extensions plugged into nbgrader through its configuration (never a fork)."""
from __future__ import annotations

from nbconvert.exporters import NotebookExporter
from nbgrader import utils
from nbgrader.converters.base import NbGraderException
from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor
from traitlets import Bool


class StderrIsNotFailure(NbGraderPreprocessor):
    """Relabel stderr streams of grade cells as stdout, after execution and before scoring.

    nbgrader scores any stderr output in a test cell as 0, so a harmless torch UserWarning
    would cost a correct answer its points.  A failing test raises, which is an ``error``
    output and is still scored 0; the warning text stays visible, prefixed.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stderr":
                    output["name"] = "stdout"
                    output["text"] = "[stderr] " + output.get("text", "")
        return cell, resources


class TrustedGradingOnly(NbGraderPreprocessor):
    """Refuse stock in-kernel autograde unless the course allows it.

    Stock autograde (the ``nbgrader autograde`` command, and the Formgrader's per-student
    *Autograde* button) runs student code as the instructor, in the kernel that also runs the
    hidden tests, which the student's code can defeat.  This course grades with
    ``sudo make grade`` (sandboxed, judged outside the student's process); its scores are what
    the Formgrader shows.  Placed first among the sanitize preprocessors, so it stops before a
    notebook is executed or a score is written.
    """

    allow = Bool(False, help="Allow stock in-kernel autograde (trusted students, comparisons, tests).").tag(config=True)

    MESSAGE = ("Stock autograde is disabled for this course: it runs student code as you, next to the hidden "
               "tests. Grade with `sudo make grade` (sandboxed); its scores appear in the Formgrader. To use "
               "stock autograde anyway, set RLHF_ALLOW_STOCK_AUTOGRADE=1 (or "
               "c.TrustedGradingOnly.allow = True in nbgrader_config.py).")

    def preprocess(self, nb, resources):
        if not self.allow:
            self.log.error(self.MESSAGE)
            raise RuntimeError(self.MESSAGE)
        return nb, resources


class TrustedGradingOnlyExporter(NotebookExporter):
    """Stock autograde's exporter (``c.Autograde.exporter_class``): the same refusal as :class:`TrustedGradingOnly`,
    made as the converter starts.  nbgrader clears ``autograded/<student>/<assignment>`` before it runs the
    preprocessors (with ``--force``, which the Formgrader's Autograde button passes, or when the submission is
    newer), and removes it again when one fails: refused there, stock autograde would delete the copy and grading
    record `make grade` wrote.  The exporter is made before any folder is touched."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        refusal = TrustedGradingOnly(parent=self)
        if not refusal.allow:
            self.log.error(refusal.MESSAGE)
            raise NbGraderException(refusal.MESSAGE)


class GrantedExtension(NbGraderPreprocessor):
    """Give a submission stock autograde has just recorded the extension granted before it existed.

    ``python -m rlhf_course.grading extend`` records an extension for an assignment the student has not
    submitted yet in the course's record (:mod:`rlhf_course.course.extension_record`), never as a submission row
    of its own; trusted grading sets it on the submission it records, and this does the same in stock
    ``nbgrader autograde``, before ``AssignLatePenalties`` reads the submission's lateness.  A submission that
    already has an extension keeps it.
    """

    def preprocess(self, nb, resources):
        from pathlib import Path

        from nbgrader.api import Gradebook
        from nbgrader.coursedir import CourseDirectory

        from rlhf_course.course.extension_record import Granted
        from rlhf_course.course.settings import Course
        student, assignment = resources["nbgrader"]["student"], resources["nbgrader"]["assignment"]
        course = Course.at(Path(CourseDirectory(config=self.config).root), self.config)
        extension = Granted.of(course).for_submission(student, assignment)
        if extension is not None:
            with Gradebook(resources["nbgrader"]["db_url"]) as gb:
                submission = gb.find_submission(assignment, student)
                if submission.extension is None:
                    submission.extension = extension
                    gb.db.commit()
        return nb, resources


class EditionAnswerStubs(ClearSolutions):
    """nbgrader's ClearSolutions, with the answer stubs of the notebook's language edition.

    A language edition's notebook carries its stubs in ``metadata.rlhf_course.answer_stubs``
    (``{"code": ..., "text": ...}``, written by :mod:`rlhf_course.grading.editions`), so a Chinese
    release says where to write in Chinese, whichever way it is generated (``make release`` or the
    Formgrader's *Generate* button); other notebooks get the configured stubs.
    """

    def preprocess(self, nb, resources):
        stubs = nb.metadata.get("rlhf_course", {}).get("answer_stubs", {})
        configured = self.code_stub, self.text_stub
        language = nb.metadata.get("kernelspec", {}).get("language", "python")
        if "code" in stubs:
            self.code_stub = dict(self.code_stub, **{language: stubs["code"]})
        if "text" in stubs:
            self.text_stub = stubs["text"]
        try:
            return super().preprocess(nb, resources)
        finally:  # one instance serves every notebook of a generate run
            self.code_stub, self.text_stub = configured

    def preprocess_cell(self, cell, resources, cell_index):
        """nbgrader's, then a written answer's stub names its question (``editions.question_stub``)."""
        from rlhf_course.grading.editions import question_stub
        stub = self.text_stub
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "markdown" and grade_id and cell.source == stub:
            cell.source = question_stub(stub, grade_id)
        return cell, resources
