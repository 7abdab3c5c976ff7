"""Hostile shapes of JSON, in a submitted notebook and in the feedback run's reply: each maps to a documented
state (rlhf_course/grading/results.py), never ``grader error``.  A few named shapes first (metadata of the
wrong type, a reply nested deeper than Python recurses, a notebook of very many cells), then random ones from
a seeded generator: types swapped, nesting, sizes, at random places of the release notebook."""
import json
import random
import shutil

import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, intake, results, trusted
from rlhf_course.grading.pages import feedback
from rlhf_course.course import notebooks
from rlhf_course.grading.assignment import resolve
from rlhf_course.grading.canonical import canonical_copy, with_outputs
from rlhf_course.grading.intake import Unreadable, take_in
from rlhf_course.course.limits import Limits
from rlhf_course.course.settings import Course
from tests.support.course import REPO
from tests.support.in_process_sandbox import InProcessSandbox

UNREADABLE_STATES = (results.MALFORMED, results.TOO_LARGE)
DOCUMENTED_STATES = tuple(state for state in results.SEVERITY if state != results.GRADER_ERROR)
DEEP = 100_000  # levels of nesting: far past Python's recursion limit


@pytest.fixture(scope="module")
def release_nb():
    return notebooks.read(REPO / "release" / ASSIGNMENT / NOTEBOOK)


@pytest.fixture(scope="module")
def release_json():
    return json.loads((REPO / "release" / ASSIGNMENT / NOTEBOOK).read_text())


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """A course with the committed release (no generation) and one honest submission to tamper with."""
    from tests.support.course import copy_course
    course = copy_course(tmp_path_factory.mktemp("hostile") / "course")
    shutil.copytree(REPO / "release", course / "release")
    course_handle = Course.at(course)
    examples.write_submission(course_handle, "honest", examples.answers_for(course_handle, ()))
    return course_handle


def _take_in_text(tmp_path, text: str, release_nb):
    folder = tmp_path / "submitted" / "mallory" / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTEBOOK).write_text(text)
    return take_in(folder, NOTEBOOK, release_nb, Limits())


