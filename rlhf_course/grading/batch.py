"""Grade every submission in ``submitted/``: sandboxed, judged outside the student's process,
in parallel, written into nbgrader's gradebook, with feedback and a table of every outcome.

    python -m rlhf_course.grading.batch [ASSIGNMENT ...] [--workers N] [--dask tcp://scheduler:8786] [--student S ...]

Every notebook of every named assignment (default: each released one with submissions) is graded
by the checks in ``instructor/<assignment>_hidden_checks.py``, one per autograded cell.

The gradebook is nbgrader's (``RLHF_GRADEBOOK_URL`` or sqlite in the course root), so
``nbgrader export``, formgrader and the exchange keep working.  Only this process writes to it.
"""
from __future__ import annotations

import argparse
import csv
import html
import os
import re
import resource
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from queue import Queue

import nbformat
from tqdm.auto import tqdm

from rlhf_course import ASSIGNMENT, COURSE_ROOT, NOTEBOOK
from rlhf_course.grading import course as pipeline
from rlhf_course.grading import settings
from rlhf_course.grading.sandbox import Limits, sandbox_available
from rlhf_course.grading.trusted import MAX_CELLS, SCORED_STATES, SubmissionResult, grade_submission

REPORT = "grading_report.csv"


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
    path = course_root / "instructor" / f"{checks_module_name(assignment)}.py"
    if not path.is_file():
        raise NotReady(f"assignment {assignment!r} has no checks: {path} is missing")
    return pipeline.load_instructor_module(course_root, checks_module_name(assignment))


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


def grade_on_dask(course_root: Path, tasks: list[Task], address: str, limits: Limits):
    from distributed import Client, as_completed as dask_completed

    with Client(address) as client:
        futures = client.map(_grade_on_dask_worker, [str(course_root)] * len(tasks), tasks,
                             [limits] * len(tasks), pure=False)
        for future in dask_completed(futures):
            yield _result_from_dict(future.result())


def _result_from_dict(data: dict) -> SubmissionResult:
    from rlhf_course.grading.trusted import CellResult
    cells = {k: CellResult(**v) for k, v in data.pop("cells").items()}
    return SubmissionResult(cells=cells, **data)


# ----------------------------------------------------------------------------- recording

def submission_timestamp(course_root: Path, student: str, assignment: str = ASSIGNMENT):
    """When the student submitted, from nbgrader's timestamp.txt (None if absent or unreadable)."""
    from nbgrader.utils import parse_utc
    path = course_root / "submitted" / student / assignment / "timestamp.txt"
    try:
        return parse_utc(path.read_text().strip())
    except (OSError, ValueError):
        return None


def late_policy(course_root: Path):
    """The late-submission plugin nbgrader's autograde would use, from the course's config."""
    from traitlets.utils.importstring import import_item
    config = pipeline.course_config(course_root)
    plugin_class = config.AssignLatePenalties.get("plugin_class", "nbgrader.plugins.LateSubmissionPlugin")
    plugin_class = import_item(plugin_class) if isinstance(plugin_class, str) else plugin_class
    return plugin_class(config=config)


def record_in_gradebook(gb, result: SubmissionResult, timestamp=None, policy=None) -> None:
    """Write the trusted scores per grade cell into an open nbgrader ``Gradebook``; flag every
    submission that needs a person."""
    import warnings

    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import SAWarning

    notebook, assignment = result.notebook.removesuffix(".ipynb"), result.assignment
    needs_look = result.state not in SCORED_STATES or bool(result.flags)
    gb.update_or_create_student(result.student)
    try:
        submission = gb.find_submission(assignment, result.student)
        submission.timestamp = timestamp
    except MissingEntry:
        with warnings.catch_warnings():  # nbgrader's add_submission trips a harmless autoflush warning
            warnings.simplefilter("ignore", SAWarning)
            gb.add_submission(assignment, result.student, timestamp=timestamp)
    submission_nb = gb.find_submission_notebook(notebook, assignment, result.student)
    grades = {grade.name: grade for grade in submission_nb.grades}  # one query, not one per cell
    for cell in result.cells.values():
        grade = grades.get(cell.grade_id) or gb.find_grade(cell.grade_id, notebook, assignment, result.student)
        grade.auto_score = cell.score  # a person's manual score and comments stay, as in nbgrader's SaveAutoGrades
        grade.needs_manual_grade = result.state not in SCORED_STATES
    record_written_answers(gb, result, notebook)
    submission_nb.flagged = needs_look
    duedate = gb.find_assignment(assignment).duedate
    seconds_late = (timestamp - duedate).total_seconds() if (timestamp and duedate) else 0.0
    submission_nb.late_submission_penalty = (
        policy.late_submission_penalty(result.student, result.score, seconds_late) or 0.0
        if (policy is not None and seconds_late > 0) else None)
    names = [comment.name for comment in submission_nb.comments]
    for comment in submission_nb.comments:
        comment.auto_comment = cell_note(result, comment.name, names)
    gb.db.commit()


