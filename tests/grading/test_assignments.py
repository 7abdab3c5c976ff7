"""Every assignment of the course follows the rule the trusted grader relies on: its checks are
``instructor/<assignment>_hidden_checks.py``, one check per autograded cell, named by the cell's
grade id, worth the cell's points; a cell without a check or a check without a cell fails here.
A language edition (i18n/) is graded by its base assignment's checks and must match them the same way."""
import pytest

from rlhf_course.grading import batch, release
from rlhf_course.course import notebooks
from rlhf_course.grading.assignment import resolve
from rlhf_course.course.settings import Course, NotReady
from tests.support.course import REPO

ASSIGNMENTS = release.source_assignments(Course.at(REPO))


def autograded_cells(nb) -> dict[str, int]:
    meta = lambda cell: cell.get("metadata", {}).get("nbgrader", {})  # noqa: E731
    return {meta(c)["grade_id"]: meta(c)["points"] for c in nb.cells if c.cell_type == "code" and meta(c).get("grade")}


def test_the_course_has_its_assignments():
    assert "rlhf" in ASSIGNMENTS
    assert batch.released_assignments(Course.at(REPO)) == ASSIGNMENTS  # every source assignment is released (committed)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_autograded_cell_has_its_check_and_every_check_its_cell(assignment):
    graded = resolve(Course.at(REPO), assignment)  # for an edition: its base's checks
    cells: dict[str, int] = {}
    for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
        nb_cells = autograded_cells(notebooks.read(path))
        assert not set(nb_cells) & set(cells), f"{path.name}: a grade id used twice in {assignment}"
        cells.update(nb_cells)
        assert set(graded.notebook_checks(notebooks.read(path))) == set(nb_cells)
    assert set(cells) - set(graded.checks) == set(), "grade cells with no check"
    assert set(graded.checks) - set(cells) == set(), "checks with no grade cell"


def test_a_grade_cell_without_a_check_is_refused_not_scored():
    import copy
    graded = resolve(Course.at(REPO), "rlhf")
    release = notebooks.read(REPO / "release" / "rlhf" / "rlhf_building_blocks.ipynb")
    extra = copy.deepcopy(next(c for c in release.cells if notebooks.grade_id(c) == "ppo_gradient"))
    extra.metadata["nbgrader"]["grade_id"] = "ppo_new_property"
    release.cells.append(extra)
    with pytest.raises(ValueError, match="rlhf_hidden_checks has no check for the grade cell.s. ppo_new_property"):
        graded.notebook_checks(release)


def test_an_assignment_without_checks_stops_the_batch_with_the_file_it_needs(tmp_path):
    with pytest.raises(NotReady, match=r"assignment 'essay' has no checks: .*instructor/essay_hidden_checks.py is missing"):
        resolve(Course.at(tmp_path), "essay")
