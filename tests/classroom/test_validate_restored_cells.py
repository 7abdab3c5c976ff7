"""Validate tells a student, before they submit, of each grade cell grading will take from the release rather than
from their notebook (a locked cell edited, a cell deleted, nbgrader metadata edited), naming it by position, grade id
and first line, saying that grading runs the release's version and where the released copy is, in the edition's
language; it compares as grading's canonical copy does, so correct work whose outputs or line-end spaces changed
passes (nbgrader's own checksum comparison fails it).  In-process, on the released notebooks in an exchange of the
test's own; the kernel runs only for the small notebook that passes.  About 6 s."""
from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.utils import compute_checksum
from nbgrader.validator import Validator
from traitlets.config import Config

from rlhf_course import COURSE_ROOT
from rlhf_course.classroom import patient_validate
from rlhf_course.classroom.patient_validate import (GRADED_AS_RELEASED, GRADED_WITH_RELEASED_METADATA, RESTORED_CELL,
                                                   PatientValidator)
from rlhf_course.course import notebooks, release_cells
from rlhf_course.i18n import t

COURSE = "rlhf-course-test"
NOTEBOOK = "rlhf_building_blocks.ipynb"
STUDENT = Path("/home/student")  # where a student's notebooks are (named in the notices, never opened)
EDITED, DELETED, METADATA = "ppo_visible_tests", "dpo_gradient", "gae_visible_tests"


def _config(exchange: Path) -> Config:
    config = Config()
    config.Exchange.root = str(exchange)
    config.CourseDirectory.course_id = COURSE
    return config


def closing(sentence: str, language: str, released: Path, notebook: Path) -> str:
    """A notice's last sentence: how to get the release's cell back, for the student's ``notebook``."""
    command, name = patient_validate.release_copy(notebook, released)
    return t(sentence, language, copy_command=command, copy_name=name)


def _released(tmp_path: Path, assignment: str, release_nb) -> tuple[Path, Path]:
    """(the exchange's root, the released notebook in its outbound folder)."""
    exchange = tmp_path / "exchange"
    outbound = exchange / COURSE / "outbound" / assignment
    outbound.mkdir(parents=True)
    nbformat.write(release_nb, outbound / NOTEBOOK)
    return exchange, outbound / NOTEBOOK


def _student_copy(tmp_path: Path, assignment: str, nb) -> Path:
    """``nb`` saved as the student's notebook of ``assignment``: its path."""
    mine = tmp_path / "student" / assignment / NOTEBOOK
    mine.parent.mkdir(parents=True)
    nbformat.write(nb, mine)
    return mine


def _printed_validation(exchange: Path, mine: Path) -> PatientValidator:
    """The validator that has validated ``mine`` as `nbgrader validate` does, what it printed in its ``stream``."""
    validator = PatientValidator(config=_config(exchange))
    validator.stream = io.StringIO()
    validator.validate_and_print(str(mine))
    return validator


