"""Grade every submission of the course: sandboxed, judged outside the student's process, in parallel,
written into nbgrader's gradebook, with feedback and a table of every outcome.  The command is
``rlhf-grader grade`` (:mod:`rlhf_course.grading.app`); this module is what it runs.

Every notebook of every named assignment (default: each released one with submissions) is graded
by the checks in ``instructor/<assignment>_hidden_checks.py``, one per autograded cell.  The
gradebook is nbgrader's (the course's ``c.CourseDirectory.db_url``), so ``nbgrader export``, the
Formgrader and the exchange keep working.  Only this process writes to it.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from queue import Queue

from sqlalchemy.engine import make_url
from tqdm.auto import tqdm

from rlhf_course.grading import deadlines
from rlhf_course.grading.pages import class_report
from rlhf_course.grading.gradebook import misconception_record
from rlhf_course.grading.assignment import Assignment, resolve
from rlhf_course.grading.gradebook.export import EditionsCsvExport
from rlhf_course.grading.pages.feedback import write_feedback
from rlhf_course.grading.generate import record_assignment
from rlhf_course.grading.gradebook.gradebook import record_in_gradebook, submission_timestamp
from rlhf_course.course.limits import Limits
from rlhf_course.grading.gradebook.report import REPORT, write_report
from rlhf_course.grading.results import SubmissionResult, note, result_from_dict
from rlhf_course.grading.sandbox.sandbox import ZYGOTE, Sandbox
from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import Course, NotReady, shown_url
from rlhf_course.grading.trusted import grade_submission


def submitted_students(course: Course, assignment: str) -> list[str]:
    folder = course.folder("submitted")
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if course.folder("submitted", p.name, assignment).is_dir())


def released_assignments(course: Course) -> list[str]:
    """The assignments with a student version in the release directory."""
    folder = course.folder("release")
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if folder.is_dir() else []


@dataclass(frozen=True)
class Task:
    """One student's copy of one notebook of one assignment: what a worker grades."""
    assignment: str
    notebook: str
    student: str


def grading_tasks(course: Course, assignments: dict[str, Assignment], students: list[str] | None) -> list[Task]:
    """Every released notebook of each assignment, for each student who submitted that assignment
    (of ``students``, when given: a named student's missing folder is graded, and so refused, as such)."""
    tasks = []
    for name, assignment in assignments.items():
        submitted = submitted_students(course, name)
        chosen = submitted if students is None else [
            s for s in students if s in submitted or len(assignments) == 1]
        tasks += [Task(name, notebook, student) for notebook in assignment.notebooks for student in chosen]
    return tasks


def _dropped_gradebook_hint() -> str:
    """Under sudo without RLHF_GRADEBOOK_URL: the likelier cause of a gradebook with no assignment is a gradebook
    elsewhere (PostgreSQL) whose URL sudo dropped, and `make release` as root would record into the wrong one."""
    if not os.environ.get("SUDO_USER") or "RLHF_GRADEBOOK_URL" in os.environ:
        return ""
    return ("if the course's gradebook is elsewhere (RLHF_GRADEBOOK_URL, e.g. PostgreSQL), sudo dropped that "
            "variable: run `sudo --preserve-env=RLHF_GRADEBOOK_URL make grade`, or write the URL in "
            "nbgrader_config.py (docs/classroom.md); otherwise ")


def complete_gradebook(course: Course, assignments: list[str]) -> None:
    """Before grading anything: each assignment in the gradebook with the notebooks and grade cells grading writes
    scores into.  An assignment released without them (`make lab`, ``nbgrader release_assignment``: its row and due
    date alone) has them recorded from source/ as `make release` records them, release/ left as it is
    (:func:`~rlhf_course.grading.generate.record_assignment`); a gradebook that holds them is not written to.
    Grading never regenerates the release itself (that would rewrite the committed ``release/`` as a side effect).
    :class:`NotReady` when an assignment is not in the gradebook at all, or lacks a released notebook."""
    from nbgrader.api import Gradebook, MissingEntry

    db_url = course.db_url
    for assignment in assignments:
        with Gradebook(db_url) as gb:
            try:
                recorded = sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)
            except MissingEntry:
                raise NotReady(f"the gradebook {shown_url(db_url)} has no assignment {assignment!r}: "
                               f"{_dropped_gradebook_hint()}record it first with `make release` (nbgrader "
                               f"generate_assignment {assignment}) in the course root (it records into the same "
                               f"c.CourseDirectory.db_url)") from None
        if not recorded:
            record_assignment(course, assignment)
            continue
        missing = sorted({p.stem for p in course.folder("release", assignment=assignment).glob("*.ipynb")}
                         - set(recorded))
        if missing:
            raise NotReady(f"the gradebook {shown_url(db_url)} records the notebooks {', '.join(recorded)} of "
                           f"{assignment!r}, not the released {', '.join(missing)}: run `make release` in the "
                           f"course root to record them, then grade again")