def record_written_answers(gb, result: SubmissionResult, notebook: str) -> None:
    """The written answers a person grades, recorded like nbgrader's SaveAutoGrades does: an answer left as
    released scores 0, any other needs a manual grade (and so does every one of an unreadable submission);
    a person's manual score and comments are never touched, and an answer they scored stays off the
    to-grade list (stock autograde puts it back on; `make grade` also refreshes the feedback pages).
    ``result.written`` gets each cell's points and the score and comment a person gave, for the feedback."""
    for cell in gb.find_notebook(notebook, result.assignment).grade_cells:
        if cell.cell_type != "markdown":
            continue
        answered = result.written.get(cell.name, {}).get("answered")
        grade = gb.find_grade(cell.name, notebook, result.assignment, result.student)
        grade.auto_score = 0.0 if answered is False else None
        grade.needs_manual_grade = grade.auto_score is None and grade.manual_score is None
        comment = next((c for c in grade.notebook.comments if c.name == cell.name), None)
        result.written[cell.name] = {
            "answered": answered, "points": float(cell.max_score),
            "score": grade.manual_score if grade.manual_score is not None else grade.auto_score,
            "comment": (comment.manual_comment if comment is not None else None) or ""}


def cell_note(result: SubmissionResult, cell: str, cells: list[str]) -> str | None:
    """The automatic comment the Formgrader shows under one answer cell: the review flags about
    this cell's code, plus what concerns the whole submission (its state when a person must look,
    flags about code outside the answer cells)."""
    lines = []
    if result.state not in SCORED_STATES:
        lines.append(f"[{result.state}] {result.detail}".strip())
    for flag in result.flags:
        where = flag.split(":", 1)[0]
        if where == cell or where not in cells:
            lines.append(f"review: {flag}")
    return printable("\n".join(lines))[:2000] or None


_EXPORTER = None


def _exporter():
    """One HTML exporter for the batch (building it loads templates), sanitising what the
    student wrote: no script, event handler or iframe from a notebook reaches the page.  It
    renders the release's cells once per batch (see :mod:`feedback_html`)."""
    global _EXPORTER
    if _EXPORTER is None:
        from rlhf_course.grading.feedback_html import make_exporter
        _EXPORTER = make_exporter()
    return _EXPORTER


def _student_notebook(result: SubmissionResult):
    """The executed notebook that came back from the sandbox, if it is a notebook of bounded size."""
    if not result.executed_notebook:
        return None
    try:  # written inside the sandbox: untrusted, maybe not even a notebook
        invalid: dict = {}  # reads validates; one validation, not two
        nb = nbformat.reads(result.executed_notebook, as_version=4, capture_validation_error=invalid)
        if invalid:
            raise invalid["ValidationError"]
        if len(nb.cells) > MAX_CELLS:
            raise ValueError(f"{len(nb.cells)} cells")
        for cell in nb.cells:  # only the output types a feedback page shows
            for output in cell.get("outputs", []):
                if "data" in output:
                    output["data"] = {k: v for k, v in output["data"].items()
                                      if k in ("text/plain", "text/html", "text/markdown", "image/png")}
        return nb
    except Exception:
        result.executed_notebook = None
        return None


SUBMISSION_FILES = ("timestamp.txt", "submission_secret.txt")  # what nbgrader's release_feedback reads