def _answer_index(nb_json: dict, grade_id: str) -> int:
    return next(i for i, cell in enumerate(nb_json["cells"])
                if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


# ----------------------------------------------------------------------------- named shapes

@pytest.mark.parametrize("nbgrader", ["a string", ["a", "list"], 7, None, True],
                         ids=["string", "list", "number", "null", "boolean"])
def test_nbgrader_metadata_of_another_type_is_flagged_not_an_error(tmp_path, release_nb, release_json, nbgrader):
    nb = json.loads(json.dumps(release_json))
    nb["cells"][_answer_index(nb, "ppo_answer")]["metadata"]["nbgrader"] = nbgrader
    canonical, flags = _take_in_text(tmp_path, json.dumps(nb), release_nb)
    assert [notebooks.grade_id(c) for c in canonical.cells if notebooks.grade_id(c)] == \
        [notebooks.grade_id(c) for c in release_nb.cells if notebooks.grade_id(c)]
    assert any(flag.startswith("ppo_answer: was deleted") for flag in flags), flags


@pytest.mark.parametrize("grade_id", [["ppo_answer"], {"id": "ppo_answer"}, 3, "", None],
                         ids=["list", "mapping", "number", "empty", "null"])
def test_a_grade_id_that_is_not_a_name_is_flagged_not_an_error(tmp_path, release_nb, release_json, grade_id):
    nb = json.loads(json.dumps(release_json))
    nb["cells"][_answer_index(nb, "ppo_answer")]["metadata"]["nbgrader"]["grade_id"] = grade_id
    canonical, flags = _take_in_text(tmp_path, json.dumps(nb), release_nb)
    assert [notebooks.grade_id(c) for c in canonical.cells if notebooks.grade_id(c)] == \
        [notebooks.grade_id(c) for c in release_nb.cells if notebooks.grade_id(c)]
    assert any(flag.startswith("ppo_answer: was deleted") for flag in flags), flags


def test_grade_id_reads_only_a_name():
    for meta in ({"nbgrader": "x"}, {"nbgrader": ["grade_id"]}, {"nbgrader": {"grade_id": ["a"]}},
                 {"nbgrader": {"grade_id": ""}}, "not a mapping", None):
        assert notebooks.grade_id({"cell_type": "code", "metadata": meta}) is None, meta
    assert notebooks.grade_id({"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "a"}}}) == "a"
    assert notebooks.nbgrader_metadata({"metadata": {"nbgrader": ["solution"]}}) == {}


def test_a_notebook_of_very_many_cells_is_refused_before_it_is_validated(tmp_path, release_nb, monkeypatch):
    """136,625 empty cells in 7.9 MiB (under the size limit): counted, then refused, never handed to nbformat
    (validating them cost 4-7 CPU-s; counting them is one JSON parse)."""
    cells = [{"cell_type": "raw", "metadata": {}, "source": "", "id": str(i)} for i in range(136_625)]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, separators=(",", ":"))
    assert len(text) < Limits().submitted_notebook_bytes
    handed_to_nbformat = []
    monkeypatch.setattr(intake.nbformat, "reads", lambda *args, **kwargs: handed_to_nbformat.append(args))
    monkeypatch.setattr(intake.nbformat, "validate", lambda *args, **kwargs: handed_to_nbformat.append(args))
    with pytest.raises(Unreadable) as refused:
        _take_in_text(tmp_path, text, release_nb)
    assert refused.value.state == results.TOO_LARGE and "136625 cells" in str(refused.value)
    assert handed_to_nbformat == []


def test_a_version_3_notebook_s_cells_are_counted_too(tmp_path, release_nb):
    cells = [{"cell_type": "code", "input": "", "outputs": [], "language": "python", "metadata": {}}] * 2000
    text = json.dumps({"metadata": {}, "nbformat": 3, "nbformat_minor": 0,
                       "worksheets": [{"cells": cells, "metadata": {}}]})
    with pytest.raises(Unreadable) as refused:
        _take_in_text(tmp_path, text, release_nb)
    assert refused.value.state == results.TOO_LARGE and "2000 cells" in str(refused.value)


class ReplyingSandbox(InProcessSandbox):
    """The in-process double whose feedback run replies with given bytes (the class attribute)."""
    reply = b""

    def feedback(self) -> bytes:
        return type(self).reply


def _grade_with_reply(course: Course, reply: bytes):
    ReplyingSandbox.reply = reply
    return trusted.grade_submission(course, resolve(course, ASSIGNMENT), "honest", NOTEBOOK, sandbox=ReplyingSandbox)


def test_a_feedback_reply_nested_deeper_than_python_recurses_is_unreadable_not_an_error(graded_course):
    result = _grade_with_reply(graded_course, b"[" * DEEP + b"]" * DEEP)
    assert result.state == results.GRADED, result.detail
    assert result.executed_notebook is None
    assert "came back unreadable" in result.detail


# ----------------------------------------------------------------------------- random shapes

def random_value(rng: random.Random, depth: int = 0):
    """A JSON value of a random type: scalars of every kind, strings with control characters, lists and
    mappings (nesting up to a few levels here; deeper nesting is spliced in as text, see :func:`hostile_text`)."""
    kind = rng.choice(["null", "bool", "int", "float", "string", "list", "dict"] if depth < 4 else
                      ["null", "bool", "int", "float", "string"])
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, -1, 1, 2**63, -(2**64), 10**30, rng.randrange(-1000, 1000)])
    if kind == "float":
        return rng.choice([0.5, -0.0, 1e308, float("nan"), float("inf"), rng.random()])
    if kind == "string":
        return rng.choice(["", "ppo_answer", "code", "markdown", "raw", "\x1b[2J\x00\u202e", "x" * rng.randrange(1, 5000),
                           "solution", "grade_id", "cells", "nbgrader"])
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {rng.choice(["nbgrader", "grade_id", "solution", "grade", "points", "cells", "source", "outputs",
                        "cell_type", "metadata", "id", "text", "data", "name", "output_type"]): random_value(rng, depth + 1)
            for _ in range(rng.randrange(0, 4))}


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


PLACEHOLDER = "\ue000deep\ue000"


