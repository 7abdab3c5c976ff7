"""A fresh clone (release/ committed, no gradebook yet) released to students by `make lab` (or nbgrader
release_assignment), which records the assignment and its due date but none of its notebooks: `make grade` of a
collected submission grades it, the gradebook completed from source/ as `make release` records it; and a `make
release` that fails leaves release/ as it was and says what to do.  Grading runs through the in-process sandbox."""
from __future__ import annotations

import datetime as dt
import filecmp
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest
from sqlalchemy.exc import SAWarning

from rlhf_course import NOTEBOOK
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from rlhf_course.exchange import local
from rlhf_course.grading import app, batch, examples, release
from tests.support.course import REPO, copy_course, gradebook_url
from tests.support.in_process_sandbox import grade_in_process

EDITION = "rlhf_zh"  # the walk's assignment: the Chinese edition, released and submitted from the lab
KL, KL_NOTEBOOK = "kl_penalty", "kl_penalty.ipynb"  # the smallest assignment, where the walk's assignment is not needed
STUDENT = "root"


def fresh_clone(folder: Path) -> Path:
    """A course as a clone has it: the inputs and the committed release/, no gradebook."""
    course = copy_course(folder)
    shutil.copytree(REPO / "release", course / "release")
    return course


def release_files(course: Path) -> dict[str, bytes]:
    return {str(p.relative_to(course / "release")): p.read_bytes()
            for p in sorted((course / "release").rglob("*")) if p.is_file()}


def lab_submission(course: Path, assignment: str = EDITION) -> Course:
    """`make lab`'s release to the exchange, then one student's correct submission of ``assignment`` (the walk's,
    or the KL exercise), as nbgrader collect lays it."""
    handle = Course.at(course)
    local.release_for_lab(handle)
    if assignment == KL:
        answers = notebooks.solution_answers(notebooks.read(course / "source" / KL / KL_NOTEBOOK))
        examples.write_submission(handle, STUDENT, answers, assignment=KL, notebook=KL_NOTEBOOK)
    else:
        examples.write_submission(handle, STUDENT, examples.answers_for(handle, ()), assignment=assignment)
    return handle


def submission_row_without_notebooks(course: Path, assignment: str, extension: dt.timedelta) -> None:
    """What an extension granted (or a grading stopped) records while the gradebook holds the assignment's row
    alone: a submission with none of the notebooks (nbgrader's update_or_create_submission, as grant_extension)."""
    from nbgrader.api import Gradebook
    with Gradebook(gradebook_url(course)) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_student(STUDENT)
        gb.update_or_create_submission(assignment, STUDENT, extension=extension)


def test_a_submission_to_a_lab_released_assignment_is_graded(tmp_path):
    course = fresh_clone(tmp_path / "course")
    committed = release_files(course)
    handle = lab_submission(course)
    [result] = grade_in_process(handle, assignments=[EDITION])
    assert (result.state, result.score) == ("graded", result.max_score) and result.max_score > 0
    cells = examples.cell_scores(gradebook_url(course), STUDENT, EDITION, NOTEBOOK)
    assert {g: c.score for g, c in cells.items() if g in result.cells} == {g: c.score for g, c in result.cells.items()}
    assert release_files(course) == committed  # completing the gradebook writes nothing into release/
    # a gradebook that holds the assignment's notebooks (this class's, graded) is left exactly as it is
    database = course / "gradebook.db"
    before = database.read_bytes()
    batch.complete_gradebook(handle, [EDITION])
    assert database.read_bytes() == before


def test_an_extension_granted_before_the_gradebook_had_notebooks_is_kept_and_graded(tmp_path):
    from nbgrader.api import Gradebook
    course = fresh_clone(tmp_path / "course")
    handle = lab_submission(course, KL)
    submission_row_without_notebooks(course, KL, dt.timedelta(hours=48))
    [result] = grade_in_process(handle, assignments=[KL])
    assert (result.state, result.score) == ("graded", result.max_score) and result.max_score > 0
    with Gradebook(gradebook_url(course)) as gb:
        assert gb.find_submission(KL, STUDENT).extension == dt.timedelta(hours=48)


