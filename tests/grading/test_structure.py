"""What a student may not change in the notebook: undone from the release, or a state for a person."""
import copy

from rlhf_course.grading import notebooks
from rlhf_course.grading.intake import restore_from_release, structure_problems


def _release(repo):
    return notebooks.read(repo / "release" / "rlhf" / "rlhf_building_blocks.ipynb")


def test_edited_metadata_and_locked_cells_are_restored_and_reported(repo):
    release = _release(repo)
    nb = copy.deepcopy(release)
    cells = notebooks.cells_by_grade_id(nb)
    cells["dpo_values"].metadata["nbgrader"]["points"] = 100
    cells["ppo_answer"].metadata["nbgrader"]["points"] = 50
    cells["ppo_answer"].source = "def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):\n    return ratio.mean()\n"
    cells["ppo_visible_tests"].source = "pass  # the asserts were in the way\n"
    assert structure_problems(nb, release) == []
    restored = restore_from_release(nb, release)
    assert any(r.startswith("dpo_values: nbgrader metadata points") for r in restored)
    assert any(r.startswith("ppo_answer: nbgrader metadata points") for r in restored)
    assert any(r.startswith("ppo_visible_tests: the locked cell was edited") for r in restored)
    after = notebooks.cells_by_grade_id(nb)
    original = notebooks.cells_by_grade_id(release)
    assert after["dpo_values"].metadata["nbgrader"] == original["dpo_values"].metadata["nbgrader"]
    assert after["ppo_visible_tests"].source == original["ppo_visible_tests"].source
    assert after["ppo_answer"].metadata["nbgrader"] == original["ppo_answer"].metadata["nbgrader"]
    assert "return ratio.mean()" in after["ppo_answer"].source  # the answer stays the student's


def test_an_untouched_notebook_restores_nothing(repo):
    release = _release(repo)
    nb = copy.deepcopy(release)
    assert structure_problems(nb, release) == [] and restore_from_release(nb, release) == []


def test_deleted_duplicated_or_retyped_answer_cells_need_a_person(repo):
    release = _release(repo)
    nb = copy.deepcopy(release)
    index = {notebooks.grade_id(c): i for i, c in enumerate(nb.cells)}
    nb.cells[index["gae_answer"]].cell_type = "markdown"
    nb.cells.insert(index["dpo_values"], copy.deepcopy(nb.cells[index["dpo_values"]]))
    del nb.cells[index["ppo_gradient"]]
    problems = "; ".join(structure_problems(nb, release))
    assert "answer cell gae_answer changed from code to markdown" in problems
    assert "dpo_values appears 2 times" in problems and "ppo_gradient was deleted" in problems


def test_written_answers_stay_the_students_and_a_retyped_one_needs_a_person(repo):
    """Part 4's markdown answer cells are the student's, like the code answers: restoring keeps their text
    (and puts back edited points); turning one into a code cell is a state for a person."""
    release = _release(repo)
    nb = copy.deepcopy(release)
    cells = notebooks.cells_by_grade_id(nb)
    cells["lab_question_3"].source = "Both fall; the rejected one falls faster."
    cells["lab_question_3"].metadata["nbgrader"]["points"] = 20
    assert structure_problems(nb, release) == []
    assert restore_from_release(nb, release) == [
        "lab_question_3: nbgrader metadata points was edited (restored from the release)"]
    after = notebooks.cells_by_grade_id(nb)["lab_question_3"]
    assert after.source == "Both fall; the rejected one falls faster." and after.metadata["nbgrader"]["points"] == 2
    retyped = copy.deepcopy(release)
    notebooks.cells_by_grade_id(retyped)["lab_question_1"].cell_type = "code"
    assert "answer cell lab_question_1 changed from markdown to code" in "; ".join(structure_problems(retyped, release))
