"""The bundled example class: submissions made from the reference solution with known mistakes swapped
in (``instructor/rlhf_catalogue.py``), graded by stock nbgrader and summarised.  Used by the demo,
the comparisons between stock and trusted grading, and the tests.  The demo's class lives in a copy of the
course's inputs (:func:`scratch_course`), never in the course itself: a course's students, gradebook and
grades stay as they are.

Every function takes the :class:`Course` (the command's, with its command-line settings) or a course
folder (its configuration files are read); stock nbgrader's autograde and export run in this process
with that configuration, as ``nbgrader autograde`` / ``nbgrader export`` would with it."""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from rlhf_course import ASSIGNMENT, NOTEBOOK, copy_course_files
from rlhf_course.grading import instructor
from rlhf_course.course import notebooks
from rlhf_course.course.due_dates import due_date_for
from rlhf_course.grading.release import generate_release
from rlhf_course.course.settings import Course


SCRATCH_MARK = ".rlhf-example-class"  # in a folder scratch_course made: the next run may replace it
PINNED = """
# The example class (python -m rlhf_course.grading examples): a gradebook and an exchange of its own, in this folder,
# whatever RLHF_GRADEBOOK_URL or RLHF_EXCHANGE_ROOT name (the course's own)
c.CourseDirectory.db_url = {db_url!r}
c.Exchange.root = {exchange!r}
"""


def scratch_course(course: Course, folder: Path) -> Course:
    """A copy of ``course``'s inputs (:data:`~rlhf_course.COURSE_FILES`) in ``folder``, its configuration pinned to
    a gradebook and an exchange inside ``folder``; a folder an earlier run made is replaced, any other non-empty
    folder (or the course itself) is refused with ValueError."""
    folder = Path(folder).resolve()
    if folder == course.root or course.root.is_relative_to(folder):
        raise ValueError(f"the example class cannot be made in {folder}: it holds the course {course.root}")
    if folder.exists() and any(folder.iterdir()):
        if not (folder / SCRATCH_MARK).is_file():
            raise ValueError(f"{folder} is not empty and is not an example class made here: name another folder")
        shutil.rmtree(folder)
    copy_course_files(folder, course.root)
    (folder / SCRATCH_MARK).write_text(f"a copy of {course.root}'s inputs for the example class\n")
    with open(folder / "nbgrader_config.py", "a") as config:
        config.write(PINNED.format(db_url=f"sqlite:///{folder / 'gradebook.db'}", exchange=str(folder / "exchange")))
    return Course.at(folder)


def answers_for(course: Course, wrong_names: tuple[str, ...] | None) -> dict[str, str]:
    """Answer cells for a submission of the first assignment: the reference solution with the named
    mistakes swapped in.  ``None`` means an untouched release notebook (no answers at all)."""
    if wrong_names is None:
        return {}
    catalogue = instructor.load_module(course, "rlhf_catalogue")
    source = course.folder("source", assignment=ASSIGNMENT) / NOTEBOOK
    answers = notebooks.solution_answers(notebooks.read(source))
    for name in wrong_names:
        wrong = catalogue.WRONG_BY_NAME[name]
        answers[wrong.answer_cell] = wrong.source
    return answers