def _small_regular_file(path: Path, limit: int = 4096) -> str | None:
    """A short text file the student submitted, read without following links (None otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(limit + 1)
    if len(data) > limit:
        return None
    text = data.decode("utf-8", errors="replace")
    return text if text.strip().isprintable() else None


def submission_files(course_root: Path, student: str, assignment: str = ASSIGNMENT) -> dict[str, str]:
    """``timestamp.txt`` and ``submission_secret.txt`` as nbgrader expects them beside a feedback page
    (the secret names the page in the exchange; a submission that never went through the exchange
    gets a fresh one, so that ``nbgrader release_feedback`` never stops on it)."""
    import datetime as dt
    import secrets
    folder = course_root / "submitted" / student / assignment
    files = {name: _small_regular_file(folder / name) for name in SUBMISSION_FILES}
    if not files["timestamp.txt"]:
        files["timestamp.txt"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    if not files["submission_secret.txt"]:
        files["submission_secret.txt"] = secrets.token_hex(64)
    return files


def write_feedback(course_root: Path, result: SubmissionResult) -> Path:
    """feedback/<student>/<assignment>/<notebook>.html: each test's name, points and message,
    then the student's notebook as it ran; never the hidden tests' code."""
    rows = "".join(
        f"<tr><td><code>{html.escape(c.grade_id)}</code></td><td>{c.score:g} / {c.points:g}</td>"
        f"<td>{'passed' if c.score == c.points else 'failed'}</td><td>{html.escape(printable(c.message))}</td></tr>"
        for c in result.cells.values())
    written_score, written_points, written_rows = written_answer_rows(result)
    summary = (f"<h2>{html.escape(result.assignment)}: {result.score + written_score:g} / "
               f"{result.max_score + written_points:g}</h2>"
               f"<p>Outcome: <b>{html.escape(result.state)}</b>. "
               f"{html.escape(printable(result.detail.splitlines()[0] if result.detail else ''))}</p>"
               f"<p>Tests: {result.score:g} / {result.max_score:g}.</p>"
               f"<table><tr><th>test</th><th>points</th><th>result</th><th>property</th></tr>{rows}</table>"
               + written_rows)
    nb = _student_notebook(result)
    if nb is not None:
        annotate_grade_cells(nb, result)
        result.executed_notebook = nbformat.writes(nb)  # the autograded copy the Formgrader shows
    else:
        nb = nbformat.v4.new_notebook()
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(summary))
    body, _ = _exporter().from_notebook_node(nb)
    out = course_root / "feedback" / result.student / result.assignment / result.notebook.replace(".ipynb", ".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body)
    graded = course_root / "autograded" / result.student / result.assignment
    graded.mkdir(parents=True, exist_ok=True)
    for name, text in submission_files(course_root, result.student, result.assignment).items():
        for folder in (out.parent, graded):  # where release_feedback and generate_feedback look
            (folder / name).write_text(text)
    if result.executed_notebook:  # the executed copy, where nbgrader keeps autograded notebooks
        (graded / result.notebook).write_text(result.executed_notebook)
    return out


def written_answer_rows(result: SubmissionResult) -> tuple[float, float, str]:
    """The written answers' scores so far, their points, and a table of them for the feedback page."""
    if not result.written:
        return 0.0, 0.0, ""
    score = sum(w.get("score") or 0.0 for w in result.written.values())
    points = sum(w.get("points", 0.0) for w in result.written.values())
    rows = "".join(
        f"<tr><td><code>{html.escape(gid)}</code></td>"
        + (f"<td>{w['score']:g} / {w.get('points', 0):g}</td>" if w.get("score") is not None
           else f"<td>? / {w.get('points', 0):g}</td>")
        + f"<td>{'graded' if w.get('score') is not None else 'awaiting a person'}</td>"
        f"<td>{html.escape(printable(w.get('comment') or ''))}</td></tr>"
        for gid, w in result.written.items())
    table = (f"<p>Written answers, graded by a person: {score:g} / {points:g} so far.</p>"
             f"<table><tr><th>answer</th><th>points</th><th>status</th><th>comment</th></tr>{rows}</table>")
    return score, points, table