def hostile_text(rng: random.Random, base: dict) -> str:
    """``base`` (a notebook as JSON data) with one to three of its values replaced by random ones (at least
    one of them near the nbgrader metadata, where a submission's shape matters most), sometimes a
    value nested very deep, sometimes a cell list many times longer, as the text of a file."""
    nb = json.loads(json.dumps(base))
    for index in range(rng.randrange(1, 4)):
        paths = list(_paths(nb))
        nbgrader_paths = [p for p in paths if "nbgrader" in p or p[-1:] in (("metadata",), ("source",), ("cell_type",))]
        path = rng.choice(nbgrader_paths if index == 0 and nbgrader_paths else paths)
        if not path:
            continue
        parent = nb
        for key in path[:-1]:
            parent = parent[key]
        choice = rng.random()
        if choice < 0.1:
            parent[path[-1]] = PLACEHOLDER
        elif choice < 0.15 and isinstance(nb.get("cells"), list) and nb["cells"]:
            nb["cells"] = nb["cells"] * rng.randrange(2, 30)
        else:
            parent[path[-1]] = random_value(rng)
    text = json.dumps(nb)
    depth = rng.choice([50, 900, 5000, DEEP])
    return text.replace(json.dumps(PLACEHOLDER), "[" * depth + "]" * depth)


def test_random_shapes_taken_in_end_in_a_copy_or_a_documented_state(tmp_path, release_nb, release_json):
    rng = random.Random(20261207)
    outcomes: dict[str, int] = {}
    for trial in range(100):
        text = hostile_text(rng, release_json)
        try:
            canonical, flags = _take_in_text(tmp_path, text, release_nb)
        except Unreadable as exc:
            assert exc.state in UNREADABLE_STATES, (trial, exc.state)
            outcomes[exc.state] = outcomes.get(exc.state, 0) + 1
        else:
            # the copy is the release's cells, in the release's order
            assert [notebooks.grade_id(c) for c in canonical.cells if notebooks.grade_id(c)] == \
                [notebooks.grade_id(c) for c in release_nb.cells if notebooks.grade_id(c)], trial
            outcomes["taken in"] = outcomes.get("taken in", 0) + 1
    assert set(outcomes) >= {"taken in", results.MALFORMED}, outcomes  # the generator reaches both


def test_random_feedback_replies_never_stop_the_page(graded_course, release_nb, release_json):
    """The reply of the feedback run (untrusted) read as the grader reads it, then shown as the page shows it."""
    rng = random.Random(48)
    canonical, _ = canonical_copy(release_nb, release_nb)
    base = json.loads(json.dumps(canonical))
    for cell in base["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hello\n"}]
    for trial in range(60):
        reply = hostile_text(rng, base).encode()
        if rng.random() < 0.05:
            reply = reply[: rng.randrange(len(reply))] + b"\xff"
        result = results.SubmissionResult("mallory", results.GRADED)
        trusted._run_feedback(_Replying(reply), result, Limits())
        nb, _ = with_outputs(canonical, result.executed_notebook, Limits().cells)
        feedback.safe_html.bound_notebook(nb)
        feedback.annotate_grade_cells(nb, result)


class _Replying:
    """Just what ``trusted._run_feedback`` asks of a sandbox."""

    def __init__(self, reply: bytes):
        self.reply = reply

    def feedback(self) -> bytes:
        return self.reply

    def kill(self) -> None:
        pass


def test_random_shapes_graded_end_to_end_never_become_a_grader_error(graded_course, release_json):
    """A few of the random shapes through the whole trusted grader (in process), as the notebook and as the reply."""
    rng = random.Random(7)
    path = graded_course.folder("submitted", "honest", ASSIGNMENT) / NOTEBOOK
    honest = path.read_text()
    seen = set()
    try:
        for _ in range(8):
            path.write_text(hostile_text(rng, json.loads(honest)))
            result = _grade_with_reply(graded_course, hostile_text(rng, release_json).encode())
            assert result.state in DOCUMENTED_STATES, result.detail[:2000]
            seen.add(result.state)
    finally:
        path.write_text(honest)
    assert len(seen) >= 2, seen
