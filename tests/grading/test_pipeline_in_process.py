"""The whole trusted pipeline without root and without a sandbox: `grade_all` with the sandbox
replaced by an in-process double (tests/grading/in_process_sandbox.py). Scoring, states and their
severity, the gradebook, feedback pages, review flags, structure checks, the report and the export
run exactly as in `make grade`; the real sandbox keeps its own tests (test_batch, test_grader_attacks).

Only honest code and notebook tampering are graded here: the double has no isolation."""
import csv

import pytest

import rlhf_catalogue
import rlhf_hidden_checks
from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.course.settings import Course
from rlhf_course.grading import batch, examples, release
from tests.support.course import cell_points, copy_course, gradebook_url

from tests.support.in_process_sandbox import InProcessSandbox, grade_in_process

pytestmark = pytest.mark.slow  # one nbgrader generate_assignment (about 10 s), then seconds

AUTOGRADED = set(rlhf_hidden_checks.CHECKS)
TOTAL = sum(cell_points(ASSIGNMENT)[gid] for gid in rlhf_hidden_checks.CHECKS)
TAMPERED = {attack.name: attack for attack in rlhf_catalogue.ADVERSARIAL if attack.tamper and not attack.answers}
EMPTY = "eve_left_it_as_released"
CONFIGURED_GRADEBOOK = "class_of_2026.db"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("in_process") / "course")
    with open(course / "nbgrader_config.py", "a") as config:  # the instructor's gradebook, set the nbgrader way
        config.write(f"\nc.CourseDirectory.db_url = 'sqlite:///' + str(COURSE_ROOT / '{CONFIGURED_GRADEBOOK}')\n")
    # the one assignment graded, generated here: a configuration of its own has no release to share (release_course)
    course_handle = Course.at(course)
    release.generate_release(course_handle, [ASSIGNMENT])
    examples.write_submission(course_handle, "ada_correct", {
        **examples.answers_for(course_handle, ()), "lab_question_2": "Variety: a few positive words, said again and again."})
    for student, variants in rlhf_catalogue.correct_variant_classes().items():
        examples.write_submission(course_handle, student, {**examples.answers_for(course_handle, ()), **variants})
    for wrong in rlhf_catalogue.WRONG_ANSWERS:
        examples.write_submission(course_handle, wrong.name, examples.answers_for(course_handle, (wrong.name,)))
    for attack in TAMPERED.values():
        folder = examples.write_submission(course_handle, attack.name, examples.answers_for(course_handle, ()))
        rlhf_catalogue.tamper_notebook(folder / NOTEBOOK, attack.tamper)
    examples.write_submission(course_handle, EMPTY, examples.answers_for(course_handle, None))

    results = grade_in_process(course_handle)
    return course, {r.student: r for r in results}


def lost(result):
    return {c.grade_id for c in result.cells.values() if c.score < c.points and c.grade_id in AUTOGRADED}


def test_every_submission_was_graded_through_the_double(graded):
    _, results = graded
    students = {"ada_correct", EMPTY, *rlhf_catalogue.correct_variant_classes(), *TAMPERED,
                *(w.name for w in rlhf_catalogue.WRONG_ANSWERS)}
    assert set(results) == students
    assert InProcessSandbox.started >= len(students) - 3  # the three unreadable ones never reach a sandbox


def test_correct_answers_of_every_style_get_full_marks_and_no_flag(graded):
    _, results = graded
    for student in ["ada_correct", *rlhf_catalogue.correct_variant_classes()]:
        result = results[student]
        assert (result.state, lost(result), result.flags) == ("graded", set(), []), (student, result.detail)
        assert sum(c.score for c in result.cells.values()) == TOTAL


@pytest.mark.parametrize("wrong", rlhf_catalogue.WRONG_ANSWERS, ids=lambda w: w.name)
def test_each_wrong_answer_loses_exactly_its_cells(graded, wrong):
    _, results = graded
    assert results[wrong.name].state == "failed tests"
    assert lost(results[wrong.name]) == set(wrong.loses)


def test_tampered_notebooks_get_their_state_score_and_flag(graded):
    _, results = graded
    for name, attack in TAMPERED.items():
        result = results[name]
        assert result.state == attack.state, (name, result.detail)
        assert lost(result) == (AUTOGRADED if attack.loses is None else set(attack.loses)), name
        assert bool(result.flags) == attack.flagged, (name, result.flags)
    assert any("points was edited" in flag for flag in results["raised_points_in_metadata"].flags)


def test_an_untouched_release_scores_nothing_and_says_why(graded):
    _, results = graded
    result = results[EMPTY]
    assert result.state == "failed tests" and lost(result) == AUTOGRADED
    assert "NotImplementedError" in result.cells["ppo_positive_advantage_caps_upside"].message


def test_the_gradebook_export_and_report_hold_the_same_numbers(graded):
    course, results = graded
    with open(course / "grades.csv") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}
    assert set(rows) == set(results)
    for student, result in results.items():
        assert float(rows[student]["raw_score"]) == sum(c.score for c in result.cells.values()), student
        assert float(rows[student]["max_score"]) == TOTAL + 6  # Part 4's written answers: 6 points
        cells = examples.cell_scores(gradebook_url(course), student)
        assert {g: cells[g].score for g in result.cells} == {g: c.score for g, c in result.cells.items()}
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        written = gb.find_grade("lab_question_2", "rlhf_building_blocks", ASSIGNMENT, "ada_correct")
        assert written.auto_score is None and written.needs_manual_grade  # a person's to score
        assert gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "invalid_json").flagged
        assert not gb.find_submission_notebook("rlhf_building_blocks", ASSIGNMENT, "ada_correct").flagged
    report = (course / batch.REPORT).read_text()
    assert "malformed notebook" in report and "failed tests" in report


def test_the_gradebook_set_in_nbgrader_config_is_the_one_every_step_wrote(graded):
    course, results = graded
    assert gradebook_url(course) == f"sqlite:///{course.resolve() / CONFIGURED_GRADEBOOK}"
    assert not (course / "gradebook.db").exists()
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:  # release recorded it, grading scored it
        assert {s.student.id for s in gb.find_assignment(ASSIGNMENT).submissions} == set(results)


def test_feedback_pages_show_scores_and_messages_never_hidden_code(graded):
    course, results = graded
    for student in results:
        assert (course / "feedback" / student / ASSIGNMENT / "rlhf_building_blocks.html").is_file(), student
    page = (course / "feedback" / "ppo_clip_without_min" / ASSIGNMENT / "rlhf_building_blocks.html").read_text()
    assert "ppo_positive_advantage_keeps_downside" in page
    assert "clipping must not apply to r &lt; 1 - eps when A &gt; 0" in page
    assert "run_check" not in page and "rlhf_hidden_checks" not in page and "BEGIN HIDDEN" not in page
    ada = (course / "feedback" / "ada_correct" / ASSIGNMENT / "rlhf_building_blocks.html").read_text()
    assert f"{ASSIGNMENT}: {TOTAL:g} / {TOTAL + 6:g}" in ada and "awaiting a person" in ada
    assert "a few positive words, said again and again" in ada
