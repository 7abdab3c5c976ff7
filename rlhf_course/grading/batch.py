"""Grade every submission in ``submitted/``: sandboxed, judged outside the student's process,
in parallel, written into nbgrader's gradebook, with feedback and a table of every outcome.

    python -m rlhf_course.grading.batch [ASSIGNMENT ...] [--workers N] [--dask tcp://scheduler:8786] [--student S ...]

Every notebook of every named assignment (default: each released one with submissions) is graded
by the checks in ``instructor/<assignment>_hidden_checks.py``, one per autograded cell.

The gradebook is nbgrader's (the course's ``c.CourseDirectory.db_url``, sqlite in the course root by default), so
``nbgrader export``, formgrader and the exchange keep working.  Only this process writes to it.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

# nbformat imports jsonschema, which, when rfc3987_syntax is installed (jupyter_events asks for it), builds a
# Lark grammar for RFC 3987 IRIs at import: 1.15 s of CPU, a third of the grader's start-up.  Nothing this
# process validates uses the "iri" formats; without the module jsonschema simply does not check them.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from queue import Queue
from types import SimpleNamespace

from sqlalchemy.engine import make_url
from tqdm.auto import tqdm

from rlhf_course import ASSIGNMENT, COURSE_ROOT
from rlhf_course.grading import course as pipeline
from rlhf_course.grading import editions, settings
from rlhf_course.grading.feedback import render_seconds, write_feedback
from rlhf_course.grading.gradebook import (NotReady, late_policy, record_in_gradebook, require_assignment_in_gradebook,
                                           shown_url, submission_timestamp)
from rlhf_course.grading.report import REPORT, format_table, write_report
from rlhf_course.grading.sandbox import Limits, sandbox_available
from rlhf_course.grading.trusted import SubmissionResult, grade_submission


def submitted_students(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    folder = course_root / "submitted"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / assignment).is_dir())


def released_assignments(course_root: Path) -> list[str]:
    """The assignments with a student version in ``release/``."""
    folder = course_root / "release"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if folder.is_dir() else []


def released_notebooks(course_root: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (course_root / "release" / assignment).glob("*.ipynb"))


@dataclass(frozen=True)
class Task:
    """One student's copy of one notebook of one assignment: what a worker grades."""
    assignment: str
    notebook: str
    student: str


def grading_tasks(course_root: Path, assignments: list[str], students: list[str] | None) -> list[Task]:
    """Every released notebook of each assignment, for each student who submitted that assignment
    (of ``students``, when given: a named student's missing folder is graded, and so refused, as such)."""
    tasks = []
    for assignment in assignments:
        submitted = submitted_students(course_root, assignment)
        chosen = submitted if students is None else [
            s for s in students if s in submitted or len(assignments) == 1]
        tasks += [Task(assignment, notebook, student)
                  for notebook in released_notebooks(course_root, assignment) for student in chosen]
    return tasks


def checks_module_name(assignment: str) -> str:
    """The documented rule: an assignment's checks are ``instructor/<assignment>_hidden_checks.py``."""
    return f"{assignment}_hidden_checks"


def _checks(course_root: Path, assignment: str = ASSIGNMENT):
    """The checks that grade ``assignment``: its own, or for a language edition its base's, with the
    messages students read in the edition's language."""
    edition = editions.edition_of(course_root, assignment)
    base = edition.base if edition else assignment
    path = course_root / "instructor" / f"{checks_module_name(base)}.py"
    if not path.is_file():
        raise NotReady(f"assignment {assignment!r} has no checks: {path} is missing")
    module = pipeline.load_instructor_module(course_root, checks_module_name(base))
    if edition is None:
        return module
    return SimpleNamespace(__name__=module.__name__, CHECKS=editions.localized_checks(module.CHECKS, edition))


# ----------------------------------------------------------------------------- running

