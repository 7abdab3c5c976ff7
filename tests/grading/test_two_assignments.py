"""Two assignments of one course, graded by one command into one gradebook: the RLHF notebook and the
small KL-penalty exercise (source/kl_penalty/). Trusted grading runs through the in-process sandbox
double (no root; the real sandbox grades both in tests/grading/test_scaling.py), stock nbgrader
autograde through nbgrader itself; both agree with the KL checks cell by cell."""
import csv

import pytest

from rlhf_course.grading import batch, examples, instructor
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support.course import cell_points, copy_course, gradebook_url, release_course, repo_course

from tests.support.in_process_sandbox import grade_in_process

pytestmark = pytest.mark.slow  # nbgrader generate_assignment for both assignments, one stock autograde

KL, KL_NOTEBOOK = "kl_penalty", "kl_penalty.ipynb"
RLHF = "rlhf"
kl_checks = instructor.load_module(repo_course(), instructor.checks_module_name(KL))
kl_catalogue = instructor.load_module(repo_course(), "kl_penalty_catalogue")
KL_TOTAL = sum(cell_points(KL)[gid] for gid in kl_checks.CHECKS)
WRONG = kl_catalogue.WRONG_ANSWERS[0]


def kl_answers(course, wrong=None) -> dict[str, str]:
    answers = notebooks.solution_answers(notebooks.read(course / "source" / KL / KL_NOTEBOOK))
    if wrong is not None:
        answers[wrong.answer_cell] = wrong.source
    return answers


def make_class(course):
    """ada: both right; bob: RLHF right, KL wrong; cy: only the KL exercise, right."""
    release_course(course)
    course_handle = Course.at(course)
    for student in ("ada", "bob"):
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, ()))
    for student, wrong in (("ada", None), ("bob", WRONG), ("cy", None)):
        examples.write_submission(course_handle, student, kl_answers(course, wrong), assignment=KL, notebook=KL_NOTEBOOK)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("two") / "course")
    make_class(course)
    course_handle = Course.at(course)
    results = grade_in_process(course_handle)  # every released assignment
    return course, {(r.assignment, r.student): r for r in results}


def test_one_command_grades_every_notebook_of_every_assignment(graded):
    _, results = graded
    assert set(results) == {(RLHF, "ada"), (RLHF, "bob"), (KL, "ada"), (KL, "bob"), (KL, "cy")}
    assert {r.notebook for (a, _), r in results.items() if a == KL} == {KL_NOTEBOOK}
    for key in [(KL, "ada"), (KL, "cy")]:
        assert (results[key].state, results[key].score, results[key].max_score) == ("graded", KL_TOTAL, KL_TOTAL)
    wrong = results[(KL, "bob")]
    assert wrong.state == "failed tests"
    assert {c.grade_id for c in wrong.cells.values() if c.score < c.points} == set(WRONG.loses)
    assert set(results[(RLHF, "ada")].cells) & set(wrong.cells) == set()  # each notebook its own checks


def test_the_gradebook_and_export_hold_each_assignment(graded):
    course, results = graded
    url = gradebook_url(course)
    for (assignment, student), result in results.items():
        cells = examples.cell_scores(url, student, assignment, result.notebook)
        assert {g: cells[g].score for g in result.cells} == {g: c.score for g, c in result.cells.items()}
    with open(course / "grades.csv") as handle:
        rows = {(row["assignment"], row["student_id"]): row for row in csv.DictReader(handle)}
    assert float(rows[(KL, "bob")]["raw_score"]) == results[(KL, "bob")].score
    assert float(rows[(KL, "cy")]["raw_score"]) == KL_TOTAL and float(rows[(KL, "cy")]["max_score"]) == KL_TOTAL
    assert float(rows[(RLHF, "ada")]["raw_score"]) == results[(RLHF, "ada")].score
    # cy never submitted it: no score at all (stock nbgrader's export says 0.0, like a submission scored 0)
    assert (rows[(RLHF, "cy")]["raw_score"], rows[(RLHF, "cy")]["score"], rows[(RLHF, "cy")]["status"]) == \
        ("", "", "missing")


def test_feedback_and_report_name_the_assignment(graded):
    course, results = graded
    page = (course / "feedback" / "bob" / KL / "kl_penalty.html").read_text()
    assert f"{KL}: {results[(KL, 'bob')].score:g} / {KL_TOTAL:g}" in page
    assert "run_check" not in page and "kl_penalty_hidden_checks" not in page
    assert (course / "feedback" / "bob" / RLHF / "rlhf_building_blocks.html").is_file()
    with open(course / batch.REPORT) as handle:
        report = {(row["assignment"], row["student"]): row for row in csv.DictReader(handle)}
    assert set(report) == set(results) and report[(KL, "bob")]["notebook"] == KL_NOTEBOOK


def test_grading_one_assignment_by_name_leaves_the_other_alone(graded):
    course, _ = graded
    course_handle = Course.at(course)
    again = grade_in_process(course_handle, assignments=[KL], students=["cy"])
    assert [(r.assignment, r.student, r.score) for r in again] == [(KL, "cy", KL_TOTAL)]


def test_stock_autograde_agrees_with_the_checks_on_the_kl_exercise(tmp_path):
    """A right and a wrong KL notebook (a kernel each): the class above's cy, right too, would add a kernel and
    nothing else."""
    course = release_course(copy_course(tmp_path / "course"))
    course_handle = Course.at(course)
    for student, wrong in (("ada", None), ("bob", WRONG)):
        examples.write_submission(course_handle, student, kl_answers(course, wrong), assignment=KL, notebook=KL_NOTEBOOK)
    examples.autograde(course_handle, assignment=KL)
    url = gradebook_url(course)
    for student, lost in (("ada", set()), ("bob", set(WRONG.loses))):
        cells = examples.cell_scores(url, student, KL, KL_NOTEBOOK)
        autograded = {g: s for g, s in cells.items() if g in kl_checks.CHECKS}
        assert set(autograded) == set(kl_checks.CHECKS)
        assert {g for g, s in autograded.items() if s.score < s.max_score} == lost, student
