"""A synthetic class of the first assignment for the class report's tests: students across both editions, built
from the answer catalogue and the reference, some late, one with an extension, with what a class report must
show (written answers left to grade, collect's refusals, misconceptions named or not).

Most students are written into the gradebook through nbgrader's API (a submission, each grade cell's score, the
course's late penalty), as grading would; a few are graded for real (in-process trusted grading).  Each
student's :class:`Plan` is what the tests compute the report's numbers from, independently of the report.

Two properties are given to the direct students that no catalogued answer has, so that every flag shows:
``ppo_gradient`` is lost by everyone (a broken test: the real students' PPO mistakes lose it too) and
``gae_single_step`` is lost by exactly the students with no catalogued mistake (an unclear instruction:
negative discrimination).
"""
from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import deadlines, examples
from rlhf_course.grading.gradebook import misconception_record
from rlhf_course.grading.results import GRADED, CellResult, NamedMisconception, SubmissionResult
from rlhf_course.course.settings import Course
from tests.support.course import cell_points

DUE = dt.datetime(2026, 12, 18, 23, 59)
EDITIONS = (ASSIGNMENT, f"{ASSIGNMENT}_zh")
BROKEN, UNCLEAR = "ppo_gradient", "gae_single_step"
WRITTEN = ("lab_question_1", "lab_question_2", "lab_question_3")
HOSTILE_ID = "zoe<img src=x onerror=alert(1)>"


@dataclass
class Plan:
    student: str
    edition: str
    wrong: tuple[str, ...]
    submitted: dt.datetime
    extension_hours: float = 0.0
    real: bool = False  # graded by trusted grading (in-process); else written into the gradebook
    lost: set[str] = field(default_factory=set)  # autograded cells that score 0
    written: dict[str, float | None] = field(default_factory=dict)  # a person's score; None: still to grade
    named: bool = True  # misconceptions recorded as named


REAL = [  # (student, edition, wrong answers, hours after the due date, extension hours)
    ("r_ben", EDITIONS[1], ("ppo_clip_without_min", "dpo_naive_log_sigmoid"), 3.5, 0.0),
    ("r_cleo", EDITIONS[0], ("ppo_detached_numpy", "gae_ignores_next_value"), 30.0, 48.0),
    ("r_dev", EDITIONS[1], ("ppo_dual_clip",), -2.0, 0.0),
    ("r_eli", EDITIONS[0], ("ppo_max_instead_of_min",), -26.0, 0.0),
]


def plans(catalogue, students: int = 60, seed: int = 38) -> list[Plan]:
    """``students`` plans: the REAL ones, then direct ones (one with a hostile id), some late."""
    rng = random.Random(seed)
    by_cell: dict[str, list[str]] = {}
    for wrong in catalogue.WRONG_ANSWERS:
        by_cell.setdefault(wrong.answer_cell, []).append(wrong.name)
    found = [Plan(s, e, w, DUE + dt.timedelta(hours=h), x, real=True) for s, e, w, h, x in REAL]
    for i in range(students - len(REAL)):
        student = HOSTILE_ID if i == 7 else f"s{i:02d}"
        cells = rng.sample(sorted(by_cell), rng.choice((0, 0, 1, 1, 2)))
        wrong = tuple(rng.choice(by_cell[c]) for c in sorted(cells))
        hours = rng.choice((0.5, 5.0, 80.0)) if i % 9 == 4 else -rng.uniform(1, 96)
        plan = Plan(student, EDITIONS[i % 2], wrong, DUE + dt.timedelta(hours=hours))
        plan.written = {q: (None if (i + k) % 5 == 0 else float((i + k) % 3)) for k, q in enumerate(WRITTEN)}
        plan.named = i % 6 != 1  # these as if graded by stock autograde: nothing named
        found.append(plan)
    for plan in found:
        plan.lost = {cell for name in plan.wrong for cell in catalogue.WRONG_BY_NAME[name].loses}
        if not plan.real:
            plan.lost.add(BROKEN)
            if not plan.wrong:
                plan.lost.add(UNCLEAR)
        else:
            plan.written = {q: 0.0 for q in WRITTEN}  # left as released: 0, nothing for a person to grade
    return found


def write_collect_report(course: Path) -> None:
    """What the strict collect wrote: a refused entry (a name shaped as a formula and as markup), a flagged
    time, a plain collected one, and a refusal of another assignment (not this report's)."""
    (course / "collect_report.csv").write_text(
        "assignment,student,entry,status,reason,kernel_time,claimed_time,flag\n"
        f"{ASSIGNMENT},,'=HYPERLINK(\"http://x\")+rlhf+2026,refused,malformed entry name (not <student>+<assignment>+<timestamp>[+<random>]),,,\n"
        f"{EDITIONS[1]},r_ben,r_ben+rlhf_zh+2026-12-19 03:29:00 UTC,collected,,2026-12-19 03:29:00.000000 UTC,"
        f"2026-12-18 20:00:00.000000 UTC,the entry name claims 3.5 h before the kernel time\n"
        f"{ASSIGNMENT},s01,s01+rlhf+2026-12-18 10:00:00 UTC,collected,,2026-12-18 10:00:00.000000 UTC,,\n"
        "kl_penalty,s02,s02+kl_penalty+x,refused,malformed timestamp in the entry name,,,\n")


