"""How long the class report takes for a large class: 300 students, the three assignments (each student in one
of the two editions), every grade cell scored, written answers partly left to grade, a tenth of them late.

One scratch course (this checkout's course files, a fresh release), its gradebook written through nbgrader's API
as trusted grading would (scores drawn per student ability, a fixed seed: not timed), then
``class_report.write_reports`` for the three assignments, ``--repeat`` times (the first in a fresh process pays
matplotlib's import and font cache).  Prints each time, wall and this process's CPU (the steadier figure on a shared
machine), with the machine's load averages and core count (compare the figures of one run).

    python bench/report.py [--students 300] [--repeat 3] [--keep]
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DUE = dt.datetime(2026, 12, 18, 23, 59)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_class(course, students: int, seed: int = 300) -> dict[str, int]:
    """Every student's submission of each assignment (one edition each) with its scores: graded cells passed
    with the student's ability as probability, a third of the written answers left to grade, 10 % late."""
    from nbgrader.api import (Assignment, BaseCell, Grade, Gradebook, Student, SubmittedAssignment,
                              SubmittedNotebook)
    from sqlalchemy.exc import SAWarning
    from sqlalchemy.orm import joinedload, with_polymorphic

    from rlhf_course.grading import editions
    rng = random.Random(seed)
    ids = [f"student{i:03d}" for i in range(students)]
    ability = {s: rng.uniform(0.4, 1.0) for s in ids}
    policy = course.late_policy()
    groups: dict[str, list[str]] = {}
    for edition in editions.editions(course):
        groups.setdefault(edition.base, [edition.base]).append(edition.assignment)
    counts = {}
    with Gradebook(course.db_url) as gb:
        gb.db.add_all([Student(id=s) for s in ids])
        gb.db.commit()
        for base, group in sorted(groups.items()):
            for name in group:
                gb.update_or_create_assignment(name, duedate=DUE)
            chosen = {s: group[i % len(group)] for i, s in enumerate(ids)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SAWarning)
                for s in ids:
                    late = rng.random() < 0.1
                    hours = rng.uniform(0.1, 80) if late else -rng.uniform(1, 100)
                    gb.add_submission(chosen[s], s, timestamp=DUE + dt.timedelta(hours=hours))
            cell = with_polymorphic(BaseCell, "*", flat=True)
            grades = (gb.db.query(Grade, Student.id)
                      .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                      .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                      .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
                      .join(Student, SubmittedAssignment.student_id == Student.id)
                      .filter(Assignment.name.in_(group))
                      .options(joinedload(Grade.cell.of_type(cell)), joinedload(Grade.notebook)).all())
            auto, notebook_of = {}, {}
            for grade, s in grades:
                points = float(grade.cell.max_score)
                notebook_of[s] = grade.notebook
                if grade.cell.cell_type == "markdown":
                    grade.manual_score = None if rng.random() < 0.33 else float(rng.randint(0, int(points)))
                    grade.needs_manual_grade = grade.manual_score is None
                else:
                    grade.auto_score = points if rng.random() < ability[s] else 0.0
                    grade.needs_manual_grade = False
                    auto[s] = auto.get(s, 0.0) + grade.auto_score
            for s, notebook in notebook_of.items():
                seconds = notebook.assignment.total_seconds_late
                notebook.late_submission_penalty = (policy.late_submission_penalty(s, auto.get(s, 0.0), seconds)
                                                    if seconds > 0 else None)
            gb.db.commit()
            counts[base] = len(notebook_of)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the scratch course and print its path")
    args = parser.parse_args()
    os.environ["RLHF_DUE_DATE"] = "2100-01-01 00:00:00 UTC"  # the release records none nearer; set per assignment
    from rlhf_course.grading import release
    from rlhf_course.grading.pages import class_report
    from rlhf_course.course.settings import Course
    from rlhf_course import copy_course_files

    scratch = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        root = copy_course_files(scratch / "course", REPO)
        print(f"cores {os.cpu_count()}, load average {load()}: releasing ...", flush=True)
        course = Course.at(root)
        release.generate_release(course)
        start = time.perf_counter()
        counts = write_class(course, args.students)
        print(f"gradebook written in {time.perf_counter() - start:.1f} s: {counts} (load {load()})", flush=True)
        times, cpu = [], []
        for run in range(args.repeat):
            before = load()
            start, start_cpu = time.perf_counter(), time.process_time()
            written = class_report.write_reports(course)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            print(f"run {run + 1}: {times[-1]:.2f} s ({cpu[-1]:.2f} s CPU) for {len(written)} reports "
                  f"({', '.join(f'{w.assignment} {w.students}' for w in written)}); load {before} before, "
                  f"{load()} after", flush=True)
        sizes = ", ".join(f"{w.html.name} {w.html.stat().st_size / 1024:.0f} kB" for w in written)
        print(f"class of {args.students}, 3 assignments: first {times[0]:.2f} s, best {min(times):.2f} s, "
              f"median {statistics.median(times):.2f} s; CPU first {cpu[0]:.2f} s, best {min(cpu):.2f} s; "
              f"pages {sizes}")
        if args.keep:
            print("course kept:", root)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