def annotate_grade_cells(nb, result: SubmissionResult) -> None:
    """Each test cell gets the trusted verdict as an output (the hidden ones show only their name
    in the student's copy): the Formgrader and the feedback page say why a test scored 0."""
    from rlhf_course.grading import notebooks
    for cell in nb.cells:
        graded = result.cells.get(notebooks.grade_id(cell) or "")
        if graded is None or cell.cell_type != "code":
            continue
        verdict = "passed" if graded.score == graded.points else "FAILED"
        text = f"[trusted grader] {verdict} ({graded.score:g} / {graded.points:g}): {printable(graded.message)}\n"
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Text from a submission, safe for a terminal, a CSV and a page: control characters (ANSI
    escapes included) become '?', line breaks stay."""
    return _CONTROL.sub("?", text or "")


def _one_line(text: str) -> str:
    return printable(text).replace("\n", " ").replace("\t", " ")


def format_table(results: list[SubmissionResult]) -> str:
    several = len({(r.assignment, r.notebook) for r in results}) > 1
    lines = [(f"{'notebook':<28} " if several else "") + f"{'student':<24} {'state':<20} {'score':>11}  {'s':>5}  note"]
    for r in sorted(results, key=lambda r: (r.assignment, r.notebook, r.student)):
        note = (r.detail.splitlines()[0] if r.detail else "")[:60]
        if r.flags:
            note = (note + "; " if note else "") + f"REVIEW: {r.flags[0]}" + (f" (+{len(r.flags) - 1})" if len(r.flags) > 1 else "")
        where = f"{r.assignment}/{r.notebook.removesuffix('.ipynb')}"
        lines.append((f"{where:<28} " if several else "") + f"{_one_line(r.student):<24} {r.state:<20} {r.score:>5.1f}/{r.max_score:<5.1f}  {r.seconds:>5.1f}  "
                     f"{_one_line(note)}")
    counts = {}
    for r in results:
        counts[r.state] = counts.get(r.state, 0) + 1
    lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def write_report(course_root: Path, results: list[SubmissionResult]) -> Path:
    path = course_root / REPORT
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        stages = sorted({stage for r in results for stage in r.timings})
        writer.writerow(["assignment", "notebook", "student", "state", "score", "max_score", "seconds", "review_flags", "detail",
                         *[f"s: {stage}" for stage in stages]])
        for r in sorted(results, key=lambda r: (r.assignment, r.notebook, r.student)):
            writer.writerow([r.assignment, r.notebook, _one_line(r.student), r.state, r.score, r.max_score, round(r.seconds, 2),
                             _one_line(" | ".join(r.flags)), _one_line((r.detail or "")[:500]),
                             *[round(r.timings.get(stage, 0.0), 3) for stage in stages]])
    return path


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
    from nbgrader.plugins import CsvExportPlugin

    results = []
    policy = late_policy(course_root)
    with Gradebook(db_url) as gb:  # the only writer
        for result in tqdm(source, total=len(tasks), desc="grading", disable=not show_progress):
            clock = time.monotonic()
            record_in_gradebook(gb, result, submission_timestamp(course_root, result.student, result.assignment), policy)
            clock = result.timed("gradebook writes", clock)
            try:
                write_feedback(course_root, result)
            except Exception as exc:  # the scores are in; a feedback page must not stop the batch
                result.detail = f"{result.detail}; no feedback page: {type(exc).__name__}: {exc}".lstrip("; ")
            result.timed("feedback page (HTML)", clock)
            results.append(result)
        write_report(course_root, results)
        if export:  # nbgrader's own CSV export plugin, as `nbgrader export` runs it
            CsvExportPlugin(to=str(course_root / "grades.csv")).export(gb)
    hand_back_outputs(course_root)
    return results


def hand_back_outputs(course_root: Path) -> None:
    """`sudo make grade` runs as root; what it wrote belongs to the course's owner, who runs the other
    nbgrader commands (release_feedback, export, the Formgrader) as themselves."""
    owner = course_root.stat()
    if os.geteuid() != 0 or owner.st_uid == 0:
        return
    outputs = [course_root / name for name in ("gradebook.db", "grades.csv", REPORT, "feedback", "autograded")]
    for top in outputs:
        if not top.exists() or top.is_symlink():
            continue
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)


class NotReady(RuntimeError):
    """Grading cannot start; the message says what to do first."""


def shown_url(db_url: str) -> str:
    """The gradebook URL as it may be printed: without its password."""
    from sqlalchemy.engine import make_url
    return make_url(db_url).render_as_string(hide_password=True)


def require_assignment_in_gradebook(db_url: str, assignments: list[str] = (ASSIGNMENT,)) -> None:
    """Grading writes scores into the grade cells ``nbgrader generate_assignment`` recorded; it never
    regenerates the release itself (that would rewrite the committed ``release/`` as a side effect)."""
    from nbgrader.api import Gradebook, MissingEntry
    with Gradebook(db_url) as gb:
        for assignment in assignments:
            try:
                gb.find_assignment(assignment)
            except MissingEntry:
                raise NotReady(f"the gradebook {shown_url(db_url)} has no assignment {assignment!r}: record it "
                               f"first with `make release` (nbgrader generate_assignment {assignment}) in the "
                               f"course root, with the same RLHF_GRADEBOOK_URL") from None


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
