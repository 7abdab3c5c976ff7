"""A check's cases are pipelined to the sandbox (sent together, judged as the replies come).  Grading
must decide exactly what asking them one at a time decided: a case after the one that failed its check
is never held against the student, even when it hangs the sandbox."""
from __future__ import annotations

import shutil

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, results, trusted
from rlhf_course.grading.assignment import resolve
from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course

from tests.support.course import REPO, needs_sandbox

pytestmark = needs_sandbox

# Wrong for eps = 0 (the first cases of ppo_epsilon_extremes), an endless loop for eps = 1e4 (that
# check's later cases, which no other check uses); the reference everywhere else.
PPO_WRONG_THEN_HANGING = '''
import torch

def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    if clip_epsilon >= 1e4:
        while True:
            pass
    if clip_epsilon == 0.0:
        return (ratio * advantage).mean()
    clipped = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    return torch.min(ratio * advantage, clipped * advantage).mean()
'''


def test_a_case_after_the_deciding_one_never_costs_points(course, monkeypatch):
    shutil.copytree(REPO / "release", course / "release")
    course_handle = Course.at(course)
    answers = examples.answers_for(course_handle, ())
    answers["ppo_answer"] = PPO_WRONG_THEN_HANGING
    examples.write_submission(course_handle, "ada", answers)
    started = []
    start = trusted.Sandbox.start
    monkeypatch.setattr(trusted.Sandbox, "start", lambda self: started.append(self) or start(self))

    graded = Course.at(course)
    # the hanging case costs its call limit, waited out: 1 s, some hundred times an honest call
    result = trusted.grade_submission(graded, resolve(graded, ASSIGNMENT), "ada", NOTEBOOK, limits=Limits(call_seconds=1))

    extremes = result.cells["ppo_epsilon_extremes"]
    assert extremes.score == 0 and "What went wrong: objective" in extremes.message, extremes.message
    assert "no answer within" not in extremes.message
    lost = [c for c in result.cells.values() if c.score < c.points]
    assert lost == [extremes], [(c.grade_id, c.message) for c in lost]  # every later check was run and passed
    assert result.state == results.FAILED_TESTS, result.detail  # not "timed out"
    assert result.assignment == ASSIGNMENT and result.notebook == NOTEBOOK
    assert len(started) == 2  # the hanging reply cost that sandbox; a fresh one graded what was left
