"""release/ is exactly what nbgrader generates from source/, and nothing secret reaches it."""
import filecmp
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, release
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support import solutions
from tests.support.course import gradebook_url, release_course


def tree_files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def test_release_is_in_sync_with_source(course, repo):
    # What generate_release makes of this checkout's inputs, generated once in this test run and shared
    # (tests/support/course.py: release_course).
    release_course(course)
    fresh, committed = tree_files(course / "release"), tree_files(repo / "release")
    assert fresh.keys() == committed.keys()
    for name in fresh:
        assert filecmp.cmp(fresh[name], committed[name], shallow=False), (
            f"release/{name} differs from what generate_assignment makes: run `make release` and commit")


def secret_lines(repo) -> list[str]:
    """Every solution and hidden-test line of every assignment's source notebooks."""
    lines = []
    for path in sorted((repo / "source").glob("*/*.ipynb")):
        source_nb = notebooks.read(path)
        lines += solutions.solution_lines(source_nb) + solutions.hidden_test_lines(source_nb)
    assert len(lines) > 30
    return lines


def shipped_files(repo) -> list[Path]:
    files = [p for p in (repo / "release").rglob("*") if p.is_file()]
    files += [p for p in (repo / "rlhf_course").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return files


def test_no_solution_or_hidden_test_reaches_students(repo):
    secrets = secret_lines(repo)
    for path in shipped_files(repo):
        text = path.read_text(errors="replace")
        # Compare line by line, as a notebook stores each source line as its own JSON string.
        shipped = {line.strip().strip('",').replace('\\"', '"').replace("\\n", "").strip()
                   for line in text.splitlines()}
        leaked = [line for line in secrets if line in shipped]
        assert not leaked, f"{path} contains {leaked[:3]}"
        if path.is_relative_to(repo / "release"):  # (the grading tools may name the module they load)
            assert "_hidden_checks" not in text, f"{path} names a hidden checks module"
            assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, path


def test_release_stubs_raise_not_implemented(repo):
    release = notebooks.read(repo / "release" / ASSIGNMENT / NOTEBOOK)
    answers = [c for c in release.cells if notebooks.is_answer_cell(c)]
    assert len(answers) == 3
    for cell in answers:
        assert "raise NotImplementedError()" in cell.source


def test_release_notebooks_carry_no_outputs_or_widget_state(repo):
    for path in list((repo / "release").rglob("*.ipynb")) + list((repo / "source").rglob("*.ipynb")):
        nb = notebooks.read(path)
        assert "widgets" not in nb.metadata, path
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, (path, cell.id)


def test_config_loads_without_error(repo):
    """nbgrader only logs a broken config and carries on with defaults: load it ourselves."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(repo)).load_config()
    assert config.CourseDirectory.course_id == "rlhf-course"
    assert config.CourseDirectory.db_url.startswith("sqlite:///")
    assert config.Execute.timeout == 120
    names = [pp.__name__ for pp in config.Autograde.autograde_preprocessors]
    assert names.index("StderrIsNotFailure") == names.index("Execute") + 1


@pytest.mark.slow
def test_nbgrader_validate_answered_release_passes_and_release_fails(course):
    release_course(course)
    # In the release only the hidden-test cells pass, which hold nothing but a comment until grading restores them
    # (shown below without a second run, `validate --invert`, which lists the cells that pass: every grade cell is
    # one of these, and Validate fails on exactly the others).
    import rlhf_hidden_checks
    graded = [notebooks.grade_id(c) for c in notebooks.read(course / "release" / ASSIGNMENT / NOTEBOOK).cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    others = sorted(set(graded) - set(rlhf_hidden_checks.HIDDEN_CHECKS))
    assert others == sorted([f"{f}_visible_tests" for f in ("ppo", "dpo", "gae")]
                            + [f"lab_question_{n}" for n in (1, 2, 3)])
    assert len(graded) == len(rlhf_hidden_checks.HIDDEN_CHECKS) + len(others)

    # Validate agrees with grading: a correct answer that emits a warning passes (the locked setup
    # cell prints warnings on stdout; Validate would count them on stderr as a failure).
    course_handle = Course.at(course)
    answers = examples.answers_for(course_handle, ())
    answers.update(solutions.written_solutions(notebooks.read(course / "source" / ASSIGNMENT / NOTEBOOK)))
    answers["dpo_answer"] = answers["dpo_answer"].replace(
        "def dpo_loss(", "import warnings\n\ndef dpo_loss(", 1).replace(
        '    """\n', '    """\n    warnings.warn("a torch-style UserWarning from a correct answer")\n', 1)
    assert "warnings.warn" in answers["dpo_answer"]
    warns = course / "warns" / NOTEBOOK
    warns.parent.mkdir()
    nbformat.write(notebooks.fill_answers(notebooks.read(course / "release" / ASSIGNMENT / NOTEBOOK), answers), warns)
    # The release and the warning answer in one `nbgrader validate`: one report each, in that order, on stdout (its
    # log on stderr).  The release fails: the three visible tests (NotImplementedError) and Part 4's three written
    # answers, still unanswered (the six grade cells that are not hidden tests: those pass); the answered release
    # passes.  The source itself, hidden tests in place, runs clean on a fresh kernel (every cell, no error:
    # tests/test_notebooks_execute.py::test_source_notebook_runs_clean): a third kernel here would run it again.
    proc = release.nbgrader(course, "validate", f"release/{ASSIGNMENT}/{NOTEBOOK}", str(warns.relative_to(course)))
    released, *passed = proc.stdout.split("Success! Your notebook passes all the tests.")
    assert len(passed) == 1 and not "".join(passed).strip(), proc.stdout[-3000:]
    assert released.startswith(f"VALIDATION FAILED ON {len(others)} CELL(S)!"), proc.stdout[-3000:]
    assert released.count("NotImplementedError") >= 3 and released.count("YOUR ANSWER HERE") == 3
    assert proc.stderr.count("Validating '") == 2 and "ERROR" not in proc.stderr, proc.stderr[-3000:]


def test_release_records_each_due_date_and_every_grade_cell(course):
    """The release's gradebook (generated in one nbgrader process, grading/generate.py) records what
    `nbgrader db assignment add --duedate` and `nbgrader generate_assignment` would."""
    from nbgrader.api import Gradebook
    release_course(course)
    with Gradebook(gradebook_url(course)) as gradebook:
        for assignment in release.source_assignments(Course.at(course)):
            recorded = gradebook.find_assignment(assignment)
            assert recorded.duedate is not None and recorded.duedate.year == 2100  # tests/conftest.py's RLHF_DUE_DATE
            released = sorted((course / "release" / assignment).glob("*.ipynb"))
            assert sorted(nb.name for nb in recorded.notebooks) == [p.stem for p in released]
            for path in released:
                grade_ids = {notebooks.grade_id(cell) for cell in notebooks.read(path).cells
                             if cell.metadata.get("nbgrader", {}).get("grade")}
                assert {cell.name for cell in gradebook.find_notebook(path.stem, assignment).grade_cells} == grade_ids


def test_a_broken_source_stops_the_release_with_nbgraders_reason(course):
    path = course / "source" / ASSIGNMENT / NOTEBOOK
    nb = notebooks.read(path)
    answer = notebooks.cells_by_grade_id(nb)["ppo_answer"]
    answer.source = answer.source.replace("### END SOLUTION", "")
    nbformat.write(nb, str(path))
    course_handle = Course.at(course)
    with pytest.raises(RuntimeError, match=rf"(?si)generate_assignment {ASSIGNMENT} failed.*No end solution statement found"):
        release.generate_release(course_handle, [ASSIGNMENT])
    assert not list((course / "release").glob(f"{ASSIGNMENT}/*.ipynb"))
