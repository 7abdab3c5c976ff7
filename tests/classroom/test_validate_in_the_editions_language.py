"""What nbgrader itself says in Validate, in the edition's language: its Validator's word under each written answer a
student has not given yet ("You did not provide a response.", in JupyterLab's Validate dialog and in the terminal),
and its labextension's dialog title and lines, which the course's server sends in the edition's language for the
course's labextension to show in their place.  In-process, on the release's written answers alone (no code cell:
the kernel starts and runs nothing).  About 4 s."""
from __future__ import annotations

from pathlib import Path

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

    said = "".join(t(patient_validate.NO_RESPONSE, language).split())  # wrapped to the terminal's lines
    assert said != "".join(t(patient_validate.NO_RESPONSE, "en" if language != "en" else "zh-CN").split())
    assert [entry["source"] for entry in results["failed"]] == stubs and len(stubs) == 3
    assert ["".join(entry["raw_error"].split()) for entry in results["failed"]] == [said] * 3
    assert all(said in "".join(entry["error"].split()) for entry in results["failed"])  # the dialog's (nbgrader's HTML)
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


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_the_servers_answer_carries_nbgrader_s_dialog_lines_in_a_chinese_editions_language(tmp_path, language,
                                                                                            assignment):
    """nbgrader's labextension titles the dialog and heads each failed cell in English; for a Chinese edition the
    course's server sends those lines in Chinese (an English edition's answer is nbgrader's own)."""
    import json
    import logging
    from types import SimpleNamespace

    from traitlets.config import Config

    from rlhf_course.classroom.validate_extension import (DIALOG_LINES, NBGRADER_LINES, PatientValidateHandler,
                                                          ValidateStatus)

    _written_answers_left_as_released(tmp_path, assignment)
    server = SimpleNamespace(root_dir=str(tmp_path), status=ValidateStatus(), validate_queue=None,
                             log=logging.getLogger("validate-lines-test"), load_config=Config)

    answer = PatientValidateHandler.validate_notebook(server, f"{assignment}/{NOTEBOOK}")

    assert answer["success"] is True and list(answer["value"]) == ["failed"]
    if language == "en":
        assert NBGRADER_LINES not in answer
    else:
        lines = answer[NBGRADER_LINES]
        assert sorted(lines) == sorted(DIALOG_LINES) and all(lines[line] == ZH[line] != line for line in DIALOG_LINES)
        assert lines["The following cell failed:"] == "下面这个单元格未通过："
    json.dumps(answer)  # what the handler sends


def test_the_labextension_puts_in_place_each_line_nbgrader_s_dialog_shows():
    """The course's labextension finds nbgrader's dialog lines by their exact text: each is one nbgrader's installed
    labextension writes (a test of the pair, should nbgrader change its wording), and it reads the answer's key."""
    import sys

    from rlhf_course.classroom.validate_extension import DIALOG_LINES, NBGRADER_LINES

    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    nbgrader_js = "".join(p.read_text() for p in installed.glob("*.js"))
    for line in DIALOG_LINES:
        assert f'"{line}"' in nbgrader_js, line
    course_js = (COURSE_ROOT / "jupyter" / "labextension" / "src" / "index.js").read_text()
    assert f"const NBGRADER_LINES = '{NBGRADER_LINES}';" in course_js
