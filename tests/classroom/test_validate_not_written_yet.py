"""Validate before the student has written a function: the released stub raises NotImplementedError with no message,
so the visible test that calls it fails with a traceback that ends in "NotImplementedError: ", saying nothing.  The
failure Validate shows (the lab's dialog, `nbgrader validate`'s print) says under it, in the edition's language, that
the function is not written yet and what to do.  One small notebook validated per language (a kernel each): about
6 s."""
from __future__ import annotations

import io

import nbformat
import pytest
from nbconvert.filters import strip_ansi
from nbformat.v4 import new_code_cell, new_notebook

from rlhf_course.classroom import patient_validate
from rlhf_course.classroom.patient_validate import PatientValidator
from rlhf_course.classroom.submit_refusal import _columns
from rlhf_course.i18n import CHINESE, ENGLISH, t

ANSWER = {"nbgrader": {"grade": False, "grade_id": "answer", "solution": True, "locked": False, "schema_version": 3}}
VISIBLE_TEST = {"nbgrader": {"grade": True, "grade_id": "visible_test", "points": 1, "solution": False,
                             "locked": True, "schema_version": 3}}
STUB = "def answer():\n    # YOUR CODE HERE\n    raise NotImplementedError()"


def _validated(tmp_path, language: str, answer_source: str) -> tuple[PatientValidator, dict]:
    """The validator and its results for a notebook of ``language``'s edition whose answer cell is ``answer_source``
    and whose visible test calls it."""
    nb = new_notebook(cells=[new_code_cell(answer_source, metadata=ANSWER),
                             new_code_cell("assert answer() == 42", metadata=VISIBLE_TEST)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if language != ENGLISH:
        nb.metadata["rlhf_course"] = {"edition": language}
    path = tmp_path / f"{language}.ipynb"
    nbformat.write(nb, path)
    validator = PatientValidator()
    validator.stream = io.StringIO()
    return validator, validator.validate(str(path))


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_a_visible_test_of_a_function_not_written_yet_says_so_and_what_to_do(tmp_path, language):
    validator, results = _validated(tmp_path, language, STUB)
    said = t(patient_validate.NOT_WRITTEN_YET, language)
    assert said != t(patient_validate.NOT_WRITTEN_YET, CHINESE if language == ENGLISH else ENGLISH)  # translated
    failed, = results["failed"]
    assert "NotImplementedError" in failed["raw_error"]  # the traceback stays: it points at the line to replace
    assert "".join(said.split()) in "".join(failed["raw_error"].split())  # the lab's dialog
    validator._print_error(failed["source"], failed["raw_error"])  # as `nbgrader validate` prints each failure
    printed = validator.stream.getvalue()
    assert "".join(said.split()) in "".join(printed.split())
    told = [line for line in printed.split("\n") if line.strip() and line.strip() in said]
    assert told and all(_columns(line) <= validator.width - 3 for line in told), told  # none cut with "..."


def test_another_error_is_not_called_a_function_not_written_yet(tmp_path):
    _, results = _validated(tmp_path, ENGLISH, "def answer():\n    raise ValueError('not this way')")
    failed, = results["failed"]
    assert "ValueError: not this way" in strip_ansi(failed["raw_error"])
    assert t(patient_validate.NOT_WRITTEN_YET, ENGLISH) not in failed["raw_error"]


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_an_unanswered_written_question_is_said_in_the_edition_s_language_with_what_to_do(language):
    """nbgrader's "You did not provide a response." under a written answer still as released, in the Chinese edition
    too, said in the edition's language with where to write the answer (no kernel: the cell's text is all it reads)."""
    from nbformat.v4 import new_markdown_cell
    validator = PatientValidator()
    validator.language = language
    cell = new_markdown_cell("YOUR ANSWER HERE (lab_question_1)", metadata={"nbgrader": {
        "grade": True, "grade_id": "lab_question_1", "points": 2, "solution": True, "locked": False,
        "schema_version": 3}})
    said = t(patient_validate.NO_RESPONSE, language)
    assert said != t(patient_validate.NO_RESPONSE, CHINESE if language == ENGLISH else ENGLISH)
    error = validator._extract_error(cell)
    assert "".join(error.split()) == "".join(said.split())
    assert all(_columns(validator.indent + line) <= validator.width - 3 for line in error.split("\n")), error
