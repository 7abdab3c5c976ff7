"""The bundled example class: submissions made from the reference solution with known mistakes swapped
in (``instructor/answer_catalogue.py``), graded by stock nbgrader and summarised.  Used by the demo,
the comparisons between stock and trusted grading, and the tests."""
from __future__ import annotations

import csv
import datetime as dt
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import nbformat

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import instructor, notebooks
from rlhf_course.grading.release import generate_release, nbgrader
from rlhf_course.grading.settings import Course


def answers_for(course_root: Path, wrong_names: tuple[str, ...] | None) -> dict[str, str]:
    """Answer cells for a submission of the first assignment: the reference solution with the named
    mistakes swapped in.  ``None`` means an untouched release notebook (no answers at all)."""
    if wrong_names is None:
        return {}
    catalogue = instructor.load_module(course_root, "answer_catalogue")
    source = Course.at(course_root).folder("source", assignment=ASSIGNMENT) / NOTEBOOK
    answers = notebooks.solution_answers(notebooks.read(source))
    for name in wrong_names:
        wrong = catalogue.WRONG_BY_NAME[name]
        answers[wrong.answer_cell] = wrong.source
    return answers


def write_submission(course_root: Path, student: str, answers: dict[str, str],
                     timestamp: dt.datetime | None = None, assignment: str = ASSIGNMENT,
                     notebook: str = NOTEBOOK) -> Path:
    """Lay out the student's submitted folder as ``nbgrader collect`` would."""
    course = Course.at(course_root)
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


def autograde(course_root: Path, student: str | None = None, assignment: str = ASSIGNMENT) -> subprocess.CompletedProcess:
    args = ["autograde", assignment, "--force"]
    if student:
        args.append(f"--student={student}")
    # Stock in-kernel autograde, deliberately: the example class and the comparisons with trusted grading.
    return nbgrader(course_root, *args, extra_env={"RLHF_ALLOW_STOCK_AUTOGRADE": "1"})


def export_grades(course_root: Path, to: Path | None = None) -> Path:
    to = to or course_root / "grades.csv"
    nbgrader(course_root, "export", f"--to={to}")
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


def summary_table(course_root: Path, students: list[str]) -> str:
    db_url = Course.at(course_root).db_url
    lines = [f"{'student':<20} {'score':>12}  lost points on"]
    for student in students:
        scores = cell_scores(db_url, student)
        total = sum(s.score for s in scores.values())
        possible = sum(s.max_score for s in scores.values())
        lost = [s.grade_id for s in scores.values() if s.score < s.max_score]
        shown = ", ".join(lost[:4]) + (f" (+{len(lost) - 4} more)" if len(lost) > 4 else "")
        lines.append(f"{student:<20} {total:>5.1f} / {possible:<5.1f}  {shown or '-'}")
    return "\n".join(lines)


def grade_examples(course_root: Path) -> str:
    """Release, write the example class's submissions (on time, whenever this runs), stock-autograde
    and export them; the summary table."""
    from nbgrader.utils import parse_utc

    catalogue = instructor.load_module(course_root, "answer_catalogue")
    generate_release(course_root)
    due = Course.at(course_root).settings()[0].due_date
    on_time = parse_utc(due) - dt.timedelta(hours=1) if due else None
    for student, wrong in catalogue.EXAMPLE_SUBMISSIONS.items():
        write_submission(course_root, student, answers_for(course_root, wrong), timestamp=on_time)
    autograde(course_root)
    grades = export_grades(course_root)
    with open(grades) as handle:
        rows = list(csv.DictReader(handle))
    table = summary_table(course_root, list(catalogue.EXAMPLE_SUBMISSIONS))
    return f"{table}\n\nexported {len(rows)} row(s) to {grades}"
