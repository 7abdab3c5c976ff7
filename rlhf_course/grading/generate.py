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
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from rlhf_course.course.settings import Course


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


def generate_assignments(course: Course, assignments: list[str]) -> None:
    """Record each assignment in the course's gradebook with its configured due date where it has none
    (:func:`~rlhf_course.course.due_dates.record_due_date`), then generate its student version; raises RuntimeError with
    nbgrader's log at the first that fails."""
    from nbgrader.api import Gradebook
    from nbgrader.converters import GenerateAssignment
    from nbgrader.utils import capture_log

    from rlhf_course.course.due_dates import due_date_for, record_due_date

    coursedir = course.coursedir
    with _this_environment_on_path():
        for assignment in assignments:
            with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
                record_due_date(gradebook, assignment, due_date_for(course, assignment))
            coursedir.assignment_id = assignment
            converter = GenerateAssignment(coursedir=coursedir, config=course.config)
            converter.force, converter.create_assignment = True, True
            result = capture_log(converter)
            if not result["success"]:
                raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result.get('log', '')}\n"
                                   f"{result.get('error', '')}")
