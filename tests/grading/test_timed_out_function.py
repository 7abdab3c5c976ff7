"""A function whose call never returns (or runs out of memory) costs that function's cells, not the others': the other
functions keep the points they earned, and a person is asked to look only at what the grader could not judge (the cells
the timeout or the memory limit kept from being judged) and at the written answers, in the gradebook and in the class
report's to-do list."""
from __future__ import annotations

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.course.settings import Course
from rlhf_course.grading import examples, instructor
from rlhf_course.grading.pages import class_report
from rlhf_course.grading.results import MEMORY_LIMIT, TIMED_OUT
from rlhf_course.grading.sandbox.observe import Observation, decode_call, to_wire
from rlhf_course.grading.sandbox.sandbox import SandboxTimeout
from tests.support.course import cell_points, copy_course, release_course
from tests.support.in_process_sandbox import InProcessSandbox, grade_in_process

pytestmark = pytest.mark.slow  # the shared release

LOOPING = "dpo_loss"  # the function whose every call runs past the per-call limit, or out of memory
ANSWERED = "lab_question_1"  # the one written answer the student wrote (the others are left as released)


class LoopingSandbox(InProcessSandbox):
    """The in-process sandbox, where every call of :data:`LOOPING` runs out of the per-call limit (as a
    ``while True:`` in the student's function does in the real sandbox)."""

    def send_call(self, request: bytes) -> None:
        if decode_call(request[1:])[0] == LOOPING:
            self._replies.append(None)
        else:
            super().send_call(request)

    def receive_call(self, since: float) -> bytes:
        if self._replies and self._replies[0] is None:
            self.kill()
            raise SandboxTimeout("call")
        return super().receive_call(since)


class OutOfMemorySandbox(InProcessSandbox):
    """The in-process sandbox, where every call of :data:`LOOPING` runs out of memory (the limit's MemoryError)."""

    def send_call(self, request: bytes) -> None:
        if decode_call(request[1:])[0] == LOOPING:
            self._replies.append(to_wire(Observation(error="MemoryError: Unable to allocate 8.00 GiB",
                                                     error_type="MemoryError")))
        else:
            super().send_call(request)


@pytest.fixture(scope="module", params=[(LoopingSandbox, TIMED_OUT), (OutOfMemorySandbox, MEMORY_LIMIT)],
                ids=["loops", "out of memory"])
def graded(tmp_path_factory, request):
    sandbox, state = request.param
    root = copy_course(tmp_path_factory.mktemp("looping") / "course")
    release_course(root)
    course = Course.at(root)
    answers = examples.answers_for(course, ())
    answers[ANSWERED] = "The clip keeps each update near the old policy."
    examples.write_submission(course, "looper", answers)
    [result] = grade_in_process(course, students=["looper"], assignments=[ASSIGNMENT], sandbox=sandbox)
    assert result.state == state, result.detail
    return course, result


def _function_cells(course) -> set[str]:
    return {gid for gid, check in instructor.checks_of(course, ASSIGNMENT).items() if check.function == LOOPING}


def test_the_other_functions_keep_their_points(graded):
    course, result = graded
    looping = _function_cells(course)
    assert looping
    lost = {gid for gid, cell in result.cells.items() if cell.score < cell.points}
    assert lost == looping, result.detail
    kept = sum(cell.points for gid, cell in result.cells.items() if gid not in looping)
    assert result.score == kept and (result.score, result.max_score) == (31, 44)  # docs/grading.md's figures
    scores = examples.cell_scores(course.db_url, "looper")
    assert sum(scores[gid].score for gid in result.cells) == kept  # the gradebook holds them, not zeros


def test_a_person_is_asked_only_about_what_the_grader_could_not_judge(graded):
    from nbgrader.api import Gradebook
    course, result = graded
    assert {"lab_question_2", ANSWERED} <= set(cell_points(ASSIGNMENT)) - set(result.cells)  # written answers
    with Gradebook(course.db_url) as gb:
        notebook = gb.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, "looper")
        needs_person = {grade.name for grade in notebook.grades if grade.needs_manual_grade}
        assert notebook.flagged  # the submission's state says a person should look
    # the left-as-released answers score 0 (as nbgrader's SaveAutoGrades does): nobody needs to read them
    assert needs_person == _function_cells(course) | {ANSWERED}, sorted(needs_person)
    report = class_report.build(course, ASSIGNMENT, [ASSIGNMENT, f"{ASSIGNMENT}_zh"])
    assert set(report.to_do) == needs_person
    assert all(students == ["looper"] for students in report.to_do.values())