def build(course: Path, catalogue, students: int = 60, real: bool = True) -> list[Plan]:
    """The class in ``course`` (released already): due dates, the collect report, the direct students written
    into the gradebook with their misconception records, then the real ones graded in-process (if ``real``) as
    `make grade` does, whose batch writes the class report of the whole class (one report, not two)."""
    from nbgrader.api import Gradebook

    from tests.support.in_process_sandbox import grade_in_process
    the_course = Course.at(course)
    with Gradebook(the_course.db_url) as gb:
        for edition in EDITIONS:  # the test run's default due date is far in the future
            gb.update_or_create_assignment(edition, duedate=DUE)
    found = plans(catalogue, students)
    if not real:
        found = [p for p in found if not p.real]
    write_directly(the_course, [p for p in found if not p.real])
    write_collect_report(course)
    course_handle = Course.at(course)
    if real:
        graded = [p for p in found if p.real]
        for plan in graded:
            examples.write_submission(course_handle, plan.student, examples.answers_for(course_handle, plan.wrong),
                                      timestamp=plan.submitted, assignment=plan.edition)
            if plan.extension_hours:
                with Gradebook(the_course.db_url) as gb:
                    gb.update_or_create_student(plan.student)
                deadlines.grant_extension(the_course, plan.student, plan.edition, hours=plan.extension_hours,
                                          now=DUE - dt.timedelta(days=1))
        # as `make grade` does: the gradebook, feedback pages, grades.csv, the class report (of the whole class)
        grade_in_process(course_handle, students=[p.student for p in graded], assignments=list(EDITIONS), class_reports=True)
    return found


def write_directly(course: Course, found: list[Plan]) -> None:
    """Each plan's submission, scores and late penalty through nbgrader's API, and its misconception record.
    The grades are read back in one query and written in one commit (nbgrader's lazy relationships would cost
    a query per grade)."""
    import warnings

    from nbgrader.api import (Assignment, BaseCell, Grade, Gradebook, Student, SubmittedAssignment,
                              SubmittedNotebook)
    from sqlalchemy.exc import SAWarning
    from sqlalchemy.orm import joinedload, with_polymorphic

    from rlhf_course.grading import misconceptions
    points = cell_points(ASSIGNMENT, course.root)
    _, named = misconceptions.catalogue(course, ASSIGNMENT)
    policy = course.late_policy()
    by_student = {p.student: p for p in found}
    results, stamps = [], {}
    with Gradebook(course.db_url) as gb:
        gb.db.add_all([Student(id=p.student) for p in found])
        gb.db.commit()
        with warnings.catch_warnings():  # nbgrader's add_submission trips a harmless autoflush warning
            warnings.simplefilter("ignore", SAWarning)
            for plan in found:
                gb.add_submission(plan.edition, plan.student, timestamp=plan.submitted)
        cell = with_polymorphic(BaseCell, "*", flat=True)
        grades = (gb.db.query(Grade, Student.id).join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                  .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                  .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                  .join(Student, SubmittedAssignment.student_id == Student.id)
                  .filter(Assignment.name.in_(EDITIONS), Student.id.in_(list(by_student)))
                  .options(joinedload(Grade.cell.of_type(cell)), joinedload(Grade.notebook)).all())
        auto: dict[str, float] = {}
        notebook_of = {}
        for grade, student in grades:
            plan, name = by_student[student], grade.cell.name
            notebook_of[student] = grade.notebook
            if name in WRITTEN:
                score = plan.written[name]
                grade.manual_score, grade.needs_manual_grade = score, score is None
            else:
                grade.auto_score = 0.0 if name in plan.lost else points[name]
                grade.needs_manual_grade = False
                auto[student] = auto.get(student, 0.0) + grade.auto_score
        for plan in found:
            late = max(0.0, (plan.submitted - DUE).total_seconds())  # no extension among them
            notebook_of[plan.student].late_submission_penalty = (
                policy.late_submission_penalty(plan.student, auto[plan.student], late) if late > 0 else None)
            if plan.named:
                result = SubmissionResult(plan.student, GRADED, plan.edition, NOTEBOOK)
                for name in plan.wrong:
                    function = {"ppo": "ppo_clipped_objective", "dpo": "dpo_loss", "gae": "compute_gae"}[name[:3]]
                    result.misconceptions.append(named[name].named(name, function, "en"))
                results.append(result)
                stamps[(plan.edition, plan.student)] = plan.submitted.isoformat()
        gb.db.commit()
    misconception_record.record(course, results, stamps, named_by_course=True)


def expected_penalty(plan: Plan, points: dict[str, float]) -> float:
    """The course's policy, written out: 2 points per started hour after the deadline (due date plus
    extension), all the autograded points after 72 h, never more than them."""
    auto = sum(p for g, p in points.items() if g not in WRITTEN and g not in plan.lost)
    hours = (plan.submitted - DUE).total_seconds() / 3600 - plan.extension_hours
    if hours <= 0:
        return 0.0
    return auto if hours > 72 else min(auto, math.ceil(hours) * 2.0)