def test_make_release_after_the_lab_records_the_assignment_and_keeps_release_as_committed(tmp_path):
    course = fresh_clone(tmp_path / "course")
    committed = release_files(course)
    handle = lab_submission(course, KL)
    submission_row_without_notebooks(course, KL, dt.timedelta(hours=24))
    release.generate_release(handle, [KL])  # nbgrader's own refusal, and release/kl_penalty deleted, before
    assert release_files(course) == committed and not any(course.glob(".release-*"))
    [result] = grade_in_process(handle, assignments=[KL])
    assert (result.state, result.score) == ("graded", result.max_score)


def test_a_release_that_fails_leaves_release_as_it_was_and_says_what_to_do(tmp_path, capsys):
    """nbgrader will not change an assignment's notebooks once it has submissions: a notebook added to source/
    after one is refused, and the committed release/ stays byte for byte."""
    from nbgrader.api import Gradebook
    course = fresh_clone(tmp_path / "course")
    handle = Course.at(course)
    release.generate_release(handle, ["kl_penalty"])
    with Gradebook(gradebook_url(course)) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_student("ada")
        gb.add_submission("kl_penalty", "ada")
    shutil.copy(course / "source" / "kl_penalty" / "kl_penalty.ipynb", course / "source" / "kl_penalty" / "extra.ipynb")
    before = release_files(course)
    code = app.main(["release", "kl_penalty", "--course-root", str(course)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert release_files(course) == before
    assert err.startswith("release did not run: kl_penalty not generated: release/kl_penalty is as it was. "), err
    assert "has submissions" in err and "git checkout -- source/kl_penalty" in err, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert not any(course.glob(".release-*")), "the scratch folder is removed"


def test_a_release_unlike_its_source_is_refused_before_grading(tmp_path):
    """The gradebook is completed only from the source that generates exactly the release students fetched."""
    from nbgrader.api import Gradebook
    from rlhf_course.course.settings import NotReady
    course = fresh_clone(tmp_path / "course")
    handle = lab_submission(course, KL)
    edited = course / "source" / KL / KL_NOTEBOOK
    source_nb = notebooks.read(edited)
    next(cell for cell in source_nb.cells if cell.cell_type == "markdown").source += "\n\nEdited after the release."
    nbformat.write(source_nb, str(edited))
    with pytest.raises(NotReady) as refused:
        grade_in_process(handle, assignments=[KL])
    assert f"release/{KL}/{KL_NOTEBOOK} is not what source/{KL} generates" in str(refused.value)
    assert f"git checkout -- source/{KL}" in str(refused.value)
    with Gradebook(gradebook_url(course)) as gb:
        assert gb.find_assignment(KL).notebooks == []  # nothing recorded from the edited source
        assert gb.find_assignment(KL).submissions == []  # nothing graded


def test_the_assignments_generated_before_a_refusal_are_released_and_recorded_in_the_manifest(tmp_path):
    import json

    from rlhf_course.grading.generate import GenerateError
    course = fresh_clone(tmp_path / "course")
    manifest = course / "release" / "manifest.json"
    recorded = json.loads(manifest.read_text())
    del recorded["assignments"][KL]  # as if kl_penalty had never been generated
    manifest.write_text(json.dumps(recorded))
    broken = course / "source" / "grpo" / "grpo.ipynb"
    broken.write_text(broken.read_text().replace("### END SOLUTION", "", 1))
    before = release_files(course)
    with pytest.raises(GenerateError, match="grpo not generated: release/grpo is as it was") as refused:
        release.generate_release(Course.at(course), [KL, "grpo"])
    assert refused.value.generated == [KL]
    after = release_files(course)
    assert {name: data for name, data in after.items() if name != "manifest.json"} == \
        {name: data for name, data in before.items() if name != "manifest.json"}
    assert set(json.loads(manifest.read_text())["assignments"]) == set(json.loads(
        (REPO / "release" / "manifest.json").read_text())["assignments"])
    assert not any(course.glob(".release-*"))
