"""A sandbox that floods its log (stderr, where everything the student's code prints goes) costs the grader,
root and in no cgroup, a bounded number of bytes read: past ``Limits.log_bytes`` the sandbox is stopped,
its function's state is ``crashed`` and the report flags why."""
from __future__ import annotations

import shutil
import time

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, results, trusted
from rlhf_course.grading.gradebook import report
from rlhf_course.grading.assignment import resolve
from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course

from tests.support.course import REPO, needs_sandbox

pytestmark = needs_sandbox

FLOOD_SECONDS = 8.0

# The reference answer, after writing to its process's stderr for FLOOD_SECONDS on its first call.
PPO_FLOODING = f'''
import os, time
import torch

def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    if not os.path.exists("/tmp/flooded"):
        open("/tmp/flooded", "w").close()
        chunk, end = b"x" * 65536, time.monotonic() + {FLOOD_SECONDS}
        while time.monotonic() < end:
            os.write(2, chunk)
    clipped = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    return torch.min(ratio * advantage, clipped * advantage).mean()
'''


def test_a_stderr_flood_costs_the_grader_bounded_cpu_and_is_flagged(course, tmp_path):
    shutil.copytree(REPO / "release", course / "release")
    course_handle = Course.at(course)
    answers = examples.answers_for(course_handle, ())
    answers["ppo_answer"] = PPO_FLOODING
    examples.write_submission(course_handle, "flood", answers)
    graded = Course.at(course)
    limits = Limits(log_bytes=4 * 2**20)

    cpu = time.process_time()
    result = trusted.grade_submission(graded, resolve(graded, ASSIGNMENT), "flood", NOTEBOOK, limits=limits)
    cpu = time.process_time() - cpu

    assert result.state == results.CRASHED, result.detail
    assert any("wrote more than 4 MiB to its log" in flag for flag in result.flags), result.flags
    ppo = [cell for gid, cell in result.cells.items() if gid.startswith("ppo_")]
    assert ppo and all(cell.score == 0 for cell in ppo)
    others = [cell for gid, cell in result.cells.items() if not gid.startswith("ppo_")]
    assert others and all(cell.score == cell.points for cell in others), [c.message for c in others if c.score < c.points]
    # Reading the whole flood cost this process 2.5 CPU-s (7.3 for a flood of 30 s), measured before the limit;
    # stopping at 4 MiB leaves the grading's own cost (the judging of the other checks).
    seconds = result.timings["test cases"]
    assert seconds < FLOOD_SECONDS / 2, f"{seconds:.1f} s of test cases: the flood was waited out"
    assert cpu < 0.6, f"{cpu:.2f} CPU-s of the grader"  # an honest submission: 0.13
    row = report.write_report(tmp_path / report.REPORT, [result]).read_text()
    assert "wrote more than 4 MiB to its log" in row
