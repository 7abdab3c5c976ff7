"""A feedback page read offline: written by trusted grading, opened from file:// in Chromium with
every other request refused, its derivations' math typeset and nothing asked of any host, in both
languages.  A few seconds: two pages written, two page loads."""
from __future__ import annotations

import re

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, instructor, results
from rlhf_course.grading.pages import feedback
from rlhf_course.grading.results import CellResult, SubmissionResult
from rlhf_course.i18n import CHINESE, ENGLISH
from rlhf_course.course.settings import Course
from tests.support import browser as browser_support
from tests.support.course import cell_points
from tests.support.submissions import canonical_json

EDITIONS = [(ASSIGNMENT, ENGLISH), (ASSIGNMENT + "_zh", CHINESE)]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from tests.support.course import copy_course, release_course
    root = copy_course(tmp_path_factory.mktemp("offline") / "course")
    release_course(root)
    root_course = Course.at(root)
    for assignment, _ in EDITIONS:
        examples.write_submission(root_course, "ada", examples.answers_for(root_course, ()), assignment=assignment)
    return root


def _inline_math(nb) -> list[str]:
    """The ``$...$`` formulas of the notebook's markdown (its derivations), as written."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += re.findall(r"(?<![$\\])\$([^$\n]+?)(?<![$\\])\$", cell.source)
    return found


def _page(course, assignment, language):
    checks = instructor.checks_of(Course.at(course), ASSIGNMENT)
    points = cell_points(ASSIGNMENT)
    cells = {c.id: CellResult(c.id, points[c.id], points[c.id], c.message) for c in checks.values()}
    result = SubmissionResult("ada", results.GRADED, assignment, NOTEBOOK, cells=cells, language=language)
    submitted = course / "submitted" / "ada" / assignment / NOTEBOOK
    result.canonical_notebook = result.executed_notebook = canonical_json(course, "ada", assignment, NOTEBOOK)
    return feedback.write_feedback(Course.at(course), result), nbformat.read(str(submitted), 4)


@pytest.mark.parametrize("assignment,language", EDITIONS)
def test_a_feedback_page_shows_its_math_with_the_network_cut(course, browser, artifacts, assignment, language):
    path, nb = _page(course, assignment, language)
    formulas = _inline_math(nb)
    assert len(formulas) > 20, "the notebook's derivations quote their math inline"
    page, asked = browser_support.offline_page(browser, {"width": 1100, "height": 900})
    context = page.context
    try:
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_timeout(300)  # anything a script would still fetch after load
        text = page.inner_text("main")
        typeset = page.locator("math").count()
        raw = [f for f in formulas if f"${f}$" in text]
        fractions = page.locator("math mfrac")
        if fractions.count():
            fractions.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / f"feedback_offline_{language}.png"))
        box = fractions.first.bounding_box() if fractions.count() else None
    finally:
        context.close()
    assert asked == []
    assert typeset >= len(formulas) and raw == []
    assert box and box["height"] > 15  # a fraction is drawn as one (numerator above denominator)
    if language == CHINESE:
        assert "检查的性质" in text and "通过" in text  # the summary table, in Chinese
        assert re.search(r"[\u4e00-\u9fff]{20}", text)  # and the notebook's prose
    assert path.stat().st_size < 1_000_000