def _cell(nb, gid: str):
    return next(c for c in nb.cells if notebooks.grade_id(c) == gid)


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_validate_names_each_cell_grading_takes_from_the_release(tmp_path, language, assignment):
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    exchange, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    _cell(nb, EDITED).source = _cell(nb, EDITED).source.replace("assert", "# assert")  # "passes" in their lab
    nb.cells.remove(_cell(nb, DELETED))
    _cell(nb, METADATA).metadata.nbgrader["points"] = 20
    mine = _student_copy(tmp_path, assignment, nb)

    results = PatientValidator(config=_config(exchange)).validate(str(mine))

    def position(notebook, gid):
        return [notebooks.grade_id(c) for c in notebook.cells].index(gid) + 1

    def first_line(gid):  # the release cell's first line, cut with "..." past FIRST_LINE_CHARS
        line = _cell(release_nb, gid).source.split("\n")[0].strip()
        limit = patient_validate.FIRST_LINE_CHARS
        return line if len(line) <= limit else line[:limit - 3] + "..."

    graded_as_released = closing(GRADED_AS_RELEASED, language, released, mine)
    expected = [(DELETED, release_cells.DELETED, position(release_nb, DELETED)),
                (EDITED, release_cells.EDITED, position(nb, EDITED)),
                (METADATA, release_cells.METADATA_EDITED, position(nb, METADATA))]
    expected.sort(key=lambda case: position(release_nb, case[0]))  # in the release's order
    assert list(results) == ["changed"]  # what nbgrader's Validate dialog shows as changed cells, nothing run
    assert [entry["source"] for entry in results["changed"]] == [
        t(RESTORED_CELL[kind], language, position=where, grade_id=gid, first_line=first_line(gid))
        + (" " if language == "en" else "") + graded_as_released for gid, kind, where in expected]
    for entry in results["changed"]:
        assert str(released) in entry["source"]
        assert released.is_file()  # where it says the release's cell is, it is
    if language == "en":
        assert "Grading will use the release's version" in graded_as_released
    else:
        command, name = patient_validate.release_copy(mine, released)
        assert graded_as_released != GRADED_AS_RELEASED.format(copy_command=command, copy_name=name)
        assert all(t(sentence, language) != sentence for sentence in RESTORED_CELL.values())


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_nbgrader_validate_prints_each_notice_whole_under_a_heading_in_the_editions_language(tmp_path, language,
                                                                                             assignment):
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    exchange, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    nb.cells.remove(_cell(nb, DELETED))
    mine = _student_copy(tmp_path, assignment, nb)
    validator = _printed_validation(exchange, mine)
    printed = "".join(validator.stream.getvalue().split())  # wrapped lines, joined
    notice, = patient_validate.restored_cell_notices(nb, release_nb, released, language, mine)
    assert "".join(t(patient_validate.RESTORED_HEADING, language, count=1).split()) in printed
    assert "".join(notice.split()) in printed
    assert str(released) in validator.stream.getvalue()  # the path whole, on one line, to copy


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_an_answer_cell_whose_metadata_changed_keeps_its_text_and_is_told_so(tmp_path, language, assignment):
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    _, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    _cell(nb, "ppo_answer").metadata.nbgrader["locked"] = True
    notice, = patient_validate.restored_cell_notices(nb, release_nb, released, language,
                                                     STUDENT / assignment / NOTEBOOK)
    assert notice.startswith(t(RESTORED_CELL[release_cells.METADATA_EDITED], language,
                               position=[notebooks.grade_id(c) for c in nb.cells].index("ppo_answer") + 1,
                               grade_id="ppo_answer", first_line="def ppo_clipped_objective(ratio, advantage, "
                                                                 "clip_epsilon=0.2):"))
    assert notice.endswith(closing(GRADED_WITH_RELEASED_METADATA, language, released,
                                   STUDENT / assignment / NOTEBOOK))
    assert closing(GRADED_AS_RELEASED, language, released, STUDENT / assignment / NOTEBOOK) not in notice


def test_the_instructors_source_notebook_is_not_compared_with_the_release(tmp_path):
    """The source notebook (solutions, hidden tests) differs from the release by design: Validate of it in the
    instructor's lab is nbgrader's, not a list of every cell it "changed"."""
    release_nb = notebooks.read(COURSE_ROOT / "release" / "rlhf" / NOTEBOOK)
    source_nb = notebooks.read(COURSE_ROOT / "source" / "rlhf" / NOTEBOOK)
    _, released = _released(tmp_path, "rlhf", release_nb)
    # it would be listed
    assert patient_validate.restored_cell_notices(source_nb, release_nb, released, "en", STUDENT / "rlhf" / NOTEBOOK)
    assert not patient_validate.is_released_copy(source_nb)
    assert patient_validate.is_released_copy(release_nb)


