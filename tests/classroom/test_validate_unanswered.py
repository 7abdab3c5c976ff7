"""Validate's word under each written answer a student has not given yet, in the edition's language: nbgrader's
Validator says "You did not provide a response." under each one (in JupyterLab's Validate dialog and in the
terminal); a Chinese edition's student reads it in Chinese.  In-process, on the release's written answers alone (no
code cell: the kernel starts and runs nothing).  About 2 s."""
from __future__ import annotations

import nbformat
import pytest

from rlhf_course import COURSE_ROOT
from rlhf_course.classroom import patient_validate
from rlhf_course.classroom.patient_validate import PatientValidator
from rlhf_course.course import notebooks
from rlhf_course.i18n import ZH, t

NOTEBOOK = "rlhf_building_blocks.ipynb"
NO_RESPONSE = "You did not provide a response."  # nbgrader's Validator, under an answer left as released
PARTIAL_CREDIT = "Partial credit; passed some but not all of the tests"  # ... under a test cell of partial credit
QUESTIONS = ["lab_question_1", "lab_question_2", "lab_question_3"]


def _written_answers_left_as_released(tmp_path, assignment: str):
    """A copy of ``assignment``'s release holding only its markdown cells (the written answers as released)."""
    nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    nb.cells = [cell for cell in nb.cells if cell.cell_type == "markdown"]
    path = tmp_path / assignment / NOTEBOOK
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return nb, path


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_an_unanswered_written_answer_is_said_to_be_unanswered_in_the_editions_language(tmp_path, language,
                                                                                       assignment):
    nb, path = _written_answers_left_as_released(tmp_path, assignment)
    stubs = [cell.source.strip() for cell in nb.cells if notebooks.grade_id(cell) in QUESTIONS]

    results = PatientValidator().validate(str(path))

    said = NO_RESPONSE if language == "en" else ZH.get(NO_RESPONSE, "")
    assert [entry["source"] for entry in results["failed"]] == stubs and len(stubs) == 3
    assert [entry["raw_error"] for entry in results["failed"]] == [said] * 3
    assert all(said in entry["error"] for entry in results["failed"])  # what the dialog shows (nbgrader's HTML)
    if language == "zh-CN":
        assert all("lab_question" in stub and "回答" in stub for stub in stubs)  # the stubs name their questions


def test_nbgrader_s_sentences_under_a_failed_cell_have_their_chinese():
    """The two sentences nbgrader's Validator writes itself under a failed cell (the rest is the cell's own error)."""
    from nbgrader.validator import Validator
    import inspect

    source = inspect.getsource(Validator._extract_error)
    for sentence in (NO_RESPONSE, PARTIAL_CREDIT):
        assert f'"{sentence}"' in source  # still nbgrader's words: a change there would reach a student in English
        assert sentence in patient_validate.NBGRADER_SAYS
        assert t(sentence, "zh-CN") != sentence