def grade_locally(course_root: Path, tasks: list[Task], workers: int, limits: Limits):
    """Yield results as they finish; each worker slot has its own sandbox uid."""
    import torch
    # The judging here is a few tiny tensor ops per case.  Several threads each driving an
    # OpenMP pool spin against the sandboxes for the cores (measured: 2 workers 3x slower).
    torch.set_num_threads(1)
    checks = {assignment: _checks(course_root, assignment) for assignment in {t.assignment for t in tasks}}
    slots: Queue = Queue()
    for slot in range(workers):
        slots.put(slot)

    def grade(task: Task) -> SubmissionResult:
        slot = slots.get()
        try:
            return grade_submission(course_root, task.student, checks[task.assignment], slot=slot, limits=limits,
                                    assignment=task.assignment, notebook=task.notebook)
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(grade, task) for task in tasks]
        for future in as_completed(futures):
            yield future.result()


def _grade_on_dask_worker(course_root: str, task: Task, limits: Limits) -> dict:
    """Runs on a Dask worker: the course directory is on shared storage at the same path."""
    import zlib

    import torch
    from distributed import get_worker

    torch.set_num_threads(1)
    # A stable uid per worker process (process limits count per uid); workers on other
    # machines may reuse a number, which only shares that count between them.
    slot = zlib.crc32(get_worker().address.encode()) % 1000
    result = grade_submission(Path(course_root), task.student, _checks(Path(course_root), task.assignment),
                              slot=slot, limits=limits, assignment=task.assignment, notebook=task.notebook)
    return asdict(result)


def dask_address_warning(address: str) -> str | None:
    """Why an address without TLS is a risk, or None for a tls:// one.  Dask workers grade as root
    (they start the sandboxes) and run whatever a client that reaches the scheduler sends them."""
    if address.startswith("tls://"):
        return None
    return (f"warning: {address} is not a tls:// address: any account or machine that can reach this scheduler "
            "can run code as root on its workers.  Run workers only where no student has a shell, on a private "
            "network, or use TLS with client certificates (README: A course that outgrows one machine).")


def grade_on_dask(course_root: Path, tasks: list[Task], address: str, limits: Limits):
    from distributed import Client, as_completed as dask_completed

    warning = dask_address_warning(address)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    with Client(address) as client:
        futures = client.map(_grade_on_dask_worker, [str(course_root)] * len(tasks), tasks,
                             [limits] * len(tasks), pure=False)
        for future in dask_completed(futures):
            yield _result_from_dict(future.result())


def _result_from_dict(data: dict) -> SubmissionResult:
    from rlhf_course.grading.trusted import CellResult
    cells = {k: CellResult(**v) for k, v in data.pop("cells").items()}
    return SubmissionResult(cells=cells, **data)


def grade_all(course_root: Path = COURSE_ROOT, workers: int | None = None, students: list[str] | None = None,
              dask_address: str | None = None, limits: Limits = Limits(), export: bool = True,
              show_progress: bool = True, assignments: list[str] | None = None) -> list[SubmissionResult]:
    """Grade every notebook of ``assignments`` (default: each released one with submissions) for
    ``students`` (default: everyone who submitted it); record, write feedback, report and export."""
    problem = sandbox_available()
    if problem:
        raise NotReady(f"cannot sandbox student code: {problem}")
    if assignments is None:
        assignments = [a for a in released_assignments(course_root) if submitted_students(course_root, a)]
    unknown = [a for a in assignments if a not in released_assignments(course_root)]
    if unknown:
        raise NotReady(f"no release of {', '.join(map(repr, unknown))} in {course_root / 'release'}: "
                       f"run `make release` first")
    db_url = pipeline.gradebook_url(course_root)
    require_assignment_in_gradebook(db_url, assignments)
    for assignment in assignments:
        _checks(course_root, assignment)  # a missing checks module stops the batch before any grading
    tasks = grading_tasks(course_root, assignments, students)
    workers = workers or os.cpu_count() or 1
    source = (grade_on_dask(course_root, tasks, dask_address, limits) if dask_address
              else grade_locally(course_root, tasks, workers, limits))
    from nbgrader.api import Gradebook
    from rlhf_course.grading.export import EditionsCsvExport

    results = []
    policy = late_policy(course_root)
    with Gradebook(db_url) as gb:  # the only writer
        for result in tqdm(source, total=len(tasks), desc="grading", disable=not show_progress):
            clock = time.monotonic()
            record_in_gradebook(gb, result, submission_timestamp(course_root, result.student, result.assignment), policy)
            clock = result.timed("gradebook writes", clock)
            try:
                write_feedback(course_root, result, render_seconds(result, limits))
            except Exception as exc:  # the scores are in; a feedback page must not stop the batch
                result.detail = f"{result.detail}; no feedback page: {type(exc).__name__}: {exc}".lstrip("; ")
            result.timed("feedback page (HTML)", clock)
            results.append(result)
        write_report(course_root, results)
        if export:  # the course's export plugin, as `nbgrader export` runs it (editions folded)
            EditionsCsvExport(to=str(course_root / "grades.csv"), course_root=str(course_root)).export(gb)
    hand_back_outputs(course_root)
    return results


