"""A submission whose calls each run just under the per-call limit would hold a worker for its whole
budget and gain nothing: after a few such calls the rest get a quarter of the limit."""
import time

import pytest

from rlhf_course.grading import batch, examples
from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, needs_sandbox, release_course

pytestmark = [pytest.mark.slow, needs_sandbox]

# The feedback run calls the slow function in every visible test: it runs out of its limit whatever that is, and
# costs no points (the scores are the calls').  Small on purpose.
# Two slow calls before the limit shortens (a setting; three by default): each costs the test SLOW seconds of waiting.
LIMITS = Limits(call_seconds=2.0, feedback_seconds=1.0, slow_calls=2)
SLOW = 1.2  # seconds per call: under the limit, over half of it


def test_calls_that_keep_running_long_get_a_shorter_limit(tmp_path):
    course = copy_course(tmp_path / "course")
    release_course(course)
    course_handle = Course.at(course)
    answers = examples.answers_for(course_handle, ())
    answers["ppo_answer"] += ("\n\nimport time as _time\n_fast = ppo_clipped_objective\n\n"
                              "def ppo_clipped_objective(*args, **kwargs):\n"
                              f"    _time.sleep({SLOW})\n    return _fast(*args, **kwargs)\n")
    examples.write_submission(course_handle, "slowpoke", answers)
    start = time.monotonic()
    [result] = batch.grade_all(course_handle, workers=1, limits=LIMITS, show_progress=False, export=False)
    took = time.monotonic() - start
    print(f"graded in {took:.1f} s; test cases {result.timings.get('test cases', 0):.1f} s; {result.flags}")
    assert any("the rest had 1 s each" in flag for flag in result.flags), result.flags  # 2 s / 4, at least 1 s
    # Limits.slow_calls slow calls, then one that runs out of the shorter limit; the other functions score
    assert result.timings["test cases"] < LIMITS.slow_calls * SLOW + 1.0 + 3.0
    assert result.state == "timed out"
    lost = {c.grade_id for c in result.cells.values() if c.score < c.points}
    assert lost and all(c.grade_id.startswith("ppo") for c in result.cells.values() if c.grade_id in lost)