# ----------------------------------------------------------------------------- running

def grade_locally(course: Course, assignments: dict[str, Assignment], tasks: list[Task], workers: int, limits: Limits,
                  sandbox: type = Sandbox):
    """Yield results as they finish; each worker slot has its own sandbox uid."""
    import torch
    # The judging here is a few tiny tensor ops per case.  Several threads each driving an
    # OpenMP pool spin against the sandboxes for the cores (bench/RESULTS.md).
    torch.set_num_threads(1)
    slots: Queue = Queue()
    for slot in range(workers):
        slots.put(slot)

    def grade(task: Task) -> SubmissionResult:
        slot = slots.get()
        try:
            return grade_submission(course, assignments[task.assignment], task.student, task.notebook, slot, limits,
                                    sandbox)
        finally:
            slots.put(slot)

    pool = ThreadPoolExecutor(max_workers=workers)
    futures = []
    try:
        futures = [pool.submit(grade, task) for task in tasks]
        for future in as_completed(futures):
            yield future.result()
    finally:
        # A batch stopped early (Ctrl-C) ends with the sandboxes running now, not after grading every queued
        # submission for nothing: nobody records those results.
        running = sum(future.running() for future in futures)
        if running:
            print(f"stopping: waiting for the {running} sandbox(es) grading now to end (at most "
                  f"{limits.submission_seconds:g} s, c.TrustedGrading.submission_seconds; their results are not "
                  "recorded)", file=sys.stderr, flush=True)
        pool.shutdown(wait=True, cancel_futures=True)
        ZYGOTE.stop()  # the zygote (torch imported once for the batch) ends with it


def _grade_on_dask_worker(course: Course, task: Task, limits: Limits) -> dict:
    """Runs on a Dask worker: the course directory is on shared storage at the same path.  ``course``
    comes pickled from the grading command, configuration and all (the command line's settings too):
    the worker reads no configuration file."""
    import zlib

    import torch
    from distributed import get_worker

    torch.set_num_threads(1)
    # A stable uid per worker process (process limits count per uid); workers on other
    # machines may reuse a number, which only shares that count between them.
    slot = zlib.crc32(get_worker().address.encode()) % 1000
    return asdict(grade_submission(course, resolve(course, task.assignment), task.student, task.notebook, slot, limits))


def dask_address_warning(address: str) -> str | None:
    """Why an address without TLS is a risk, or None for a tls:// one.  Dask workers grade as root
    (they start the sandboxes) and run whatever a client that reaches the scheduler sends them."""
    if address.startswith("tls://"):
        return None
    return (f"warning: {address} is not a tls:// address: any account or machine that can reach this scheduler "
            "can run code as root on its workers.  Run workers only where no student has a shell, on a private "
            "network, or use TLS with client certificates (docs/classroom.md: a course that outgrows one machine).")


