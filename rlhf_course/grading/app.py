"""``rlhf-grader``: the course's commands, as a Jupyter application like nbgrader's own.

    python -m rlhf_course.grading release                 # source/ (+ i18n/) -> release/, recorded in the gradebook
    python -m rlhf_course.grading grade [ASSIGNMENT ...]  # trusted grading of every submission (as root)
    python -m rlhf_course.grading report [ASSIGNMENT ...] # the class report: class_report/<assignment>.html and .csv
    python -m rlhf_course.grading report --language=zh-CN # ... in Chinese (or c.ClassReportSettings.language)
    python -m rlhf_course.grading export --format=canvas  # grades an LMS imports (canvas, moodle or long)
    python -m rlhf_course.grading examples                # the bundled example class, stock-graded
    python -m rlhf_course.grading editions status         # the language editions' translations: what to revisit
    python -m rlhf_course.grading editions revisit FILE ID [ID ...]  # mark entries revisited
    python -m rlhf_course.grading extend STUDENT ASSIGNMENT --hours 48   # an extension (or --until DATE)
    python -m rlhf_course.grading extend --list           # every extension granted
    python -m rlhf_course.grading publish-deadlines       # due dates and extensions -> the exchange (students see them)
    python -m rlhf_course.grading empty-submissions       # submission rows with nothing behind them (--remove)
    python -m rlhf_course.grading lab-release             # `make lab`: release/ -> the course's exchange, what is missing
    python -m rlhf_course.grading grade --help-all        # every setting, with its default

Configuration is nbgrader's: ``nbgrader_config`` from Jupyter's config paths and the course root
(:func:`~rlhf_course.course.settings.course_config`), then the command line, which wins
(``--TrustedGrading.call_seconds=5``, ``--CourseDirectory.db_url=...``, or the short flags each command
lists).  The command builds one :class:`~rlhf_course.course.settings.Course` from the two and hands it
to everything it runs; nothing below reads the files again.
"""
from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from textwrap import dedent

from nbgrader.coursedir import CourseDirectory
from traitlets import Bool, Float, List, Unicode
from traitlets.config import Application

from rlhf_course.grading import deadlines, editions, examples, release
from rlhf_course.grading.pages import class_report
from rlhf_course.grading.gradebook.report import REPORT, format_table
from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import Course, RlhfCourse, TrustedGrading, course_config, shown_url