TEST_CELL = {"nbgrader": {"grade": True, "grade_id": "visible_test", "points": 1, "solution": False,
                          "locked": True, "schema_version": 3}}
ANSWER_CELL = {"nbgrader": {"grade": False, "grade_id": "answer", "solution": True, "locked": False,
                            "schema_version": 3}}


def _small_release():
    nb = new_notebook(cells=[new_code_cell("def answer():\n    raise NotImplementedError()", metadata=ANSWER_CELL),
                             new_code_cell("assert answer() == 42\nprint('ok')", metadata=TEST_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for cell in nb.cells:
        cell.metadata.nbgrader["checksum"] = compute_checksum(cell)
    return nb


def _correct_work(tmp_path: Path) -> tuple[Path, Path]:
    """(the exchange, the student's notebook): the small release answered correctly, run (outputs kept), and two
    spaces and a blank line added at the visible test's line ends; nbgrader's checksum of that test changed."""
    release_nb = _small_release()
    exchange = tmp_path / "exchange"
    (exchange / COURSE / "outbound" / "small").mkdir(parents=True)
    nbformat.write(release_nb, exchange / COURSE / "outbound" / "small" / "small.ipynb")
    nb = copy.deepcopy(release_nb)
    nb.cells[0].source = "def answer():\n    return 42"
    test = nb.cells[1]
    test.source = test.source.replace("42", "42  ") + "\n"
    test.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ok\n")]
    assert compute_checksum(test) != test.metadata.nbgrader["checksum"]
    mine = tmp_path / "student" / "small" / "small.ipynb"
    mine.parent.mkdir(parents=True)
    nbformat.write(nb, mine)
    return exchange, mine


def test_outputs_and_line_end_spaces_are_no_edit(tmp_path):
    exchange, mine = _correct_work(tmp_path)
    nb = notebooks.read(mine)
    released = patient_validate.released_notebook(_config(exchange), str(mine))
    assert released == exchange / COURSE / "outbound" / "small" / "small.ipynb"
    assert patient_validate.restored_cell_notices(nb, notebooks.read(released), released, "en",
                                                  STUDENT / "rlhf" / NOTEBOOK) == []
    validator = PatientValidator(config=_config(exchange))
    validator.compared_with_release = True  # as validate() leaves it once the release is found and nothing differs
    assert validator._get_changed_cells(copy.deepcopy(nb)) == []
    # nbgrader's own comparison (a checksum of the exact text) calls the visible test changed
    assert len(Validator(config=_config(exchange))._get_changed_cells(copy.deepcopy(nb))) == 1


def test_no_released_copy_where_the_config_names_no_exchange_or_course(tmp_path):
    exchange, mine = _correct_work(tmp_path)
    elsewhere = Config()
    elsewhere.Exchange.root = str(tmp_path / "no-exchange")
    elsewhere.CourseDirectory.course_id = COURSE
    assert patient_validate.released_notebook(elsewhere, str(mine)) is None
    assert patient_validate.released_notebook(Config(), str(mine)) is None  # no course named


def test_correct_work_passes_validate_though_its_outputs_and_line_end_spaces_changed(tmp_path):
    """The whole Validate, a kernel run: success, where nbgrader's Validate reports the test cell changed."""
    exchange, mine = _correct_work(tmp_path)
    assert PatientValidator(config=_config(exchange)).validate(str(mine)) == {}  # success
    assert "changed" in Validator(config=_config(exchange)).validate(str(mine))


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_an_edited_text_cell_is_said_to_be_used_as_released_not_run_or_graded(tmp_path, language, assignment):
    """A locked markdown cell (the release's text) is neither run nor graded: Validate says grading uses the
    release's version, which is true of every locked cell."""
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    _, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    _cell(nb, "ppo_derivation").source += "\nmy own note"
    notice, = patient_validate.restored_cell_notices(nb, release_nb, released, language,
                                                     STUDENT / assignment / NOTEBOOK)
    assert notice.endswith(closing(GRADED_AS_RELEASED, language, released, STUDENT / assignment / NOTEBOOK))
    claims = ("run", "grade the") if language == "en" else ("运行", "评分的是")
    assert not any(claim in notice for claim in claims), notice


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_an_answer_cell_turned_into_another_type_is_told_to_move_its_text_into_the_release_cell(tmp_path, language,
                                                                                               assignment):
    """Its text is not graded: pasting the release's cell in its place alone would leave the answer out (or lose it,
    were the student's cell deleted), so the notice says to move the text into the pasted cell."""
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    _, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    retyped = _cell(nb, "gae_answer")
    retyped.cell_type = "markdown"
    for key in ("outputs", "execution_count"):
        retyped.pop(key, None)
    notice, = patient_validate.restored_cell_notices(nb, release_nb, released, language,
                                                     STUDENT / assignment / NOTEBOOK)
    assert notice.startswith(t(RESTORED_CELL[release_cells.TYPE_CHANGED], language,
                               position=[notebooks.grade_id(c) for c in nb.cells].index("gae_answer") + 1,
                               grade_id="gae_answer", first_line=_cell(release_nb, "gae_answer").source.split("\n")[0]))
    assert notice.endswith(closing(patient_validate.GRADED_WITHOUT_YOUR_TEXT, language, released,
                                   STUDENT / assignment / NOTEBOOK))
    assert ("move your text into it" if language == "en" else "再把你写的内容移进去") in notice


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_the_servers_answer_carries_a_true_heading_for_each_cell_taken_from_the_release(tmp_path, language,
                                                                                         assignment):
    """JupyterLab's Validate dialog: nbgrader's labextension heads each "changed" entry with "The source of the
    following cell has changed, but it should not have!", false of a deleted cell and of an answer cell whose text
    is graded; the course's server says in its answer, in the edition's language, what grading takes instead."""
    import logging
    from types import SimpleNamespace
    from rlhf_course.classroom.validate_extension import TAKEN_FROM_RELEASE, PatientValidateHandler, ValidateStatus

    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    exchange, _ = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    nb.cells.remove(_cell(nb, DELETED))
    _cell(nb, "ppo_answer").metadata.nbgrader["locked"] = True  # an answer cell: its text is still graded
    mine = _student_copy(tmp_path, assignment, nb)
    server = SimpleNamespace(root_dir=str(tmp_path / "student"), status=ValidateStatus(), validate_queue=None,
                             log=logging.getLogger("validate-heading-test"), load_config=lambda: _config(exchange))

    answer = PatientValidateHandler.validate_notebook(server, f"{assignment}/{NOTEBOOK}")

    assert answer["success"] is True and list(answer["value"]) == ["changed"]
    order = [notebooks.grade_id(c) for c in release_nb.cells]
    expected = sorted([(DELETED, patient_validate.TAKEN_FROM_RELEASE),
                       ("ppo_answer", patient_validate.METADATA_TAKEN_FROM_RELEASE)],
                      key=lambda case: order.index(case[0]))
    assert answer[TAKEN_FROM_RELEASE] == [t(heading, language) for _, heading in expected]
    for (gid, _), entry in zip(expected, answer["value"]["changed"]):
        assert gid in entry["source"]  # each heading stands above its own cell's notice
    if language == "zh-CN":
        assert all(t(heading, language) != heading for _, heading in expected)
    json.dumps(answer)  # what the handler sends


def test_an_answer_without_cells_taken_from_the_release_carries_no_headings(tmp_path):
    import logging
    from types import SimpleNamespace
    from rlhf_course.classroom.validate_extension import TAKEN_FROM_RELEASE, PatientValidateHandler, ValidateStatus

    server = SimpleNamespace(root_dir=str(tmp_path), status=ValidateStatus(), validate_queue=None,
                             log=logging.getLogger("validate-heading-test"), load_config=Config)
    (tmp_path / "empty.ipynb").write_text(nbformat.writes(new_notebook()))
    answer = PatientValidateHandler.validate_notebook(server, "empty.ipynb")
    assert answer["success"] is True and TAKEN_FROM_RELEASE not in answer


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_nbgrader_validate_wraps_by_display_columns(tmp_path, language, assignment):
    """A Chinese character takes two columns of a terminal, a Latin one one: the printed notices fill the
    validator's width in columns, neither past it nor at half of it for the Latin text a Chinese notice holds."""
    from rlhf_course.classroom.submit_refusal import _columns
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    exchange, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    _cell(nb, "ppo_answer").metadata.nbgrader["locked"] = True  # its notice quotes a line of Python
    mine = _student_copy(tmp_path, assignment, nb)
    validator = _printed_validation(exchange, mine)
    lines = [line for line in validator.stream.getvalue().split("\n") if line.strip() and set(line) != {"="}]
    command, _ = patient_validate.release_copy(mine, released)
    paths = command.split(" ")[1:]  # each path stays whole, to copy
    breakable = [line for line in lines if not any(path in line for path in paths)]
    assert breakable and all(_columns(line) <= validator.width for line in breakable)

    def first_unit(line):  # what a line break before ``line`` kept off the line above: a word, or a wide character
        if line[0].isascii():  # (and the closing punctuation that may not start a line)
            return line.split(" ")[0]
        return line[:2]

    notice_lines = lines[1:]  # after the heading
    for line, following in zip(notice_lines, notice_lines[1:]):
        assert _columns(line) + 1 + _columns(first_unit(following)) > validator.width, (line, following)


def test_the_labextension_replaces_the_line_nbgrader_s_dialog_shows():
    """The course's labextension finds nbgrader's line by its exact text: it is the one nbgrader's installed
    labextension writes above a changed cell, in the same dialog structure (a test of the pair, should nbgrader
    change its wording)."""
    import re
    import sys
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    nbgrader_js = "".join(p.read_text() for p in installed.glob("*.js"))
    course_js = (COURSE_ROOT / "jupyter" / "labextension" / "src" / "index.js").read_text()
    line, = re.findall(r"const NBGRADER_CHANGED = '([^']+)';", course_js)
    assert f'"{line}"' in nbgrader_js
    assert 'id="validation-message"' in nbgrader_js and '"validation-changed"' in nbgrader_js


@pytest.mark.parametrize("language, assignment", [("en", "rlhf"), ("zh-CN", "rlhf_zh")])
def test_the_way_back_it_gives_copies_the_release_beside_the_folder_and_never_over_the_students_notebook(
        tmp_path, language, assignment):
    """The released notebook has the student's notebook's name: a copy of it "into your folder" would replace their
    work, and be submitted with it.  The notice's command, run as a student would in a Terminal, makes the copy it
    names beside the assignment's folder; the student's notebook is untouched, and the assignment's folder (what
    Submit sends) holds nothing new."""
    import shlex
    import subprocess
    release_nb = notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)
    _, released = _released(tmp_path, assignment, release_nb)
    nb = copy.deepcopy(release_nb)
    _cell(nb, EDITED).source += "\n# edited"
    mine = _student_copy(tmp_path, assignment, nb)
    before = mine.read_bytes()
    notice, = patient_validate.restored_cell_notices(nb, release_nb, released, language, mine)
    command, name = patient_validate.release_copy(mine, released)
    assert command in notice and name in notice
    argv = shlex.split(command)
    assert argv[0] == "cp" and len(argv) == 3
    subprocess.run(argv, check=True, cwd=tmp_path / "student")
    assert mine.read_bytes() == before
    assert sorted(p.name for p in mine.parent.iterdir()) == [NOTEBOOK]
    copied = tmp_path / "student" / name
    assert copied.read_bytes() == released.read_bytes() and name != NOTEBOOK
