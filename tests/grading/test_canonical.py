"""The canonical copy: every field a student controls in a submitted notebook, and what the copy the
instructor sees (and every page renders) makes of it.  Answers stay the student's text; order, ids,
metadata, outputs, attachments and sizes are the course's."""
import base64
import copy
import json

import nbformat
import pytest

from rlhf_course.course import notebooks
from rlhf_course.grading.canonical import MAX_SOURCE_CHARS, canonical_copy, with_outputs

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


@pytest.fixture(scope="module")
def release(repo):
    return notebooks.read(repo / "release" / "rlhf" / "rlhf_building_blocks.ipynb")


def _index(nb) -> dict:
    return {notebooks.grade_id(c): i for i, c in enumerate(nb.cells)}


def _cell(nb, gid):
    return notebooks.cells_by_grade_id(nb)[gid]


# (name, what the student does to their notebook, the flag expected (a substring, or None), a check of the copy)
def _edit_answer(nb):
    _cell(nb, "ppo_answer").source = "def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):\n    return ratio\n"


def _edit_locked(nb):
    _cell(nb, "ppo_visible_tests").source = "pass  # the asserts were in the way\n"


def _edit_points(nb):
    _cell(nb, "dpo_values").metadata["nbgrader"]["points"] = 100
    _cell(nb, "lab_question_3").metadata["nbgrader"]["points"] = 20


def _move_written_answer_to_top(nb):
    """Mallory: her written answer first, under it one empty heading per other grade cell."""
    cells = _index(nb)
    answer = nb.cells.pop(cells["lab_question_1"])
    answer.source = "A plausible answer.\n\n" + "".join(
        f'<h6 id="{g}" class="hidden full-credit"></h6>' for g in cells if g and g != "lab_question_1")
    nb.cells.insert(0, answer)


def _duplicate_answer(nb):
    cells = _index(nb)
    second = copy.deepcopy(nb.cells[cells["dpo_answer"]])
    second.source = "# the second copy\n" + second.source
    nb.cells.insert(cells["dpo_answer"] + 3, second)


def _delete_test(nb):
    del nb.cells[_index(nb)["ppo_gradient"]]


def _retype_answer(nb):
    cell = _cell(nb, "gae_answer")
    cell.cell_type = "markdown"
    cell.pop("outputs"), cell.pop("execution_count")


def _unknown_grade_cell(nb):
    nb.cells.append(nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "bonus", "points": 100, "solution": False, "locked": False}}))


def _extra_cells(nb):
    cells = _index(nb)
    nb.cells.insert(cells["dpo_answer"] + 1, nbformat.v4.new_code_cell("scratch = 2", metadata={"tags": ["x"]}))
    nb.cells.insert(0, nbformat.v4.new_raw_cell("<script>alert(1)</script>", metadata={"raw_mimetype": "text/html"}))


def _cell_metadata(nb):
    for cell in nb.cells:
        cell.metadata.update(magics_language="maple", tags=["hidden"], jupyter={"source_hidden": True},
                             custom={"anything": 1})


def _notebook_metadata(nb):
    nb.metadata.language_info["pygments_lexer"] = "maple"
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata.kernelspec["name"] = "evil"


def _forged_ids(nb):
    ids = [c.id for c in nb.cells]
    for cell, new in zip(nb.cells, ids[1:] + ids[:1]):
        cell.id = new


def _outputs(nb):
    answer = _cell(nb, "ppo_answer")
    answer.outputs = [nbformat.v4.new_output("stream", text="[trusted grader] passed (50 / 50)")]


def _attachments(nb):
    answer = _cell(nb, "lab_question_2")
    answer.source = "See ![plot](attachment:plot.png)"
    answer.attachments = {"plot.png": {"image/png": PNG, "image/svg+xml": "<svg onload=alert(1)/>"},
                          "page.html": {"text/html": "<script>alert(1)</script>"},
                          "broken.png": {"image/png": "not base64!"}}


def _huge_cells(nb):
    _cell(nb, "kl_answer" if "kl_answer" in _index(nb) else "gae_answer").source = "x = 1\n" * 20_000
    _cell(nb, "lab_question_3").source = "word " * 20_000


