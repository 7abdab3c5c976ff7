"""A full nbgrader round trip: generate -> submitted/ -> autograde -> export.

The reference solution and catalogued correct variants get full marks, and catalogued mistakes lose
exactly the grade cells they should, with nbgrader's own gradebook as the judge (the untouched release
scores 0 through the same checks in tests/grading/test_pipeline_in_process.py, a kernel fewer here).  Only the autograded cells (one per check) are compared: the notebook may
also hold manually graded cells, which autograde leaves at 0 for a person to grade.

Stock autograde runs the same checks (the notebook's hidden cells call them, tests/grading/test_hidden_checks.py)
in a kernel per notebook: the suite sends a representative few through it (a correct-variant submission, tampered
both ways, and one mistake of each function); every catalogued correct variant and mistake is judged in-process
(test_hidden_checks.py, test_pipeline_in_process.py) and in the real sandbox (test_batch.py).  The whole catalogue
through stock autograde: ``python bench/catalogue.py`` (this file with RLHF_WHOLE_CATALOGUE=1).
"""
import csv
import os
import textwrap

import pytest

import rlhf_catalogue
import rlhf_hidden_checks
from rlhf_course import ASSIGNMENT
from rlhf_course.grading import examples
from rlhf_course.course.settings import Course
from tests.support.course import cell_points, copy_course, gradebook_url, release_course

AUTOGRADED = set(rlhf_hidden_checks.CHECKS)  # hidden and visible test cells
POINTS = cell_points(ASSIGNMENT)  # what each grade cell is worth (the notebook's nbgrader.points)
AUTOGRADED_TOTAL = sum(POINTS[gid] for gid in rlhf_hidden_checks.CHECKS)
WHOLE_CATALOGUE = bool(os.environ.get("RLHF_WHOLE_CATALOGUE"))
CORRECT_CLASSES = rlhf_catalogue.correct_variant_classes()
MISTAKE_CLASSES = rlhf_catalogue.wrong_answer_classes()  # every mistake, at most one per function
if not WHOLE_CATALOGUE:  # a representative few: a correct-variant submission, one mistake of each function
    CORRECT_CLASSES = dict(sorted(CORRECT_CLASSES.items())[:1])
    MISTAKE_CLASSES = {student: names for student, names in MISTAKE_CLASSES.items()
                       if len(names) == len(rlhf_catalogue.FUNCTION_OF_CELL)}
    MISTAKE_CLASSES = dict([next(iter(MISTAKE_CLASSES.items()))])
MISTAKES = [rlhf_catalogue.WRONG_BY_NAME[name] for names in MISTAKE_CLASSES.values() for name in names]
# The correct-variant submissions also edit what may not be edited (the first both ways, each in a cell of its own):
# full marks all the same.
TAMPERED = dict(zip(("raise_points", "edit_locked_cell"), sorted(CORRECT_CLASSES) * 2))

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
    release_course(course)
    course_handle = Course.at(course)
    for student, wrong in MISTAKE_CLASSES.items():
        examples.write_submission(course_handle, student, examples.answers_for(course_handle, wrong))
    for student, variants in CORRECT_CLASSES.items():  # every correct style, a few per submission
        examples.write_submission(course_handle, student, {**examples.answers_for(course_handle, ()), **variants})
    # The reference, its PPO answer warning on stderr (one kernel fewer than a submission of its own: a notebook
    # each).  The reference exactly as written gets full marks through the sandbox (tests/grading/test_batch.py).
    reference = examples.answers_for(course_handle, ())
    reference["ppo_answer"] = WARNS
    examples.write_submission(course_handle, "reference", reference)
    for tamper, student in TAMPERED.items():  # correct answers that edited what may not be edited
        rlhf_catalogue.tamper_notebook(course / "submitted" / student / ASSIGNMENT / "rlhf_building_blocks.ipynb",
                                         tamper)
    _answer_in_writing(course / "submitted" / "reference" / "rlhf" / "rlhf_building_blocks.ipynb")
    examples.autograde(course_handle)
    grades = examples.export_grades(course_handle)
    return course, grades


WRITTEN = ("lab_question_1", "lab_question_2", "lab_question_3")  # Part 4, graded by a person (2 points each)


def _answer_in_writing(path):
    import nbformat

    from rlhf_course.course import notebooks
    nb = nbformat.read(str(path), 4)
    for gid in WRITTEN:
        notebooks.cells_by_grade_id(nb)[gid].source = f"My answer to {gid}."
    nbformat.write(nb, str(path))


def scores(course, student):
    """The autograded cells' scores (manually graded cells, if any, are a person's to score)."""
    cells = examples.cell_scores(gradebook_url(course), student)
    assert AUTOGRADED <= set(cells), AUTOGRADED - set(cells)
    return {grade_id: c for grade_id, c in cells.items() if grade_id in AUTOGRADED}


