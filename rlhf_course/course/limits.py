"""Every limit of trusted grading, in one frozen value passed from the command down to each sandbox.

Each field is also a setting (``c.TrustedGrading.<field>`` in ``nbgrader_config.py``, or
``--TrustedGrading.<field>=...`` on the command line; :class:`~rlhf_course.course.settings.TrustedGrading`
declares one setting per field below, its default and help taken from the field), so ``rlhf-grader grade
--help-all`` lists them all.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


def _limit(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Limits:
    # the sandbox: a cgroup per worker slot where the kernel allows one, rlimits in any case
    memory_bytes: int = _limit(4 * 2**30, "Address space of one sandboxed process, bytes (torch alone maps about 1.5 GiB).")
    cgroup_memory_bytes: int = _limit(3 * 2**30, "Resident memory of a whole sandbox, every process together, bytes.")
    cpus: float = _limit(1.0, "CPU share of one sandbox (its cgroup's quota).")
    cpu_seconds: int = _limit(300, "CPU seconds of one sandboxed process.")
    file_bytes: int = _limit(64 * 2**20, "Largest file a sandboxed process may write, bytes.")
    workspace_bytes: int = _limit(64 * 2**20, "Size of each of the sandbox's writable folders (/submission, /tmp), bytes.")
    processes: int = _limit(64, "Processes (and threads) of one sandbox's uid.")
    # time
    startup_seconds: float = _limit(60.0, "Seconds for the interpreter, torch and the student's cell definitions.")
    call_seconds: float = _limit(15.0, "Wall-clock seconds one call of a student's function may take.")
    feedback_seconds: float = _limit(60.0, "Seconds for running the whole notebook for the feedback copy (about 2 s).")
    submission_seconds: float = _limit(300.0, "Seconds for everything one submission costs (all calls plus the feedback "
                                              "run): no submission holds a worker longer.")
    slow_calls: int = _limit(3, "After this many calls that took more than half the per-call limit, the rest of the "
                                "submission's calls get a quarter of it (at least 1 s).")
    render_seconds: float = _limit(10.0, "The most one feedback page (and its autograded copy) may take to render.")
    min_render_seconds: float = _limit(2.0, "What a submission that spent its whole budget still gets for its page.")
    # sizes of what crosses into and out of the grader
    submitted_notebook_bytes: int = _limit(8 * 2**20, "A submitted notebook larger than this is not run (a person "
                                                      "looks at it); the release is about 50 kB.")
    cells: int = _limit(1000, "A submitted notebook with more cells is not run (the release has about 60).")
    reply_bytes: int = _limit(2 * 2**20, "One observation sent back by the sandbox, bytes.")
    notebook_bytes: int = _limit(16 * 2**20, "The executed notebook sent back for feedback, bytes.")
    log_bytes: int = _limit(4 * 2**20, "What the grader reads of one sandbox's log (its stderr: everything the student's "
                                       "code prints), bytes; past it the sandbox is stopped and the report flags it.")


def shorter_calls(limits: Limits) -> Limits:
    """The limits of a submission whose calls keep running close to the per-call limit."""
    return dataclasses.replace(limits, call_seconds=max(1.0, limits.call_seconds / 4))
