"""The students' nbgrader configuration, written once (:func:`student`) and called by every config file that
gives it: `make hub`'s generated ``<base>/jupyter/student/nbgrader_config.py``, the Zero-to-JupyterHub image's
(deploy/z2jh/jupyter/student/nbgrader_config.py), `make lab`'s (jupyter/student/nbgrader_config.py) and the
course's own nbgrader_config.py.  Like :func:`rlhf_course.exchange.configure`, it names classes and sets values
only: it imports neither nbgrader nor the launcher (``hub``) nor JupyterHub, so a student's every nbgrader command
stays as light as its config file.

Validate's limits.  The Validate button (the course's server extension,
rlhf_course/classroom/validate_extension.py) limits a cell by the kernel's own CPU-seconds and by the time it
is blocked on something other than a CPU, never by wall-clock time: on a machine a whole class loads, a
correct cell may wait minutes for a CPU (rlhf_course/classroom/patient_validate.py).  nbgrader's own Execute
(`nbgrader validate` in a terminal, the Formgrader) keeps wall-clock limits: after a cell's reply, nbclient
waits ``iopub_timeout`` seconds (4 by default) for the rest of its output and fails the cell ("Timeout waiting
for IOPub output") when it is late, as it is when a class loads the machine (the set-up cell's
``import torch``): the output always comes (the kernel has replied), so it waits as long as a cell may run.
"""
from __future__ import annotations

from rlhf_course import exchange

VALIDATE_SECONDS = 120  # nbgrader's Execute: a cell's run, its output after its reply, a kernel's start
VALIDATE_CPU_SECONDS = 120  # the course's Validate: CPU-seconds one cell may compute (an endless loop: stopped)
VALIDATE_BLOCKED_SECONDS = 600  # ... and seconds it may wait for neither a CPU nor its own computing (input())


def validate_limits(c) -> None:
    """Validate's limits on ``c`` (a traitlets Config): nbgrader's Execute waits VALIDATE_SECONDS for a cell,
    its late output and a kernel's start; the course's PatientExecute stops a cell after VALIDATE_CPU_SECONDS of
    CPU or VALIDATE_BLOCKED_SECONDS blocked.  Every user's on `make hub` (the instructor's Validate too)."""
    c.Execute.timeout = VALIDATE_SECONDS
    c.Execute.iopub_timeout = VALIDATE_SECONDS
    c.Execute.startup_timeout = VALIDATE_SECONDS
    c.PatientExecute.cpu_seconds = VALIDATE_CPU_SECONDS
    c.PatientExecute.blocked_seconds = VALIDATE_BLOCKED_SECONDS


def student(c, exchange_root: str, course_id: str) -> None:
    """Everything a student's nbgrader needs, on ``c`` (a traitlets Config): the course's strict exchange at
    ``exchange_root`` (a folder every student's server sees at that path) for the course ``course_id``, and
    Validate's limits (:func:`validate_limits`)."""
    exchange.configure(c, exchange_root, course_id)
    validate_limits(c)
