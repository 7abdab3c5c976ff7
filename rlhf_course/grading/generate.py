"""``nbgrader db assignment add [--duedate]`` then ``nbgrader generate_assignment --force``, for several
assignments, in this process, with the course's configuration (:class:`~rlhf_course.course.settings.Course`:
the files and the command line's settings, so ``--CourseDirectory.db_url=...`` or a renamed
``release_directory`` reach nbgrader exactly as they reach the grader).

Each step is the call nbgrader's own command makes: the gradebook's ``update_or_create_assignment``
and the ``GenerateAssignment`` converter run as ``NbGraderAPI.generate_assignment`` (the Formgrader's
Generate button) runs it, without the API's constructor, which also lists the exchange.  Nothing here
needs a subprocess: the converter takes a configuration, and generating runs no kernel.  The one
program nbgrader starts is ``alembic`` (to stamp a new gradebook), looked up on PATH: this interpreter's
folder is put first while the calls run, as the Makefile's PATH does for nbgrader's command line.

The converter writes into a scratch folder beside the release folder, never into release/ itself: nbgrader's
``--force`` removes the old release before it records anything, and a failure (an assignment whose submissions
pin its notebooks, a broken source) would leave the committed release deleted.  Only a complete student version
replaces release/<assignment>.  :func:`record_assignment` runs the same steps to record an assignment's notebooks
and grade cells alone, the generated copy compared with the release and discarded.
"""
from __future__ import annotations

import contextlib
import filecmp
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path

from rlhf_course.course.editions import base_of
from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import Course, NotReady, shown_url


class GenerateError(CourseError, RuntimeError):
    """nbgrader could not generate an assignment; its release folder is as it was.  ``generated``: the assignments
    of the same call generated before it."""

    generated: list[str] = []


@contextlib.contextmanager
def _this_environment_on_path():
    """``alembic`` (called by nbgrader when it creates a gradebook) from this interpreter's environment."""
    saved = os.environ.get("PATH")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), *([saved] if saved else [])])
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = saved


@contextlib.contextmanager
def _empty_submissions_set_aside(course: Course, assignment: str):
    """nbgrader refuses to record an assignment's notebooks once it has submissions.  A submission recorded
    while the gradebook held the assignment's row alone (released by `make lab` or ``nbgrader release_assignment``,
    then an extension granted) has no notebook and no grade: it is removed while nbgrader records the notebooks,
    then added again with its timestamp and extension by nbgrader's ``add_submission``, which gives it every
    notebook and grade cell recorded meanwhile."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning

    coursedir = course.coursedir
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            recorded = gb.find_assignment(assignment)
        except MissingEntry:
            recorded = None
        held = [] if recorded is None or recorded.notebooks else [
            (s.student_id, s.timestamp, s.extension) for s in recorded.submissions]
        for student, _, _ in held:
            gb.remove_submission(assignment, student)
    try:
        yield
    finally:
        if held:
            with Gradebook(coursedir.db_url, coursedir.course_id) as gb, warnings.catch_warnings():
                warnings.simplefilter("ignore", SAWarning)  # add_submission's harmless autoflush warning
                for student, timestamp, extension in held:
                    gb.add_submission(assignment, student, timestamp=timestamp, extension=extension)


def _shown(course: Course, path: Path) -> str:
    """A path as the instructor types it in the course root (absolute when it lies elsewhere)."""
    return path.relative_to(course.root).as_posix() if path.is_relative_to(course.root) else str(path)


def _nbgraders_reasons(result: dict) -> str:
    """The exceptions' messages in nbgrader's captured log, on one line (the last lines of the tracebacks it logs;
    the converter's own exception, in ``error``, only says to read them)."""
    text = result.get("log", "") or result.get("error", "")
    found = re.findall(r"^\s*(?:\[ERROR\] )?(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): (.+)$", text, re.M)
    reasons = list(dict.fromkeys(line.strip() for line in found))
    if not reasons:
        reasons = [line.removeprefix("[ERROR] ") for line in text.splitlines() if line.startswith("[ERROR] ")][-1:]
    return "; ".join(reasons) or "no reason logged"


def _what_to_do(course: Course, assignment: str) -> str:
    """The next step after nbgrader refused to generate ``assignment``."""
    from nbgrader.api import Gradebook, MissingEntry

    base = base_of(course, assignment)
    source = _shown(course, course.folder("source", assignment=base))
    inputs, paths = (source, source) if base == assignment else (f"{source} and i18n/", f"{source} i18n/")
    with Gradebook(course.db_url) as gb:
        try:
            submissions = len(gb.find_assignment(assignment).submissions)
        except MissingEntry:
            submissions = 0
    if submissions:
        return (f"The gradebook {shown_url(course.db_url)} has submissions of {assignment}, and nbgrader keeps the "
                f"notebooks and grade cells they were recorded with: put {inputs} back as released "
                f"(git checkout -- {paths}), then run `make release` again, or release "
                f"the change as a new assignment.")
    return f"Mend {inputs} as nbgrader says, then run `make release` again."


def _generate(course: Course, assignment: str, folder: Path) -> Path:
    """Record ``assignment`` in the gradebook (its configured due date where it has none, then its notebooks and
    grade cells, as nbgrader's generate_assignment records them) and write its student version into
    ``folder``/<assignment>; that folder.  :class:`GenerateError` with nbgrader's reason when it fails."""
    from nbgrader.api import Gradebook
    from nbgrader.converters import GenerateAssignment
    from nbgrader.utils import capture_log

    from rlhf_course.course.due_dates import due_date_for, record_due_date

    coursedir = course.coursedir
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        record_due_date(gradebook, assignment, due_date_for(course, assignment))
    coursedir.assignment_id = assignment
    coursedir.release_directory = str(folder)  # an absolute path: nbgrader's format_path keeps it as it is
    converter = GenerateAssignment(coursedir=coursedir, config=course.config)
    converter.force, converter.create_assignment = True, True
    with _this_environment_on_path(), _empty_submissions_set_aside(course, assignment):
        result = capture_log(converter)
    release = _shown(course, course.folder("release", assignment=assignment))
    if not result["success"]:
        raise GenerateError(f"{assignment} not generated: {release} is as it was. nbgrader generate_assignment "
                            f"{assignment} failed: {_nbgraders_reasons(result)}. {_what_to_do(course, assignment)}")
    return folder / assignment


def _scratch(course: Course):
    """A folder beside the release folder (the same file system: a generated assignment moves in by renaming),
    removed afterwards."""
    parent = course.folder("release").parent
    parent.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".release-", dir=parent)


