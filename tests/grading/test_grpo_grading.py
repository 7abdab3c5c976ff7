"""The GRPO assignment graded end to end: every wrong answer of its catalogue loses exactly its cells and
every correct variant none, through trusted grading (the in-process sandbox double; the real sandbox is
tests/grading/test_batch.py's) and through stock nbgrader autograde, into one gradebook with feedback."""
import pytest

from rlhf_course.grading import examples, instructor
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support.course import cell_points, copy_course, gradebook_url, release_course, repo_course

from tests.support.in_process_sandbox import grade_in_process

pytestmark = pytest.mark.slow  # one release, one batch of in-process grading, one stock autograde

GRPO, GRPO_NOTEBOOK = "grpo", "grpo.ipynb"
checks = instructor.load_module(repo_course(), instructor.checks_module_name(GRPO))
catalogue = instructor.load_module(repo_course(), "grpo_catalogue")
POINTS = cell_points(GRPO)  # what each grade cell is worth (the notebook's nbgrader.points)
TOTAL = sum(POINTS[gid] for gid in checks.CHECKS)
WRITTEN = {"grpo_question_1", "grpo_question_2"}


def answers(course, cell_source=None) -> dict[str, str]:
    found = notebooks.solution_answers(notebooks.read(course / "source" / GRPO / GRPO_NOTEBOOK))
    if cell_source is not None:
        found["grpo_answer"] = cell_source
    return found


def expected_losses() -> dict[str, set[str]]:
    return {"reference": set(), **{w.name: set(w.loses) for w in catalogue.WRONG_ANSWERS},
            **{v.name: set() for v in catalogue.CORRECT_VARIANTS}}


def make_class(folder, students) -> object:
    course = copy_course(folder / "course")
    release_course(course)
    sources = {"reference": None, **{w.name: w.source for w in catalogue.WRONG_ANSWERS},
               **{v.name: v.source for v in catalogue.CORRECT_VARIANTS}}
    course_handle = Course.at(course)
    for student in students:
        written = {grade_id: "The group mean is (G - 1) / G times the leave-one-out baseline." for grade_id in WRITTEN}
        examples.write_submission(course_handle, student, {**answers(course, sources[student]), **written}, assignment=GRPO,
                                  notebook=GRPO_NOTEBOOK)
    return course


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return make_class(tmp_path_factory.mktemp("grpo"), list(expected_losses()))


@pytest.fixture(scope="module")
def graded(course):
    course_handle = Course.at(course)
    results = grade_in_process(course_handle, assignments=[GRPO])
    return {r.student: r for r in results}


def test_trusted_grading_scores_each_answer_as_it_deserves(course, graded):
    assert set(graded) == set(expected_losses())
    for student, lost in expected_losses().items():
        result = graded[student]
        got = {c.grade_id for c in result.cells.values() if c.score < c.points and c.grade_id in checks.CHECKS}
        assert got == lost, (student, result.detail)
        assert result.state == ("failed tests" if lost else "graded"), student
        assert result.score == TOTAL - sum(POINTS[g] for g in lost), student
    page = (course / "feedback" / "grpo_population_std" / GRPO / "grpo.html").read_text()
    assert "Bessel-corrected" in page and "run_check" not in page and "grpo_hidden_checks" not in page


def test_written_answers_wait_for_a_person(course, graded):
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb:
        for grade_id in WRITTEN:
            grade = gb.find_grade(grade_id, "grpo", GRPO, "reference")
            assert grade.auto_score is None and grade.needs_manual_grade


def test_stock_autograde_agrees_with_the_checks(tmp_path):
    # nbgrader runs a kernel per notebook (about 2 s each): the reference and one mistake, in one process (every
    # mistake of the catalogue through trusted grading above, whose checks are these cells' checks)
    sample = ("reference", "grpo_population_std")
    course = make_class(tmp_path, sample)
    course_handle = Course.at(course)
    examples.autograde(course_handle, assignment=GRPO)
    url = gradebook_url(course)
    for student in sample:
        cells = examples.cell_scores(url, student, GRPO, GRPO_NOTEBOOK)
        autograded = {g: s for g, s in cells.items() if g in checks.CHECKS}
        assert set(autograded) == set(checks.CHECKS)
        assert {g for g, s in autograded.items() if s.score < s.max_score} == expected_losses()[student], student
