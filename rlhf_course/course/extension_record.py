"""Every extension granted, per student and base assignment, kept by the course in ``extensions.json`` in the
course root (the instructor's, beside the gradebook)::

    {"<student>": {"<base assignment>": <seconds>}}

nbgrader keeps an extension on the submission (``SubmittedAssignment.extension``), and a student submits one
language edition of an assignment (rlhf or rlhf_zh) whenever they like, so an extension granted before they
submit has no row to live on: creating one would put a submission they never made in the Formgrader, the class
report and the exports.  The record holds it instead; a submission row gets it when it exists (at the grant,
or when grading records the submission), whichever edition it is.  A file, not a table: it has to work with a
PostgreSQL gradebook that only nbgrader's schema may touch, and it stays readable by a person.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from dataclasses import dataclass

from rlhf_course.course import editions
from rlhf_course.course.settings import Course

RECORD = "extensions.json"


def read(course: Course) -> dict[str, dict[str, dt.timedelta]]:
    """{student: {base assignment: extension}} ({} when nothing was granted yet); a damaged file is an error
    that says where it is, before anything is written."""
    path = course.root / RECORD
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(student): {str(base): dt.timedelta(seconds=float(seconds)) for base, seconds in given.items()}
                for student, given in data.items()}
    except (ValueError, UnicodeDecodeError, AttributeError, TypeError) as exc:
        raise ValueError(f"{path} is not the record of extensions `extend` writes ({exc}): repair it from "
                         f"`extend --list`, or move it aside and grant the extensions again") from None


def write(course: Course, granted: dict[str, dict[str, dt.timedelta]]) -> None:
    """Replace the record atomically (a reader never sees half a file)."""
    path = course.root / RECORD
    data = {student: {base: extension.total_seconds() for base, extension in sorted(given.items())}
            for student, given in sorted(granted.items()) if given}
    fd, temporary = tempfile.mkstemp(prefix=f".{RECORD}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, indent=1)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


@dataclass(frozen=True)
class Granted:
    """The record read once, for a batch: what a submission of an edition gets."""
    by_student: dict[str, dict[str, dt.timedelta]]
    base: dict[str, str]  # edition -> its base assignment (rlhf_zh -> rlhf); others are their own base

    @classmethod
    def of(cls, course: Course) -> "Granted":
        return cls(read(course), {e.assignment: e.base for e in editions.editions(course)})

    def for_submission(self, student: str, assignment: str) -> dt.timedelta | None:
        """The extension a submission of ``assignment`` (any edition) by ``student`` gets (None: none granted)."""
        return self.by_student.get(student, {}).get(self.base.get(assignment, assignment))