DASK_TLS_SETTINGS = {"distributed.comm.tls.ca-file": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
                     "distributed.comm.tls.client.cert": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
                     "distributed.comm.tls.client.key": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"}


def dask_tls_problem(address: str) -> str | None:
    """What a tls:// address lacks in this process's Dask configuration (the CA and the client's certificate and
    key), or None.  Without them distributed fails deep inside its connect with a TypeError that names none."""
    if not address.startswith("tls://"):
        return None
    import dask
    import distributed  # noqa: F401  (its configuration's defaults, the TLS settings among them)
    missing = [variable for setting, variable in DASK_TLS_SETTINGS.items() if not dask.config.get(setting, None)]
    if not missing:
        return None
    return (f"the Dask scheduler {address} takes TLS, and Dask's configuration here has no {', '.join(missing)}: "
            "set them to the CA's and the client's files (sudo drops them, and a gradebook URL exported too: `sudo "
            f"--preserve-env=RLHF_GRADEBOOK_URL,{','.join(DASK_TLS_SETTINGS.values())} make grade ...`), or put them "
            "in root's Dask configuration "
            "(docs/classroom.md: a course that outgrows one machine)")


class BatchStopped(CourseError):
    """A batch that cannot go on (no Dask worker left) or that left submissions ungraded: what was graded is
    recorded, the rest left as it was in the gradebook; the message says how many of each and what to do."""
    outcome = "stopped"


def duration(seconds: float) -> str:
    """``95`` -> ``"1 min 35 s"``: how long a wait has lasted, as a person reads it."""
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def _connected_workers(client) -> int | None:
    """How many workers the scheduler has now, or None when the scheduler does not answer."""
    try:
        return len(client.nthreads())
    except Exception:  # the scheduler's connection closed or timed out: the caller says so and keeps waiting
        return None


def _failure_reason(exc: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return ("its Dask worker died each time it graded it (distributed.scheduler.allowed-failures): read the "
                "workers' logs (memory, a killed process)")
    return f"its Dask task failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _ungraded_message(failed: dict[Task, str], total: int, address: str) -> str:
    """What the batch left ungraded because its task failed on the cluster, grouped by reason, and the command
    that grades them again."""
    by_reason: dict[str, list[Task]] = {}
    for task, reason in failed.items():
        by_reason.setdefault(reason, []).append(task)
    said = "; ".join(f"{', '.join(f'{t.student} ({t.assignment})' for t in tasks[:20])}"
                     f"{f' and {len(tasks) - 20} more' if len(tasks) > 20 else ''}: {reason}"
                     for reason, tasks in by_reason.items())
    assignments = " ".join(sorted({t.assignment for t in failed}))
    students = " ".join(f"--student={s}" for s in sorted({t.student for t in failed})[:20])
    return (f"{total - len(failed)} of {total} submissions were graded and recorded; {len(failed)} were not, their "
            f"gradebook rows left as they were: {said}.  Grade them again once the cause is mended: `sudo "
            f".venv/bin/python -m rlhf_course.grading grade {assignments} {students} --dask={address}` "
            "(or without --dask, on this machine)")


@contextlib.contextmanager
def _connected(address: str):
    """A Dask client of the scheduler at ``address``; while it connects (distributed retries for up to
    distributed.comm.timeouts.connect) the batch says it waits, and a scheduler it cannot reach is a
    :class:`NotReady` that says what to check, not distributed's traceback."""
    import dask
    from dask.utils import parse_timedelta
    from distributed import Client

    patience = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="s")
    print(f"connecting to the Dask scheduler at {address} (waiting up to {duration(patience)}: "
          "distributed.comm.timeouts.connect)", file=sys.stderr, flush=True)
    try:
        client = Client(address)
    except OSError as exc:  # refused, timed out, or a TLS handshake its certificates failed
        raise NotReady(f"could not reach the Dask scheduler at {address}: {' '.join(str(exc).split())}.  Check that "
                       "`dask scheduler` runs there, that this machine reaches its port, and for tls:// that the "
                       "client's certificate comes from the scheduler's CA (docs/classroom.md); nothing was graded"
                       ) from None
    # distributed logs a traceback of each failed reconnect; the batch says what happened in one line instead
    reconnect_log = logging.getLogger("distributed.client")
    level = reconnect_log.level
    reconnect_log.setLevel(logging.CRITICAL)
    try:
        with client:
            yield client
    finally:
        reconnect_log.setLevel(level)


def grade_on_dask(course: Course, tasks: list[Task], address: str, limits: Limits, worker_wait: float = 600.0):
    """Yield the result of each task as a worker finishes it.  While none finishes, every 30 s (or a quarter
    of ``worker_wait`` when that is shorter) say on stderr what the batch waits for and for how long; with no
    worker connected for ``worker_wait`` seconds (c.TrustedGrading.dask_worker_wait), stop with
    :class:`BatchStopped`.  A task that failed on the cluster (its worker killed again and again) is not graded,
    never scored 0: the batch goes on, then ends with :class:`BatchStopped` naming it."""
    from distributed import wait as dask_wait
    from distributed.client import FIRST_COMPLETED, FuturesCancelledError

    problem = dask_tls_problem(address)
    if problem:
        raise NotReady(problem)
    notice_every = min(30.0, worker_wait / 4)
    warning = dask_address_warning(address)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    with _connected(address) as client:
        if _connected_workers(client) == 0:  # else the progress bar stands still and says nothing
            print(f"no Dask worker has joined {address}: grading waits until one does (`dask worker {address} "
                  "...` on a grading machine, docs/classroom.md); Ctrl-C stops it", file=sys.stderr, flush=True)
        futures = client.map(_grade_on_dask_worker, [course] * len(tasks), tasks, [limits] * len(tasks), pure=False)
        task_of = dict(zip(futures, tasks))
        pending, failed, graded = set(futures), {}, 0
        last_progress = last_notice = time.monotonic()
        without_workers_since = None
        while pending:
            try:
                done, pending = dask_wait(pending, timeout=notice_every / 3, return_when=FIRST_COMPLETED)
            except TimeoutError:
                done = set()
            except FuturesCancelledError as exc:
                reasons = sorted({group.reason for group in getattr(exc, "error_groups", ())} - {None})
                raise BatchStopped(f"the connection to the Dask scheduler at {address} was lost "
                                   f"({', '.join(reasons) or 'cancelled'}): {graded} of "
                                   f"{len(tasks)} submissions were graded and recorded, the others' gradebook rows "
                                   "left as they were.  Check that the scheduler runs, then run the same `sudo make "
                                   "grade` again (it grades the class again, a person's grades kept)") from None
            now = time.monotonic()
            for future in done:
                try:
                    result = result_from_dict(future.result())
                except Exception as exc:
                    failed[task_of[future]] = _failure_reason(exc)
                    continue
                graded += 1
                yield result
            if done:
                last_progress = last_notice = time.monotonic()
                without_workers_since = None
                continue
            workers = _connected_workers(client)
            if workers:
                without_workers_since = None
            elif without_workers_since is None:
                without_workers_since = now
            if without_workers_since is not None and now - without_workers_since >= worker_wait:
                client.cancel(list(pending))
                lacking = "no Dask worker connected to" if workers == 0 else "no answer from the Dask scheduler at"
                raise BatchStopped(
                    f"{lacking} {address} for {duration(now - without_workers_since)} "
                    f"(c.TrustedGrading.dask_worker_wait = {worker_wait:g} s): {graded} of {len(tasks)} submissions "
                    f"were graded and recorded, the other {len(pending) + len(failed)} not graded, their gradebook "
                    f"rows left as they were.  Start the workers (`dask worker {address} ...` on each grading "
                    "machine, docs/classroom.md; their logs say why the last ones stopped), then run the same "
                    "`sudo make grade` again (it grades the class again, a person's grades kept)")
            if now - last_notice >= notice_every:
                last_notice = now
                stop_in = None if without_workers_since is None else worker_wait - (now - without_workers_since)
                print(_waiting_notice(address, workers, now - last_progress, graded, len(tasks), stop_in),
                      file=sys.stderr, flush=True)
        if failed:
            raise BatchStopped(_ungraded_message(failed, len(tasks), address))


def _waiting_notice(address: str, workers: int | None, idle: float, graded: int, total: int,
                    stop_in: float | None) -> str:
    """One line: what a Dask batch with no result for ``idle`` seconds waits for, and what to check."""
    progress = f"{graded} of {total} submissions graded and recorded"
    if workers is None:
        return (f"waiting for the Dask scheduler at {address}: it has not answered, no submission finished for "
                f"{duration(idle)} ({progress}); check that `dask scheduler` runs and this machine reaches it; "
                "Ctrl-C stops the batch, the grades recorded stay")
    if workers == 0:
        return (f"waiting for a Dask worker: none is connected to {address}, no submission finished for "
                f"{duration(idle)} ({progress}); check that `dask worker {address} ...` runs on the grading "
                f"machines (its log says why it stopped); the batch stops in {duration(max(stop_in or 0, 0))} "
                "without one (c.TrustedGrading.dask_worker_wait), Ctrl-C stops it now, the grades recorded stay")
    return (f"waiting for the Dask workers: {workers} connected to {address}, no submission finished for "
            f"{duration(idle)} ({progress}); each takes at most c.TrustedGrading.submission_seconds plus its "
            "sandbox's start; the workers' logs say what they do")


def grade_all(course: Course, workers: int | None = None, students: list[str] | None = None,
              dask_address: str | None = None, limits: Limits | None = None, export: bool = True,
              show_progress: bool = True, assignments: list[str] | None = None,
              sandbox: type = Sandbox, class_reports: bool = True) -> list[SubmissionResult]:
    """Grade every notebook of ``assignments`` (default: each released one with submissions) for
    ``students`` (default: everyone who submitted it); record, write feedback, report and export.
    ``course``: the :class:`Course` the command built.
    ``workers``, ``dask_address``, ``limits``: the course's ``TrustedGrading`` settings unless given.
    ``sandbox``: the class that runs student code (tests pass an in-process double; Dask uses :class:`Sandbox`).
    ``class_reports``: write the class report of each assignment graded (with ``export``; :mod:`class_report`)."""
    problem = sandbox.unavailable()
    if problem:
        raise NotReady(f"cannot sandbox student code: {problem}")
    grading = course.grading
    limits = grading.limits() if limits is None else limits
    workers = workers or grading.workers or os.cpu_count() or 1
    dask_address = dask_address if dask_address is not None else grading.dask_address
    if sandbox is Sandbox and not dask_address:
        ZYGOTE.prestart(course.cache_directory)  # torch's import in the zygote, while the batch gets ready
    if assignments is None:
        assignments = [a for a in released_assignments(course) if submitted_students(course, a)]
    resolved = {name: resolve(course, name) for name in assignments}  # before any grading: what is missing stops it
    complete_gradebook(course, assignments)  # before grading anything too
    granted = deadlines.granted(course)  # extensions granted before a submission existed; damaged: said before grading
    tasks = grading_tasks(course, resolved, students)
    if dask_address and dask_tls_problem(dask_address):  # said before the progress bar starts, not under it
        raise NotReady(dask_tls_problem(dask_address))
    source = (grade_on_dask(course, tasks, dask_address, limits, grading.dask_worker_wait) if dask_address
              else grade_locally(course, resolved, tasks, workers, limits, sandbox))
    from nbgrader.api import Gradebook

    results = []
    stamps = {}  # (assignment, student) -> the submission's timestamp, for the misconception record
    policy = course.late_policy()
    stopped = None  # a batch that could not go on: what it graded is written as any batch's, then it is said
    with Gradebook(course.db_url) as gb:  # the only writer
        try:
            for result in tqdm(source, total=len(tasks), desc="grading", disable=not show_progress):
                clock = time.monotonic()
                submitted = course.folder("submitted", result.student, result.assignment)
                stamp = submission_timestamp(submitted)
                record_in_gradebook(gb, result, stamp, policy, granted)
                stamps[(result.assignment, result.student)] = stamp.isoformat() if stamp else ""
                clock = result.timed("gradebook writes", clock)
                try:
                    write_feedback(course, result, limits)
                except Exception as exc:  # the scores are in; a feedback page must not stop the batch
                    note(result, f"no feedback page: {type(exc).__name__}: {exc}")
                result.timed("feedback page (HTML)", clock)
                results.append(result)
        except BatchStopped as exc:
            stopped = exc
        except KeyboardInterrupt:  # Ctrl-C: what was graded is written as any batch's, then it stops
            gb.db.rollback()  # a result interrupted while it was being recorded is not half there
            stopped = BatchStopped(f"interrupted (Ctrl-C): {len(results)} of {len(tasks)} submissions were graded "
                                   f"and recorded, the other {len(tasks) - len(results)} not graded, their gradebook "
                                   "rows left as they were; run `sudo make grade` again to grade them")
        write_report(course.root / REPORT, results)
        try:  # the scores are in: a damaged record is said, and stops nothing
            misconception_record.record(course, results, stamps, grading.name_misconceptions)
        except (OSError, ValueError) as exc:
            print(f"misconceptions not recorded for the class report: {exc}", file=sys.stderr, flush=True)
        if export:  # the course's export plugin, as `nbgrader export` runs it (editions folded)
            EditionsCsvExport(config=course.config, to=str(course.root / "grades.csv"),
                              course_root=str(course.root)).export(gb)
    if export and class_reports:
        write_class_reports(course, assignments)
    hand_back_outputs(course)
    if stopped:
        raise stopped
    return results


def write_class_reports(course: Course, assignments: list[str]) -> None:
    """The class report of every assignment graded (:mod:`class_report`).  The scores are in by now: a report
    that cannot be written is said on stderr, and `python -m rlhf_course.grading report` can write it later."""
    if not assignments:
        return
    try:
        class_report.write_reports(course, assignments)
    except Exception as exc:
        print(f"class report not written: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def hand_back_outputs(course: Course) -> None:
    """`sudo make grade` runs as root; what it wrote belongs to the course's owner, who runs the other
    nbgrader commands (release_feedback, export, the Formgrader) as themselves."""
    owner = course.root.stat()
    if os.geteuid() != 0 or owner.st_uid == 0:
        return
    outputs = [course.root / "grades.csv", course.root / REPORT, course.root / misconception_record.RECORD,
               course.root / class_report.FOLDER, course.folder("feedback"), course.folder("autograded")]
    gradebook = make_url(course.db_url)
    if gradebook.get_backend_name() == "sqlite" and gradebook.database:
        database = Path(gradebook.database)
        if database.parent.resolve().is_relative_to(course.root):  # never chown outside the course
            outputs.append(database)
    for top in outputs:
        if not top.exists() or top.is_symlink():
            continue
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)


if __name__ == "__main__":
    sys.exit("rlhf_course.grading.batch is not a command: grade with `python -m rlhf_course.grading grade "
             "[ASSIGNMENT ...]` (`sudo make grade`; --help-all lists every setting)")
