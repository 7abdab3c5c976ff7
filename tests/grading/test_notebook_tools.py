import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK, STUDENT_FUNCTIONS
from rlhf_course.course import notebooks
from rlhf_course.lab import notebook_functions
from tests.support import solutions


def test_solution_answers_strip_markers(repo):
    answers = notebooks.solution_answers(notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK))
    assert set(answers) == {"ppo_answer", "dpo_answer", "gae_answer"}
    for source in answers.values():
        assert "BEGIN SOLUTION" not in source and "END SOLUTION" not in source
        compile(source, "answer", "exec")


def test_written_solutions_are_the_model_answers(repo):
    source = notebooks.read(repo / "source" / ASSIGNMENT / NOTEBOOK)
    written = solutions.written_solutions(source)
    assert set(written) == {"lab_question_1", "lab_question_2", "lab_question_3"}
    assert all("SOLUTION" not in text and len(text) > 100 for text in written.values())


def test_fill_answers_replaces_only_answer_cells(repo):
    release = notebooks.read(repo / "release" / ASSIGNMENT / NOTEBOOK)
    filled = notebooks.fill_answers(release, {"dpo_answer": "def dpo_loss(*a):\n    return 1"})
    before, after = notebooks.cells_by_grade_id(release), notebooks.cells_by_grade_id(filled)
    assert after["dpo_answer"].source.startswith("def dpo_loss")
    assert "NotImplementedError" in before["dpo_answer"].source  # the original is untouched
    with pytest.raises(ValueError):
        notebooks.fill_answers(release, {"dpo_visible_tests": "pass"})
    with pytest.raises(ValueError):  # a question's prompt is not the student's to edit
        notebooks.fill_answers(release, {"lab_question_1_prompt": "pass"})
    written = notebooks.fill_answers(release, {"lab_question_1": "The repeat penalty."})
    assert notebooks.cells_by_grade_id(written)["lab_question_1"].source == "The repeat penalty."
    with pytest.raises(KeyError):
        notebooks.fill_answers(release, {"no_such_cell": "pass"})


def test_functions_from_source_notebook(repo):
    functions = notebook_functions.functions_from_notebook(repo / "source" / ASSIGNMENT / NOTEBOOK, STUDENT_FUNCTIONS)
    import torch
    assert functions["ppo_clipped_objective"](torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0]), torch.ones(5)).item() \
        == pytest.approx(1.02)


def test_functions_from_notebook_reports_missing(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    path = tmp_path / "empty.ipynb"
    nbformat.write(nb, str(path))
    with pytest.raises(LookupError, match="dpo_loss"):
        notebook_functions.functions_from_notebook(path, ("dpo_loss",))
