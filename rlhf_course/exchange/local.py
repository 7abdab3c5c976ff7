"""`make lab`'s exchange on one machine: the course's assignments released into the course's own exchange
(``exchange/``, or ``RLHF_EXCHANGE_ROOT``), each through the course's release class (so nothing `make release` did
not generate is published), before the student's JupyterLab opens on ``student/``, where Fetch writes and from
where Submit sends.  ``python -m rlhf_course.grading lab-release`` prints what it did, in English and Chinese.
"""
from __future__ import annotations

import logging
from pathlib import Path

from rlhf_course import i18n
from rlhf_course.course.settings import Course

STUDENT_FOLDER = "student"  # the student's folder in the course, git-ignored: `make lab` opens JupyterLab there

NOTHING_RELEASED = ("Nothing has been released yet: the Assignment List stays empty until an assignment is released "
                    "(in the course folder: make release, then nbgrader release_assignment NAME).")


def both(english: str, **fields) -> list[str]:
    """A sentence a student reads in the terminal, in English then Chinese."""
    return [i18n.t(english, i18n.ENGLISH, **fields), i18n.t(english, i18n.CHINESE, **fields)]


def released_assignments(outbound: Path) -> list[str]:
    return sorted(p.name for p in outbound.iterdir() if p.is_dir()) if outbound.is_dir() else []


def release_for_lab(course: Course) -> list[str]:
    """Release each assignment of the course's release folder that the exchange does not hold yet (one it holds is
    left as it is: ``nbgrader release_assignment NAME --force`` replaces it); the lines to print: what was released,
    what was refused and why, and where the student works, or that nothing is released."""
    from nbgrader.auth import Authenticator
    from nbgrader.exchange import ExchangeError, ExchangeFactory

    factory = ExchangeFactory(config=course.config)
    exchange_root = Path(factory.exchange(config=course.config).root)
    course_id = course.coursedir.course_id
    outbound = exchange_root / course_id / "outbound"
    already = released_assignments(outbound)
    release_folder = course.folder("release")
    generated = sorted(p.name for p in release_folder.iterdir()
                       if p.is_dir() and any(p.glob("*.ipynb"))) if release_folder.is_dir() else []
    lines, released = [], []
    quiet = logging.getLogger("rlhf_course.exchange.local")  # the release's log: its refusal is the exception's
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    for assignment in (a for a in generated if a not in already):
        coursedir = course.coursedir
        coursedir.assignment_id = assignment
        try:
            factory.ReleaseAssignment(coursedir=coursedir, authenticator=Authenticator(config=course.config),
                                      config=course.config, log=quiet).start()
            released.append(assignment)
        except ExchangeError as refused:
            lines.append(str(refused))
    if released:
        lines += both("Released to the exchange ({where}): {names}.", where=outbound, names=", ".join(released))
    if already:
        lines += both("Already in the exchange ({where}): {names}.", where=outbound, names=", ".join(already))
    if not released_assignments(outbound):
        lines += both(NOTHING_RELEASED)
    student = course.root / STUDENT_FOLDER
    lines += both("Your folder: {folder}. Nbgrader > Assignment List > Fetch puts each assignment there; "
                  "Submit sends what you saved there.", folder=student)
    return lines