def write_submission(course: Course, student: str, answers: dict[str, str],
                     timestamp: dt.datetime | None = None, assignment: str = ASSIGNMENT,
                     notebook: str = NOTEBOOK) -> Path:
    """Lay out the student's submitted folder as ``nbgrader collect`` would."""
    release_nb = notebooks.read(course.folder("release", assignment=assignment) / notebook)
    folder = course.folder("submitted", student, assignment)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    nbformat.write(notebooks.fill_answers(release_nb, answers), str(folder / notebook))
    stamp = timestamp or dt.datetime.now(dt.timezone.utc)
    stamp = stamp.replace(tzinfo=dt.timezone.utc) if stamp.tzinfo is None else stamp.astimezone(dt.timezone.utc)
    (folder / "timestamp.txt").write_text(stamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    return folder


@contextlib.contextmanager
def _kernels_import_the_course(course: Course):
    """The kernels stock autograde starts import the hidden checks: this course's instructor/ and root
    first on their PYTHONPATH (what the course's nbgrader_config.py sets up for nbgrader's command line)."""
    saved = os.environ.get("PYTHONPATH")
    first = [str(course.root / instructor.FOLDER), str(course.root)]
    os.environ["PYTHONPATH"] = os.pathsep.join(first + [p for p in (saved or "").split(os.pathsep) if p and p not in first])
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def autograde(course: Course, student: str | None = None, assignment: str = ASSIGNMENT) -> str:
    """Stock in-kernel ``nbgrader autograde ASSIGNMENT --force [--student=...]``, deliberately: the example
    class and the comparisons with trusted grading (the course refuses it unless allowed: allowed here).
    Returns nbgrader's log; raises RuntimeError with it when autograde fails."""
    from nbgrader.converters import Autograde
    from nbgrader.utils import capture_log

    course = course.with_config(TrustedGradingOnly={"allow": True})
    coursedir = course.coursedir
    coursedir.assignment_id, coursedir.student_id = assignment, student or "*"
    converter = Autograde(coursedir=coursedir, config=course.config)
    converter.force = True
    with _kernels_import_the_course(course):
        result = capture_log(converter)
    if not result["success"]:
        raise RuntimeError(f"nbgrader autograde {assignment} failed:\n{result.get('log', '')}\n{result.get('error', '')}")
    return result.get("log", "")


def export_grades(course: Course, to: Path | None = None) -> Path:
    """``nbgrader export --to=...``: the course's export plugin (``c.ExportApp.plugin_class``) on its gradebook."""
    from nbgrader.api import Gradebook
    from traitlets.utils.importstring import import_item

    to = to or course.root / "grades.csv"
    plugin_class = course.config.ExportApp.get("plugin_class", "nbgrader.plugins.CsvExportPlugin")
    plugin_class = import_item(plugin_class) if isinstance(plugin_class, str) else plugin_class
    with Gradebook(course.db_url, course.coursedir.course_id) as gradebook:
        plugin_class(config=course.config, to=str(to)).export(gradebook)
    return to


@dataclass
class CellScore:
    grade_id: str
    score: float
    max_score: float


def cell_scores(db_url: str, student: str, assignment: str = ASSIGNMENT, notebook: str = NOTEBOOK) -> dict[str, CellScore]:
    """Per grade cell scores of one student's submission, straight from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        nb = gb.find_submission_notebook(notebook.removesuffix(".ipynb"), assignment, student)
        return {g.name: CellScore(g.name, float(g.score), float(g.max_score)) for g in nb.grades}


def summary_table(course: Course, students: list[str]) -> str:
    db_url = course.db_url
    lines = [f"{'student':<20} {'score':>12}  lost points on"]
    for student in students:
        scores = cell_scores(db_url, student)
        total = sum(s.score for s in scores.values())
        possible = sum(s.max_score for s in scores.values())
        lost = [s.grade_id for s in scores.values() if s.score < s.max_score]
        shown = ", ".join(lost[:4]) + (f" (+{len(lost) - 4} more)" if len(lost) > 4 else "")
        lines.append(f"{student:<20} {total:>5.1f} / {possible:<5.1f}  {shown or '-'}")
    return "\n".join(lines)


def grade_examples(course: Course) -> str:
    """Release, write the example class's submissions (on time, whenever this runs), stock-autograde
    and export them; the summary table."""
    from nbgrader.utils import parse_utc

    catalogue = instructor.load_module(course, "rlhf_catalogue")
    generate_release(course)
    due = due_date_for(course, ASSIGNMENT)
    on_time = parse_utc(due) - dt.timedelta(hours=1) if due else None
    for student, wrong in catalogue.EXAMPLE_SUBMISSIONS.items():
        write_submission(course, student, answers_for(course, wrong), timestamp=on_time)
    autograde(course)
    grades = export_grades(course)
    with open(grades) as handle:
        rows = list(csv.DictReader(handle))
    table = summary_table(course, list(catalogue.EXAMPLE_SUBMISSIONS))
    return f"{table}\n\nexported {len(rows)} row(s) to {grades}"