def _replace(target: Path, generated: Path, scratch: Path) -> None:
    """``generated`` becomes ``target``; the folder it replaces is put back if the move fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    replaced = scratch / ".replaced"
    if target.exists():
        target.rename(replaced)
    try:
        generated.rename(target)
    except OSError:
        if replaced.exists():
            replaced.rename(target)
        raise


def generate_assignments(course: Course, assignments: list[str]) -> list[str]:
    """Record each assignment in the course's gradebook with its configured due date where it has none
    (:func:`~rlhf_course.course.due_dates.record_due_date`), then generate its student version and put it in the
    release folder in place of the old one; the assignments generated, in order.  At the first that fails,
    :class:`GenerateError` (its release folder as it was, the assignments before it generated) with nbgrader's
    reason and what to do."""
    done = []
    for assignment in assignments:
        with _scratch(course) as scratch:
            try:
                generated = _generate(course, assignment, Path(scratch))
            except GenerateError as exc:
                exc.generated = done
                raise
            _replace(course.folder("release", assignment=assignment), generated, Path(scratch))
        done.append(assignment)
    return done


def _differing(generated: Path, released: Path, ignore: list[str]) -> list[str]:
    """The files of two versions of an assignment that differ, or that one of them lacks."""
    from rlhf_course.course.release_manifest import released_files

    mine, theirs = released_files(generated, ignore), released_files(released, ignore)
    return sorted(name for name in mine.keys() | theirs.keys()
                  if name not in mine or name not in theirs or not filecmp.cmp(mine[name], theirs[name], shallow=False))


def record_assignment(course: Course, assignment: str) -> None:
    """Record the notebooks and grade cells of an assignment released without them (`make lab`'s release, or
    ``nbgrader release_assignment``, records its row and due date alone) exactly as `make release` records them,
    from source/, leaving release/ as it is.  Only a source that generates the release students fetched is
    recorded: otherwise what was recorded is removed again and :class:`NotReady` says what differs."""
    from nbgrader.api import Gradebook

    released = course.folder("release", assignment=assignment)
    ignore = list(course.coursedir.ignore)
    with tempfile.TemporaryDirectory(prefix="rlhf-record-") as scratch:
        try:
            generated = _generate(course, assignment, Path(scratch))
        except GenerateError as exc:
            raise NotReady(f"the gradebook has no notebooks of {assignment}, and source/ cannot record them: {exc}"
                           ) from None
        differing = _differing(generated, released, ignore)
    if not differing:
        return
    with Gradebook(course.db_url) as gb:
        for notebook in [nb.name for nb in gb.find_assignment(assignment).notebooks]:
            gb.remove_notebook(notebook, assignment)
    source, release = _shown(course, course.folder("source", assignment=assignment)), _shown(course, released)
    raise NotReady(
        f"the gradebook has no notebooks of {assignment} (released by `make lab` or nbgrader release_assignment), "
        f"and they are recorded from the source that generates the release students fetched, but "
        f"{', '.join(f'{release}/{name}' for name in differing)} is not what {source} generates now: put "
        f"the source back as released (git checkout -- {source}), then grade again")