@pytest.mark.slow
def test_stock_autograde_leaves_written_answers_to_a_person(graded_class):
    """Like trusted grading (tests/grading/test_gradebook_records.py): an answer waits for a manual grade,
    an answer left as released (the mistakes' submission answers none) scores 0."""
    from nbgrader.api import Gradebook
    course, _ = graded_class
    with Gradebook(gradebook_url(course)) as gb:
        for gid in WRITTEN:
            answered = gb.find_grade(gid, "rlhf_building_blocks", "rlhf", "reference")
            blank = gb.find_grade(gid, "rlhf_building_blocks", "rlhf", next(iter(MISTAKE_CLASSES)))
            assert answered.auto_score is None and answered.needs_manual_grade and answered.max_score == 2
            assert blank.auto_score == 0 and not blank.needs_manual_grade
    autograded = (course / "autograded" / "reference" / "rlhf" / "rlhf_building_blocks.ipynb").read_text()
    assert "My answer to lab_question_2." in autograded


@pytest.mark.slow
def test_reference_gets_full_marks(graded_class):
    course, _ = graded_class
    cells = scores(course, "reference")
    assert len(cells) == len(AUTOGRADED)
    assert all(c.score == c.max_score for c in cells.values()), cells


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(CORRECT_CLASSES))
def test_every_correct_variant_gets_full_marks(graded_class, student):
    course, _ = graded_class
    cells = scores(course, student)
    lost = {c.grade_id for c in cells.values() if c.score < c.max_score}
    assert lost == set(), (lost, sorted(CORRECT_CLASSES[student]))
    assert sum(c.score for c in cells.values()) == AUTOGRADED_TOTAL


@pytest.mark.slow
def test_stderr_warning_does_not_zero_a_correct_answer(graded_class):
    course, _ = graded_class
    cells = scores(course, "reference")  # its PPO answer warns
    assert all(c.score == c.max_score for c in cells.values()), cells
    autograded = (course / "autograded" / "reference" / "rlhf" / "rlhf_building_blocks.ipynb").read_text()
    # The setup cell prints warnings on stdout (so that Validate agrees); the warning is still shown.
    assert "UserWarning: torch-style UserWarning printed to stderr by a correct answer" in autograded


@pytest.mark.slow
@pytest.mark.parametrize("wrong", MISTAKES, ids=lambda w: w.name)
def test_each_mistake_loses_exactly_its_cells(graded_class, wrong):
    """Its submission loses exactly its mistakes' cells; among its function's cells, this mistake's."""
    course, _ = graded_class
    student = rlhf_catalogue.class_of_mistake()[wrong.name]
    cells = scores(course, student)
    lost = {c.grade_id for c in cells.values() if c.score < c.max_score}
    assert lost == rlhf_catalogue.cells_lost_by(MISTAKE_CLASSES[student]), MISTAKE_CLASSES[student]
    function = rlhf_catalogue.FUNCTION_OF_CELL[wrong.answer_cell]
    assert {g for g in lost if rlhf_hidden_checks.CHECKS[g].function == function} == set(wrong.loses)
    assert all(c.score == 0 for c in cells.values() if c.grade_id in lost)


@pytest.mark.slow
def test_the_representative_few_hold_a_mistake_of_every_function():
    """What the suite sends through stock autograde still covers each function's checks."""
    assert {wrong.answer_cell for wrong in MISTAKES} == set(rlhf_catalogue.FUNCTION_OF_CELL)
    assert set(TAMPERED.values()) <= set(CORRECT_CLASSES)


@pytest.mark.slow
def test_export_lists_every_student(graded_class):
    course, grades = graded_class
    with open(grades) as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}
    all_cells = examples.cell_scores(gradebook_url(course), "reference")
    assert float(rows["reference"]["score"]) == AUTOGRADED_TOTAL == 44  # full marks on every test cell
    assert float(rows["reference"]["max_score"]) == sum(c.max_score for c in all_cells.values())
    assert float(rows["reference"]["max_score"]) == AUTOGRADED_TOTAL + 2 * len(WRITTEN)  # written answers: 6 points
    for student in CORRECT_CLASSES:
        assert float(rows[student]["score"]) == AUTOGRADED_TOTAL
    # reference (its PPO answer warns), the correct variants' (tampered) and the mistakes'
    assert len(rows) == 1 + len(CORRECT_CLASSES) + len(MISTAKE_CLASSES)


@pytest.mark.slow
@pytest.mark.parametrize("tamper", ["raise_points", "edit_locked_cell"])
def test_stock_autograde_restores_edited_tests_and_metadata(graded_class, tamper):
    """What trusted grading does too (tests/grading/test_batch.py): the answers earn every autograded
    point, at the release's points (the raised 100 does not count)."""
    course, _ = graded_class
    cells = scores(course, TAMPERED[tamper])
    assert sum(c.score for c in cells.values()) == sum(c.max_score for c in cells.values()) == AUTOGRADED_TOTAL
    assert {g: c.max_score for g, c in cells.items()} == {g: POINTS[g] for g in cells}