def hand_back_outputs(course_root: Path) -> None:
    """`sudo make grade` runs as root; what it wrote belongs to the course's owner, who runs the other
    nbgrader commands (release_feedback, export, the Formgrader) as themselves."""
    owner = course_root.stat()
    if os.geteuid() != 0 or owner.st_uid == 0:
        return
    outputs = [course_root / name for name in ("grades.csv", REPORT, "feedback", "autograded")]
    gradebook = make_url(pipeline.gradebook_url(course_root))
    if gradebook.get_backend_name() == "sqlite" and gradebook.database:
        database = Path(gradebook.database)
        if database.parent.resolve().is_relative_to(course_root.resolve()):  # never chown outside the course
            outputs.append(database)
    for top in outputs:
        if not top.exists() or top.is_symlink():
            continue
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment", nargs="*", help="assignments to grade (default: each released one with submissions)")
    parser.add_argument("--course-root", type=Path, default=Path.cwd(), help="default: the current directory, as for nbgrader")
    parser.add_argument("--workers", type=int, default=None,
                        help="parallel sandboxes (default: c.TrustedGrading.workers, else the CPU count)")
    parser.add_argument("--dask", default=None,
                        help="address of a Dask scheduler to send grading tasks to (default: c.TrustedGrading.dask_address)")
    parser.add_argument("--student", action="append", help="grade only these students")
    for name in settings.BUDGETS:
        parser.add_argument("--" + name.replace("_", "-"), type=float, default=None,
                            help=f"default: c.TrustedGrading.{name}, else {getattr(Limits, name):g}")
    parser.add_argument("--help-all", action="store_true",
                        help="list the settings nbgrader_config.py can give (c.TrustedGrading, c.RlhfCourse) and exit")
    return parser.parse_args(argv)


def grading_options(args: argparse.Namespace) -> tuple[Limits, int | None, str | None]:
    """Limits, workers and Dask address: the command line's where given, else nbgrader_config.py's."""
    grading = settings.load(args.course_root.resolve())[1]
    budgets = {name: getattr(args, name) if getattr(args, name) is not None else getattr(grading, name)
               for name in settings.BUDGETS}
    return Limits(**budgets), args.workers or grading.workers or None, args.dask or grading.dask_address or None


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.help_all:
        print(settings.help_text())
        return 0
    limits, workers, dask = grading_options(args)
    try:
        results = grade_all(args.course_root.resolve(), workers, args.student, dask, limits,
                            assignments=args.assignment or None)
    except NotReady as exc:
        print(f"grading did not start: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    print(f"gradebook: {shown_url(pipeline.gradebook_url(args.course_root))}; report: {args.course_root / REPORT}; "
          f"feedback: {args.course_root / 'feedback'}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"grader peak memory: {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