class CourseCommand(Application):
    """A command run on one course directory, configured as nbgrader's commands are."""

    course_root = Unicode("", help="The course directory (default: the current directory, as for nbgrader)."
                          ).tag(config=True)
    aliases = {"course-root": "CourseCommand.course_root", "log-level": "Application.log_level"}
    classes = [CourseDirectory, RlhfCourse, TrustedGrading, class_report.ClassReportSettings]

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
                   "nbgrader's gradebook and write feedback, grading_report.csv, grades.csv and the class report "
                   "(class_report/).  Runs as root.")
    examples = dedent("""
        sudo .venv/bin/rlhf-grader grade          # every released assignment with submissions, every student
        sudo .venv/bin/rlhf-grader grade rlhf --student=alice --workers=2
        sudo .venv/bin/rlhf-grader grade --call-seconds=5   # a setting for this run (any TrustedGrading setting)
        rlhf-grader grade --help-all              # every setting, with its default
    """)
    students = List(Unicode(), help="Grade only these students.").tag(config=True)
    aliases = {**CourseCommand.aliases, "workers": "TrustedGrading.workers", "dask": "TrustedGrading.dask_address",
               "student": "GradeCommand.students",
               **{name.replace("_", "-"): f"TrustedGrading.{name}"
                  for name in ("call_seconds", "feedback_seconds", "submission_seconds")}}

    def start(self):
        from rlhf_course.grading import batch  # (and torch, the sandbox's: not for the other commands)
        # workers, Dask and every limit: the course's TrustedGrading settings
        results = batch.grade_all(self.course, students=self.students or None, assignments=self.extra_args or None)
        print(format_table(results))
        print(f"gradebook: {shown_url(self.course.db_url)}; report: {self.course.root / REPORT}; "
              f"feedback: {self.course.folder('feedback')}")
        print(f"class report: {self.course.root / class_report.FOLDER}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"grader peak memory: {peak:.0f} MB")
        _say_empty_submissions(self.course)


def _say_empty_submissions(course: Course) -> None:
    """Name the gradebook's empty submission rows (an older `extend`'s), which grading leaves as they are, and the
    command that removes them (on stderr; nothing when there are none)."""
    from nbgrader.api import Gradebook

    from rlhf_course.grading.gradebook import empty_submissions
    with Gradebook(course.db_url) as gb:
        empty = empty_submissions.find(gb, course)
    if empty:
        print(f"{len(empty)} empty submission row(s) (no file, no grade: an older `extend` made them) show in the "
              f"Formgrader, grades.csv and the class report as submissions scored 0: "
              f"{', '.join(f'{e.student} ({e.assignment})' for e in empty)}; "
              f"`python -m rlhf_course.grading empty-submissions --remove` removes them", file=sys.stderr)


class ReportCommand(CourseCommand):
    name = "rlhf-grader report"
    description = ("Write the class report of the named assignments (default: each with submissions): "
                   "class_report/<assignment>.html, one self-contained page (scores, manual grading to do, each "
                   "hidden test's pass rate and discrimination, misconceptions, lateness, each student's feedback), "
                   "and class_report/<assignment>.csv, the same numbers.  A language edition is reported with its "
                   "assignment.  `grade` writes them too.  --language=zh-CN: in Chinese.")
    examples = dedent("""
        rlhf-grader report                        # each assignment with submissions
        rlhf-grader report rlhf --language=zh-CN  # one assignment, in Chinese
        rlhf-grader report rlhf --course-root=outputs/example_class   # the example class's (make demo)
    """)

    aliases = {**CourseCommand.aliases, "language": "ClassReportSettings.language"}

    def start(self):
        try:
            written = class_report.write_reports(self.course, self.extra_args or None)
        except ValueError as exc:  # an unknown assignment or language, a damaged misconceptions.json
            raise class_report.ReportError(f"no report written: {exc}") from None
        if not written:
            raise class_report.ReportError(
                "no submission in the gradebook: nothing to report (name an assignment to report it empty)")
        for done in written:
            print(f"{done.assignment}: {done.students} student(s): {done.html} (numbers: {done.csv})")


class ExportCommand(CourseCommand):
    name = "rlhf-grader export"
    description = ("Write the gradebook's grades as an LMS imports them (--format canvas|moodle|long): one row per "
                   "student of the roster, a column per assignment released to students (its language editions "
                   "folded in; one only recorded in the gradebook, never released nor submitted, is left out and "
                   "named), each score after the late penalty, a missing submission blank (never 0).  Default file: "
                   "grades-<format>.csv in the course root (--to=PATH).")
    examples = dedent("""
        rlhf-grader export                        # grades-canvas.csv in the course root
        rlhf-grader export --format=moodle --to=/tmp/moodle.csv
        rlhf-grader export --format=long          # one row per student and assignment
    """)
    format = Unicode("canvas", help="canvas, moodle or long.").tag(config=True)
    to = Unicode("", help="The file to write (default: grades-<format>.csv in the course root).").tag(config=True)
    aliases = {**CourseCommand.aliases, "format": "ExportCommand.format", "to": "ExportCommand.to"}

    def start(self):
        from nbgrader.api import Gradebook

        from rlhf_course.grading.gradebook import empty_submissions, lms_export
        to = Path(self.to) if self.to else self.course.root / f"grades-{self.format}.csv"
        with Gradebook(self.course.db_url) as gb:
            exported, left_out = lms_export.offered(gb, self.course)
            table = lms_export.grade_table(gb, self.course, exported)
            waiting = lms_export.waiting_for_a_person(gb, table)
            empty = empty_submissions.find(gb, self.course)
        lms_export.write_table(table, self.format, to)
        missing = sum(grade is None for grade in table.grades.values())
        print(f"{to}: {len(table.students)} students x {len(table.assignments)} assignment(s) "
              f"({', '.join(table.assignments)}), {missing} missing submission(s) left blank")
        if left_out:
            print(f"left out, never released to students (in the gradebook, not in the exchange, nobody submitted): "
                  f"{', '.join(left_out)}")
        if waiting:
            print(f"{len(waiting)} student(s) with grades that still need a person, exported as they stand: "
                  + ", ".join(f"{student} ({', '.join(found)})" for student, found in sorted(waiting.items()))
                  + " (the class report lists each cell; grade them in the Formgrader, then export again)",
                  file=sys.stderr)
        if empty:
            print(f"{len(empty)} empty submission row(s) (no file, no grade: an older `extend` made them), exported "
                  f"as no submission but shown in the Formgrader as submissions scored 0: "
                  f"{', '.join(f'{e.student} ({e.assignment})' for e in empty)}; "
                  f"`python -m rlhf_course.grading empty-submissions --remove` removes them", file=sys.stderr)


class ReleaseCommand(CourseCommand):
    name = "rlhf-grader release"
    description = ("Build the language editions' sources (i18n/), then record each assignment (or the named ones) "
                   "and its due date in the gradebook and generate its student version in release/.")
    examples = dedent("""
        rlhf-grader release                       # every assignment of source/ (and its language editions)
        rlhf-grader release rlhf                  # one assignment
        RLHF_DUE_DATE="2026-12-20 23:59:00 UTC" rlhf-grader release   # another due date (nbgrader_config.py)
    """)

    def start(self):
        from nbgrader.api import Gradebook

        from rlhf_course.course.due_dates import kept_date_note
        generated = release.generate_release(self.course, self.extra_args or None)
        for path in generated:
            print("generated", path)
        with Gradebook(self.course.db_url) as gradebook:
            for assignment in sorted({path.parent.name for path in generated}):
                if note := kept_date_note(gradebook, self.course, assignment):
                    print(note, file=sys.stderr)


class ExamplesCommand(CourseCommand):
    name = "rlhf-grader examples"
    description = ("In a copy of the course's inputs (--into, default outputs/example_class; the course itself is "
                   "never touched): release, then grade the bundled example class with stock nbgrader and print a "
                   "summary.  `report --course-root=FOLDER` writes its class report.")
    examples = dedent("""
        rlhf-grader examples                      # into outputs/example_class (make demo)
        rlhf-grader examples --into=/tmp/class    # elsewhere
    """)
    into = Unicode("", help="The example class's folder (default: outputs/example_class in the course); a folder "
                            "an earlier run made is replaced, any other non-empty folder refused.").tag(config=True)
    aliases = {**CourseCommand.aliases, "into": "ExamplesCommand.into"}

    def start(self):
        folder = Path(self.into).resolve() if self.into else self.course.root / "outputs" / "example_class"
        try:
            copy = examples.scratch_course(self.course, folder)
        except ValueError as exc:  # a folder that is not the example class's to replace
            raise CourseError(f"no example class made: {exc}") from None
        print(f"the example class is graded in {copy.root} (a copy of the course's inputs, with its own gradebook "
              f"and exchange); nothing in {self.course.root} changes")
        print(examples.grade_examples(copy))


class EditionsStatusCommand(CourseCommand):
    name = "rlhf-grader editions status"
    description = ("Each translation file of i18n/: up to date, or each cell, message and detail to revisit "
                   "(exits 1 when any needs revisiting).")
    examples = dedent("""
        rlhf-grader editions status
    """)

    def start(self):
        code, text = editions.status(self.course)
        print(text)
        self.exit(code)


class EditionsRevisitCommand(CourseCommand):
    name = "rlhf-grader editions revisit"
    description = ("Mark entries of a translation file revisited (FILE ID [ID ...]: its name in i18n/, then cell or "
                   "grade ids), after updating their translation.")
    examples = dedent("""
        rlhf-grader editions revisit rlhf.zh-CN.json intro ppo-derivation   # after updating their Chinese
    """)

    def start(self):
        if len(self.extra_args) < 2:
            raise CourseError("usage: python -m rlhf_course.grading editions revisit FILE ID [ID ...]")
        name, *ids = self.extra_args
        for entry_id in ids:
            print("revisited", editions.revisit(self.course.root / editions.I18N_FOLDER / name, entry_id, self.course))


class ExtendCommand(CourseCommand):
    name = "rlhf-grader extend"
    description = ("Give a student more time on an assignment and its language editions (STUDENT ASSIGNMENT --hours N, "
                   "or --until DATE), set as the gradebook's extension of each submission they made (the late penalty "
                   "honours it) and kept in extensions.json for one they have not made yet; --list shows every "
                   "extension.")
    examples = dedent("""
        rlhf-grader extend alice rlhf --hours 48
        rlhf-grader extend bob rlhf --until '2026-12-20 18:00 UTC'
        rlhf-grader extend --list
    """)
    hours = Float(0.0, help="Hours added to the assignment's due date.").tag(config=True)
    until = Unicode("", help="The student's new deadline (e.g. '2026-12-20 18:00 UTC').").tag(config=True)
    list_them = Bool(False, help="List every extension granted.").tag(config=True)
    aliases = {**CourseCommand.aliases, "hours": "ExtendCommand.hours", "until": "ExtendCommand.until"}
    flags = {"list": ({"ExtendCommand": {"list_them": True}}, "List every extension granted.")}

    def start(self):
        if self.list_them:
            found = deadlines.extensions(self.course)
            print("\n".join(e.line() for e in found) if found else "no extensions granted")
            return
        if len(self.extra_args) != 2:
            raise CourseError("usage: python -m rlhf_course.grading extend STUDENT ASSIGNMENT "
                              "(--hours N | --until DATE)")
        student, assignment = self.extra_args
        granted = deadlines.grant_extension(self.course, student, assignment, hours=self.hours or None,
                                            until=self.until or None)
        print("extension:", granted.line())
        for edition, points in deadlines.penalties_kept(self.course, student, assignment):
            print(f"{student}'s graded submission of {edition} keeps its late penalty of {points:g} points until it "
                  f"is graded again: `make grade ASSIGNMENT={edition}` (as root; a person's grades are kept)",
                  file=sys.stderr)
        _publish(self, failing=False)  # granted all the same: grading reads the gradebook


def _publish(command: CourseCommand, failing: bool = True) -> None:
    """The gradebook's deadlines into the exchange, where students read them; said, or why not (a
    :class:`~rlhf_course.course.dates.DeadlineError` when ``failing``)."""
    try:
        for line in deadlines.publish_for(command.course, log=command.log):
            print(line)
    except deadlines.DeadlineError as exc:
        if failing:
            raise deadlines.DeadlineError(f"not in the exchange (students do not see it yet): {exc}") from None
        print(f"not in the exchange (students do not see it yet): {exc}", file=sys.stderr)


class PublishDeadlinesCommand(CourseCommand):
    name = "rlhf-grader publish-deadlines"
    description = ("Put the gradebook's due dates (each released assignment's) and every student's extensions into "
                   "the exchange, where students see them (nbgrader list, submit, the Assignment List): after a due "
                   "date is changed in the Formgrader.  Release and extend do it themselves.")
    examples = dedent("""
        rlhf-grader publish-deadlines
    """)

    def start(self):
        _publish(self)


class EmptySubmissionsCommand(CourseCommand):
    name = "rlhf-grader empty-submissions"
    description = ("List the gradebook's submission rows with nothing behind them (no submission time, no file in "
                   "submitted/, autograded/ or feedback/, no score, comment or flag: an older `extend` made one for "
                   "an edition the student never took; the Formgrader, grades.csv and the class report show each as a "
                   "submission scored 0); --remove removes them, keeping any extension they carry in extensions.json.  "
                   "A real submission is never touched.")
    examples = dedent("""
        rlhf-grader empty-submissions             # list them; nothing changes
        rlhf-grader empty-submissions --remove    # remove them (not while make grade runs)
    """)
    remove_them = Bool(False, help="Remove the rows listed.").tag(config=True)
    flags = {"remove": ({"EmptySubmissionsCommand": {"remove_them": True}}, "Remove the rows listed.")}

    def start(self):
        from nbgrader.api import Gradebook

        from rlhf_course.grading.gradebook import empty_submissions
        if self.remove_them:
            removed = empty_submissions.remove(self.course)
            for empty in removed:
                print("removed", empty.line())
            print(f"{len(removed)} empty submission row(s) removed" if removed else "no empty submission rows")
            return
        with Gradebook(self.course.db_url) as gb:
            found = empty_submissions.find(gb, self.course)
        for empty in found:
            print(empty.line())
        print(f"{len(found)} empty submission row(s): remove them with `python -m rlhf_course.grading "
              f"empty-submissions --remove`" if found else "no empty submission rows")


class LabReleaseCommand(CourseCommand):
    name = "rlhf-grader lab-release"
    description = ("`make lab`'s first step: release each assignment of release/ the course's exchange does not hold "
                   "yet (through the course's release, which refuses what `make release` did not generate), then say, "
                   "in English and Chinese, what the student's Assignment List offers and where the student works.")
    examples = dedent("""
        rlhf-grader lab-release                   # make lab's first step
    """)

    def start(self):
        from rlhf_course.exchange.local import release_for_lab
        print("\n".join(release_for_lab(self.course)))


def _fresh(command: type[Application]):
    """A subcommand made anew each time (traitlets' default keeps one instance per class, a singleton that
    would carry one run's command-line settings into the next run in the same process)."""
    return lambda parent: command(parent=parent)


class EditionsCommand(Application):
    name = "rlhf-grader editions"
    description = "The language editions' translation files (i18n/): what needs revisiting, and marking it revisited."
    examples = dedent("""
        rlhf-grader editions status
        rlhf-grader editions revisit rlhf.zh-CN.json intro
    """)
    subcommands = {
        "status": (_fresh(EditionsStatusCommand), EditionsStatusCommand.description),
        "revisit": (_fresh(EditionsRevisitCommand), EditionsRevisitCommand.description),
    }

    def start(self):
        if self.subapp is None:
            self.print_subcommands()
            self.exit(1)
        self.subapp.start()


class RlhfGrader(Application):
    name = "rlhf-grader"
    description = __doc__.split("\n\n")[0]
    examples = dedent("""
        rlhf-grader release                       # make release (rlhf-grader is python -m rlhf_course.grading)
        sudo .venv/bin/rlhf-grader grade          # make grade: trusted grading of every submission
        rlhf-grader report --language=zh-CN       # the class report, in Chinese
        rlhf-grader export --format=canvas        # grades an LMS imports
        rlhf-grader extend alice rlhf --hours 48  # an extension
        rlhf-grader COMMAND --help                # one command's options and examples
    """)
    subcommands = {
        "release": (_fresh(ReleaseCommand), ReleaseCommand.description),
        "grade": (_fresh(GradeCommand), GradeCommand.description),
        "report": (_fresh(ReportCommand), ReportCommand.description),
        "export": (_fresh(ExportCommand), ExportCommand.description),
        "examples": (_fresh(ExamplesCommand), ExamplesCommand.description),
        "editions": (_fresh(EditionsCommand), EditionsCommand.description),
        "extend": (_fresh(ExtendCommand), ExtendCommand.description),
        "publish-deadlines": (_fresh(PublishDeadlinesCommand), PublishDeadlinesCommand.description),
        "lab-release": (_fresh(LabReleaseCommand), LabReleaseCommand.description),
        "empty-submissions": (_fresh(EmptySubmissionsCommand), EmptySubmissionsCommand.description),
    }

    def start(self):
        if self.subapp is None:
            self.print_subcommands()
            self.exit(1)
        self.subapp.start()


def command_name(app: Application) -> str:
    """The command as typed after ``python -m rlhf_course.grading`` ("grade", "editions status"): the deepest
    subcommand's."""
    while app.subapp is not None:
        app = app.subapp
    return app.name.removeprefix(RlhfGrader.name).strip() or app.name


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error its user caused (:class:`~rlhf_course.course.errors.CourseError`) is one line on
    stderr, "<command> did not run: <message>" (or the error's own ``outcome``, "stopped" for a batch that graded
    part of the class), and exit code 2."""
    from sqlalchemy.exc import OperationalError

    app = RlhfGrader()
    try:
        app.initialize(argv)
        app.start()
    except CourseError as exc:
        print(f"{command_name(app)} {getattr(exc, 'outcome', 'did not run')}: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:  # the gradebook's database refused, dropped or could not open the connection
        reason = " ".join(str(exc.orig or exc).split()).rstrip(".")
        # "stopped", not "did not run": a connection dropped mid-batch comes here after submissions were recorded
        print(f"{command_name(app)} stopped: the gradebook's database failed: {reason}.  Check "
              "c.CourseDirectory.db_url (or RLHF_GRADEBOOK_URL) and that its server runs; what was recorded "
              "before stays, and the command can run again", file=sys.stderr)
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