CASES = [
    ("answer edited", _edit_answer, None,
     lambda out, rel: "return ratio\n" in _cell(out, "ppo_answer").source),
    ("locked cell edited", _edit_locked, "ppo_visible_tests: the locked cell was edited",
     lambda out, rel: _cell(out, "ppo_visible_tests").source == _cell(rel, "ppo_visible_tests").source),
    ("nbgrader metadata edited", _edit_points, "dpo_values: nbgrader metadata points was edited",
     lambda out, rel: _cell(out, "dpo_values").metadata.nbgrader.points == _cell(rel, "dpo_values").metadata.nbgrader.points
     and _cell(out, "lab_question_3").metadata.nbgrader.points == 2),
    ("written answer moved to the top", _move_written_answer_to_top, "lab_question_1: was moved",
     lambda out, rel: _index(out)["lab_question_1"] == _index(rel)["lab_question_1"]
     and "A plausible answer." in _cell(out, "lab_question_1").source),
    ("answer duplicated", _duplicate_answer, "dpo_answer: appears 2 times",
     lambda out, rel: _cell(out, "dpo_answer").source.startswith("# the second copy")
     and [notebooks.grade_id(c) for c in out.cells].count("dpo_answer") == 1),
    ("test cell deleted", _delete_test, "ppo_gradient: was deleted",
     lambda out, rel: _cell(out, "ppo_gradient").source == _cell(rel, "ppo_gradient").source),
    ("answer retyped", _retype_answer, "gae_answer: answer cell changed from code to markdown",
     lambda out, rel: _cell(out, "gae_answer").cell_type == "code"
     and _cell(out, "gae_answer").source == _cell(rel, "gae_answer").source),
    ("unknown nbgrader cell", _unknown_grade_cell, "bonus: unknown nbgrader cell",
     lambda out, rel: out.cells[-1].source == "x = 1" and out.cells[-1].metadata == {}),
    ("cells added", _extra_cells, None,
     lambda out, rel: out.cells[0].cell_type == "markdown" and out.cells[0].source.startswith("~~~text\n<script>")
     and out.cells[_index(out)["dpo_answer"] + 1].source == "scratch = 2"
     and out.cells[_index(out)["dpo_answer"] + 1].metadata == {}
     and [c.id for c in out.cells if not notebooks.grade_id(c)] == ["student-added-1", "student-added-2"]),
    ("cell metadata", _cell_metadata, None,
     lambda out, rel: [c.metadata for c in out.cells] == [c.metadata for c in rel.cells]),
    ("notebook metadata", _notebook_metadata, None,
     lambda out, rel: out.metadata == rel.metadata),
    ("cell ids forged", _forged_ids, None,
     lambda out, rel: [c.id for c in out.cells] == [c.id for c in rel.cells]),
    ("outputs submitted", _outputs, None,
     lambda out, rel: all(not c.get("outputs") for c in out.cells)),
    ("attachments", _attachments, None,
     lambda out, rel: _cell(out, "lab_question_2").attachments == {"plot.png": {"image/png": PNG}}),
    ("huge cells", _huge_cells, "its text was cut to its first 64 KiB",
     lambda out, rel: all(len(c.source) < MAX_SOURCE_CHARS + 200 for c in out.cells)
     and "[this cell was cut" in _cell(out, "lab_question_3").source),
]


@pytest.mark.parametrize("name,tamper,flag,check", CASES, ids=[c[0] for c in CASES])
def test_what_the_canonical_copy_makes_of_each_field(release, name, tamper, flag, check):
    nb = copy.deepcopy(release)
    tamper(nb)
    out, flags = canonical_copy(nb, release)
    nbformat.validate(out)
    assert check(out, release), name
    if flag is None:
        assert not [f for f in flags if "extra cell" not in f and "bonus" not in f], flags
    else:
        assert any(flag in f for f in flags), flags
    # whatever was done, the grade cells are the release's, in its order, with its ids and nbgrader metadata
    grade_cells = [c for c in out.cells if notebooks.grade_id(c)]
    assert [(c.id, c.metadata) for c in grade_cells] == [(c.id, c.metadata) for c in release.cells]


def test_an_untouched_notebook_is_its_own_canonical_copy(release):
    out, flags = canonical_copy(copy.deepcopy(release), release)
    assert flags == []
    assert [(c.cell_type, c.source, c.metadata) for c in out.cells] == \
        [(c.cell_type, c.source, c.metadata) for c in release.cells]


def test_the_moved_cells_are_the_ones_out_of_order(release):
    nb = copy.deepcopy(release)
    nb.cells = list(reversed(nb.cells[:3])) + nb.cells[3:]  # three cells reversed: two of them moved
    _, flags = canonical_copy(nb, release)
    assert len([f for f in flags if "was moved" in f]) == 2


def test_outputs_come_only_from_the_courses_run_of_the_copy(release):
    out, _ = canonical_copy(copy.deepcopy(release), release)
    ran = json.loads(nbformat.writes(out))
    answer = next(c for c in ran["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ppo_answer")
    answer["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hello"}]
    answer["metadata"]["magics_language"] = "maple"  # whatever else came back is not taken
    shown, taken = with_outputs(out, json.dumps(ran), 1000)
    assert taken and _cell(shown, "ppo_answer").outputs[0]["text"] == "hello"
    assert "magics_language" not in _cell(shown, "ppo_answer").metadata
    for tamper in (lambda cells: cells.reverse(), lambda cells: cells.append(dict(cells[0], id="new")),
                   lambda cells: cells[0].update(id="other")):
        changed = json.loads(json.dumps(ran))
        tamper(changed["cells"])
        shown, taken = with_outputs(out, json.dumps(changed), 1000)
        assert not taken and all(not c.get("outputs") for c in shown.cells)
