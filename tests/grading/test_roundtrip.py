"""A full nbgrader round trip: generate -> submitted/ -> autograde -> export.

The reference solution gets full marks, the untouched release gets 0, and every catalogued
mistake loses exactly the grade cells it should, with nbgrader's own gradebook as the judge.
"""
import csv
import textwrap

import pytest

import answer_catalogue
from rlhf_course.grading import course as pipeline
from tests.conftest import copy_course

WARNS = textwrap.dedent('''
    import warnings

    def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
        warnings.warn("torch-style UserWarning printed to stderr by a correct answer")
        unclipped = ratio * advantage
        clipped = torch.clamp(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantage
        return torch.minimum(unclipped, clipped).mean()
''')


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("roundtrip") / "course")
    pipeline.generate_release(course)
    students = {"reference": (), "empty": None}
    students.update({w.name: (w.name,) for w in answer_catalogue.WRONG_ANSWERS})
    for student, wrong in students.items():
        pipeline.write_submission(course, student, pipeline.answers_for(course, wrong))
    warns = pipeline.answers_for(course, ())
    warns["ppo_answer"] = WARNS
    pipeline.write_submission(course, "warns_on_stderr", warns)
    for tamper in ("raise_points", "edit_locked_cell"):  # correct answers, edited what may not be edited
        folder = pipeline.write_submission(course, f"tampered_{tamper}", pipeline.answers_for(course, ()))
        answer_catalogue.tamper_notebook(folder / "rlhf_building_blocks.ipynb", tamper)
    _answer_in_writing(course / "submitted" / "reference" / "rlhf" / "rlhf_building_blocks.ipynb")
    pipeline.autograde(course)
    grades = pipeline.export_grades(course)
    return course, grades


WRITTEN = ("lab_question_1", "lab_question_2", "lab_question_3")  # Part 4, graded by a person (2 points each)


def _answer_in_writing(path):
    import nbformat

    from rlhf_course.grading import notebooks
    nb = nbformat.read(str(path), 4)
    for gid in WRITTEN:
        notebooks.cells_by_grade_id(nb)[gid].source = f"My answer to {gid}."
    nbformat.write(nb, str(path))


def scores(course, student):
    """The autograded cells' scores (the written answers wait for a person)."""
    cells = pipeline.cell_scores(pipeline.gradebook_url(course), student)
    return {g: c for g, c in cells.items() if g not in WRITTEN}


@pytest.mark.slow
def test_stock_autograde_leaves_written_answers_to_a_person(graded_class):
    """Like trusted grading (tests/grading/test_gradebook_records.py): an answer waits for a manual grade,
    an answer left as released scores 0."""
    from nbgrader.api import Gradebook
    course, _ = graded_class
    with Gradebook(pipeline.gradebook_url(course)) as gb:
        for gid in WRITTEN:
            answered = gb.find_grade(gid, "rlhf_building_blocks", "rlhf", "reference")
            blank = gb.find_grade(gid, "rlhf_building_blocks", "rlhf", "empty")
            assert answered.auto_score is None and answered.needs_manual_grade and answered.max_score == 2
            assert blank.auto_score == 0 and not blank.needs_manual_grade
    autograded = (course / "autograded" / "reference" / "rlhf" / "rlhf_building_blocks.ipynb").read_text()
    assert "My answer to lab_question_2." in autograded


@pytest.mark.slow
def test_reference_gets_full_marks(graded_class):
    course, _ = graded_class
    cells = scores(course, "reference")
    assert len(cells) == 34
    assert all(c.score == c.max_score for c in cells.values()), cells


@pytest.mark.slow
def test_empty_release_gets_zero(graded_class):
    course, _ = graded_class
    assert sum(c.score for c in scores(course, "empty").values()) == 0


@pytest.mark.slow
def test_stderr_warning_does_not_zero_a_correct_answer(graded_class):
    course, _ = graded_class
    cells = scores(course, "warns_on_stderr")
    assert all(c.score == c.max_score for c in cells.values()), cells
    autograded = (course / "autograded" / "warns_on_stderr" / "rlhf" / "rlhf_building_blocks.ipynb").read_text()
    assert "[stderr] " in autograded  # the warning is still shown, just not scored as a failure


@pytest.mark.slow
@pytest.mark.parametrize("wrong", answer_catalogue.WRONG_ANSWERS, ids=lambda w: w.name)
def test_each_mistake_loses_exactly_its_cells(graded_class, wrong):
    course, _ = graded_class
    cells = scores(course, wrong.name)
    lost = {c.grade_id for c in cells.values() if c.score < c.max_score}
    assert lost == set(wrong.loses)
    assert all(c.score == 0 for c in cells.values() if c.grade_id in lost)


@pytest.mark.slow
def test_export_lists_every_student(graded_class):
    course, grades = graded_class
    with open(grades) as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    import rlhf_hidden_checks
    total = sum(check.points for check in rlhf_hidden_checks.CHECKS.values())  # hidden and visible
    assert float(rows["reference"]["score"]) == total == 44
    assert float(rows["reference"]["max_score"]) == total + 2 * len(WRITTEN)  # written answers: 6 points
    assert float(rows["empty"]["score"]) == 0.0
    assert len(rows) == len(answer_catalogue.WRONG_ANSWERS) + 5  # reference, empty, warns, two tampered


@pytest.mark.slow
@pytest.mark.parametrize("tamper", ["raise_points", "edit_locked_cell"])
def test_stock_autograde_restores_edited_tests_and_metadata(graded_class, tamper):
    """What trusted grading does too (tests/grading/test_batch.py): the answers earn their 44 points."""
    course, _ = graded_class
    cells = scores(course, f"tampered_{tamper}")
    assert sum(c.score for c in cells.values()) == sum(c.max_score for c in cells.values()) == 44
