"""A student whose notebook's locked cells grading put back from the release is told so on their feedback page, at
each such cell, in the edition's language: an edited visible test, a deleted (hidden) test cell, a test cell whose
nbgrader metadata was edited, an answer cell turned into another type.  Untouched cells get no note, a change of
whitespace at a line's end is no edit, and nothing in a note comes from the cell's text.  The copy is made by intake's
own canonical_copy; the page is rendered in-process from a hand-made result; no root."""
from __future__ import annotations

import copy

import nbformat
import pytest
from bs4 import BeautifulSoup

from rlhf_course import COURSE_ROOT
from rlhf_course.course import notebooks
from rlhf_course.grading import canonical
from rlhf_course.grading.canonical import canonical_copy
from rlhf_course.grading.pages.feedback import RESTORED_NOTES, RESTORED_SUMMARY, render_page
from rlhf_course.grading.results import CellResult, SubmissionResult
from rlhf_course.i18n import t

NOTEBOOK = "rlhf_building_blocks.ipynb"
EDITED, DELETED, METADATA, RETYPED = "ppo_visible_tests", "dpo_gradient", "gae_visible_tests", "gae_answer"
WHITESPACE = "dpo_visible_tests"  # spaces added at its lines' ends and a blank line at its end: no edit


def _release(language: str):
    assignment = "rlhf" if language == "en" else "rlhf_zh"
    return assignment, notebooks.read(COURSE_ROOT / "release" / assignment / NOTEBOOK)


def _cell(nb, gid: str):
    return next(c for c in nb.cells if notebooks.grade_id(c) == gid)


def _tampered(release):
    """The student's notebook: the visible PPO test's expected numbers changed (so it passed in their lab), a hidden
    DPO test cell deleted, the visible GAE test's points raised, the GAE answer made a markdown cell, trailing
    whitespace in the visible DPO test, and an output in every cell of theirs that ran."""
    nb = copy.deepcopy(release)
    edited = _cell(nb, EDITED)
    edited.source = edited.source.replace("assert", "# assert")
    nb.cells.remove(_cell(nb, DELETED))
    _cell(nb, METADATA).metadata.nbgrader["points"] = 20
    retyped = _cell(nb, RETYPED)
    retyped.cell_type = "markdown"
    for key in ("outputs", "execution_count"):
        retyped.pop(key, None)
    spaced = _cell(nb, WHITESPACE)
    spaced.source = "\n".join(line + "  " for line in spaced.source.split("\n")) + "\n\n"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    return nb


def _result(language: str):
    assignment, release = _release(language)
    shown, flags = canonical_copy(_tampered(release), release)
    tests = [notebooks.grade_id(c) for c in release.cells
             if c.cell_type == "code" and (c.metadata.get("nbgrader") or {}).get("grade")]
    result = SubmissionResult("ada", "failed tests", assignment=assignment, notebook=NOTEBOOK, language=language,
                              cells={gid: CellResult(gid, 1.0, 1.0, f"message of {gid}") for gid in tests},
                              flags=flags, canonical_notebook=nbformat.writes(shown))
    return release, result


def test_the_copy_names_each_restored_cell_and_why():
    release, result = _result("en")
    ids = {notebooks.grade_id(c) for c in release.cells if notebooks.grade_id(c)}
    assert canonical.restored_cells(result.flags, ids) == {
        EDITED: [canonical.EDITED], DELETED: [canonical.DELETED], METADATA: [canonical.METADATA_EDITED],
        RETYPED: [canonical.TYPE_CHANGED]}


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_page_says_at_each_restored_cell_that_the_release_was_run_and_graded(language):
    release, result = _result(language)
    soup = BeautifulSoup(render_page(result, max_cells=1000, seconds=10).html, features="html.parser")
    notes = soup.select("div.rlhf-restored")
    english = {EDITED: RESTORED_NOTES[canonical.EDITED], DELETED: RESTORED_NOTES[canonical.DELETED],
               METADATA: RESTORED_NOTES[canonical.METADATA_EDITED], RETYPED: RESTORED_NOTES[canonical.TYPE_CHANGED]}
    expected = {gid: t(sentence, language) for gid, sentence in english.items()}
    assert len(notes) == len(expected)
    summary = soup.find(class_="rlhf-summary").find(class_="rlhf-restored-summary")
    assert summary.get_text() == t(RESTORED_SUMMARY, language, count=len(expected))  # said at the top too
    for note in notes:
        cell = note.find_next_sibling(class_="jp-Cell")
        gid, = [gid for gid in expected if _cell(release, gid).source.split("\n")[0].strip() in cell.get_text()]
        assert note.get_text(" ", strip=True) == expected[gid], gid
    if language == "en":
        assert "changed" in expected[EDITED] and "release" in expected[EDITED]
        assert "deleted" in expected[DELETED] and "metadata" in expected[METADATA]
    else:
        assert all(expected[gid] != english[gid] for gid in expected)  # Chinese, not the English fallback
        assert not any(c.isascii() and c.isalpha() for text in expected.values() for c in text.replace("nbgrader", ""))


def test_no_note_for_an_untouched_notebook_or_whitespace():
    assignment, release = _release("en")
    nb = copy.deepcopy(release)
    spaced = _cell(nb, WHITESPACE)
    spaced.source = "\n".join(line + " " for line in spaced.source.split("\n")) + "\n"
    shown, flags = canonical_copy(nb, release)
    assert flags == []
    result = SubmissionResult("bo", "graded", assignment=assignment, notebook=NOTEBOOK, flags=flags,
                              canonical_notebook=nbformat.writes(shown))
    page = render_page(result, max_cells=1000, seconds=10).html
    assert "rlhf-restored" not in page.split("</style>", 1)[1]  # neither a note nor the summary's line


def test_the_note_of_a_hidden_test_cell_quotes_nothing_of_it():
    release, result = _result("en")
    soup = BeautifulSoup(render_page(result, max_cells=1000, seconds=10).html, features="html.parser")
    hidden = _cell(release, DELETED).source
    for note in soup.select("div.rlhf-restored"):
        text = note.get_text(" ", strip=True)
        assert text in {t(sentence, "en") for sentence in RESTORED_NOTES.values()}
        assert not any(line.strip() and line.strip() in text for line in hidden.split("\n"))


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_note_of_an_edited_text_or_set_up_cell_says_it_was_used_not_run_or_graded(language):
    """A locked markdown cell (the release's text) is neither run nor graded, a set-up cell is run but not graded: the
    note says only that grading used the release's cell, which is true of every locked cell."""
    assignment, release = _release(language)
    nb = copy.deepcopy(release)
    for gid in ("ppo_derivation", "setup"):
        _cell(nb, gid).source += "\nmy own note"
    shown, flags = canonical_copy(nb, release)
    result = SubmissionResult("cy", "graded", assignment=assignment, notebook=NOTEBOOK, language=language,
                              flags=flags, canonical_notebook=nbformat.writes(shown))
    soup = BeautifulSoup(render_page(result, max_cells=1000, seconds=10).html, features="html.parser")
    notes = [note.get_text(" ", strip=True) for note in soup.select("div.rlhf-restored")]
    assert notes == [t(RESTORED_NOTES[canonical.EDITED], language)] * 2
    claims = ("run", "graded") if language == "en" else ("运行", "评分的是")
    assert not any(claim in notes[0] for claim in claims), notes[0]
