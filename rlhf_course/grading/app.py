"""``rlhf-grader``: the course's commands, as a Jupyter application like nbgrader's own.

    python -m rlhf_course.grading release                 # source/ (+ i18n/) -> release/, recorded in the gradebook
    python -m rlhf_course.grading grade [ASSIGNMENT ...]  # trusted grading of every submission (as root)
    python -m rlhf_course.grading examples                # the bundled example class, stock-graded
    python -m rlhf_course.grading grade --help-all        # every setting, with its default

Configuration is nbgrader's: ``nbgrader_config`` from Jupyter's config paths and the course root
(:func:`~rlhf_course.grading.settings.course_config`), then the command line, which wins
(``--TrustedGrading.call_seconds=5``, or the short flags each command lists).
"""
from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

# nbformat imports jsonschema, which, when rfc3987_syntax is installed (jupyter_events asks for it), builds a
# Lark grammar for RFC 3987 IRIs at import: 1.15 s of CPU, a third of the grader's start-up.  Nothing this
# process validates uses the "iri" formats; without the module jsonschema simply does not check them.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

from traitlets import List, Unicode  # noqa: E402
from traitlets.config import Application  # noqa: E402

from rlhf_course.grading import batch, examples, release  # noqa: E402
from rlhf_course.grading.report import REPORT, format_table  # noqa: E402
from rlhf_course.grading.settings import Course, NotReady, RlhfCourse, TrustedGrading, course_config, shown_url  # noqa: E402


class CourseCommand(Application):
    """A command run on one course directory, configured as nbgrader's commands are."""

    course_root = Unicode("", help="The course directory (default: the current directory, as for nbgrader)."
                          ).tag(config=True)
    aliases = {"course-root": "CourseCommand.course_root", "log-level": "Application.log_level"}
    classes = [RlhfCourse, TrustedGrading]

    def initialize(self, argv=None):
        super().initialize(argv)
        root = Path(self.course_root or os.getcwd()).resolve()
        config = course_config(root)
        config.merge(self.cli_config)  # the command line wins over the files
        self.update_config(config)
        self.course = Course.at(root, self.config)


class GradeCommand(CourseCommand):
    name = "rlhf-grader grade"
    description = ("Grade every submission of the named assignments (default: each released one with "
                   "submissions) in sandboxes, judged outside the student's process; record the scores in "
                   "nbgrader's gradebook and write feedback, grading_report.csv and grades.csv.  Runs as root.")
    students = List(Unicode(), help="Grade only these students.").tag(config=True)
    aliases = {**CourseCommand.aliases, "workers": "TrustedGrading.workers", "dask": "TrustedGrading.dask_address",
               "student": "GradeCommand.students",
               **{name.replace("_", "-"): f"TrustedGrading.{name}"
                  for name in ("call_seconds", "feedback_seconds", "submission_seconds")}}

    def start(self):
        grading = TrustedGrading(config=self.config)
        try:
            results = batch.grade_all(self.course.root, grading.workers or None, self.students or None,
                                      grading.dask_address or None, grading.limits(), assignments=self.extra_args or None)
        except NotReady as exc:
            print(f"grading did not start: {exc}", file=sys.stderr)
            self.exit(2)
        print(format_table(results))
        print(f"gradebook: {shown_url(self.course.db_url)}; report: {self.course.root / REPORT}; "
              f"feedback: {self.course.folder('feedback')}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"grader peak memory: {peak:.0f} MB")


class ReleaseCommand(CourseCommand):
    name = "rlhf-grader release"
    description = ("Build the language editions' sources (i18n/), then record each assignment (or the named ones) "
                   "and its due date in the gradebook and generate its student version in release/.")

    def start(self):
        for path in release.generate_release(self.course.root, self.extra_args or None):
            print("generated", path)


class ExamplesCommand(CourseCommand):
    name = "rlhf-grader examples"
    description = "Release, then grade the bundled example class with stock nbgrader and print a summary."

    def start(self):
        print(examples.grade_examples(self.course.root))


class RlhfGrader(Application):
    name = "rlhf-grader"
    description = __doc__.split("\n\n")[0]
    subcommands = {
        "release": (ReleaseCommand, ReleaseCommand.description),
        "grade": (GradeCommand, GradeCommand.description),
        "examples": (ExamplesCommand, ExamplesCommand.description),
    }

    def start(self):
        if self.subapp is None:
            self.print_subcommands()
            self.exit(1)
        self.subapp.start()


def main(argv: list[str] | None = None) -> int:
    app = RlhfGrader()
    try:
        app.initialize(argv)
        app.start()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
