"""release/ is exactly what nbgrader generates from source/, and nothing secret reaches it."""
import ast
import filecmp
import re
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples, release
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support import code_shapes, solutions
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


# What a contract states on purpose, though a solution's expression too: (assignment, grade id) -> the expressions.
# None: the contracts say in words what a function returns, and the student writes it in torch.
STATED_BY_CONTRACT: dict[tuple[str, str], set[str]] = {}


def solution_shapes(repo) -> dict[str, tuple[str, str]]:
    """Every non-trivial statement and expression of every code solution region in source/ (English editions: a
    Chinese edition's code is its English one's), by shape: shape -> (assignment, its source text)."""
    found = {}
    for path in sorted((repo / "source").glob("*/*.ipynb")):
        for cell in notebooks.read(path).cells:
            if cell.cell_type != "code":
                continue
            for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.DOTALL):
                tree = code_shapes.parse_fragment(block)
                assert tree is not None, f"{path} {cell.id}: a solution region that is not Python"
                for shape, node in code_shapes.shapes(tree):
                    found.setdefault(shape, (path.parent.name, ast.unparse(node)))
    return found


def readable_code(repo):
    """(where, assignment, grade id, parsed code) of all a student can read or import: each code cell and each
    markdown code span or fenced block of release/ (both editions), and each module of rlhf_course/ with the
    ``literal`` spans of its docstrings."""
    for path in sorted((repo / "release").glob("*/*.ipynb")):
        assignment = path.parent.name.removesuffix("_zh")
        for cell in notebooks.read(path).cells:
            where = f"{path.relative_to(repo)} cell {notebooks.grade_id(cell) or cell.id}"
            if cell.cell_type == "code":
                tree = code_shapes.parse_fragment(cell.source)
                assert tree is not None or not cell.source.strip(), f"{where}: a code cell that does not parse"
                fragments = [tree]
            else:
                fragments = [code_shapes.parse_fragment(span) for span in code_shapes.code_spans(cell.source)]
            for tree in fragments:
                if tree is not None:
                    yield where, assignment, notebooks.grade_id(cell), tree
    for path in sorted((repo / "rlhf_course").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        yield str(path.relative_to(repo)), None, None, tree
        for span in code_shapes.docstring_spans(tree):
            if (fragment := code_shapes.parse_fragment(span)) is not None:
                yield f"{path.relative_to(repo)} docstring", None, None, fragment


def answer_leaks(repo) -> tuple[list[str], set[tuple]]:
    """Each place a student can read a solution's expression up to renaming, and the contract statements seen."""
    secrets = solution_shapes(repo)
    leaks, stated = [], set()
    for where, assignment, grade_id, tree in readable_code(repo):
        for shape, node in code_shapes.shapes(tree):
            if shape not in secrets:
                continue
            text = ast.unparse(node)
            allowed = STATED_BY_CONTRACT.get((assignment, grade_id), set())
            if secrets[shape][0] == assignment and text in allowed:
                stated.add((assignment, grade_id, text))
            else:
                leaks.append(f"{where}: `{text}` is {secrets[shape][0]}'s solution `{secrets[shape][1]}`")
    return leaks, stated


def test_no_solution_expression_reaches_students_even_renamed(repo):
    """Whole solution lines are compared above; this compares every statement and expression of the solutions
    (two operations or more: tests/support/code_shapes.py) with renamed variables, so
    ``d = ref_log_p - log_p; return torch.expm1(d) - d`` is found in ``("k3", torch.expm1(x) - x)`` or a
    markdown span ``expm1(d) - d``."""
    assert len(solution_shapes(repo)) > 20
    leaks, stated = answer_leaks(repo)
    assert not leaks, "\n".join(leaks)
    expected = {(assignment, grade_id, text) for (assignment, grade_id), texts in STATED_BY_CONTRACT.items()
                for text in texts}
    assert stated == expected, f"STATED_BY_CONTRACT names what no contract states any more: {expected - stated}"


def shapes_of(code: str) -> set[str]:
    return {shape for shape, _ in code_shapes.shapes(code_shapes.parse_fragment(code))}


def test_a_renamed_copy_of_an_answer_has_its_shape():
    answer = shapes_of("d = ref_log_p - log_p\nreturn torch.expm1(d) - d")
    for copied in ("for name, k in (('k1', -x), ('k3', torch.expm1(x) - x)):\n    pass",  # the leaked demo cell
                   "stable = torch.expm1(d32) - d32", "expm1(d) - d", "math.expm1(t) - t"):
        assert shapes_of(copied) & answer, copied
    for other in ("torch.exp(d) - 1 - d", "(r - 1) - d", "torch.expm1(d) - e", "-d + torch.expm1(d)",
                  "torch.expm1(d) + d"):
        assert not shapes_of(other) & answer, other


def test_the_languages_common_idioms_are_not_answers():
    """The threshold: one operation is not an answer however it is named; two are."""
    for idiom in ("ref_log_p - log_p", "t + 1", "torch.zeros_like(rewards)", "rewards.mean(dim=1, keepdim=True)",
                  "x.shape[0]", "torch.expm1(d)", "-d", "not found", "steps", "0.0", "k = log_p - ref_log_p"):
        assert shapes_of(idiom) == set(), idiom
    for answer_like in ("-F.logsigmoid(margin)", "centred / (s + eps)", "x[t] + 1", "torch.minimum(a, b).mean()"):
        assert shapes_of(answer_like), answer_like


NOTEBOOK_KL = "kl_penalty.ipynb"


def test_the_leak_test_finds_the_k3_written_out_in_a_release(tmp_path, repo):
    """The leak test against a copy of the course whose release states the answer, as a demonstration cell did."""
    import shutil
    for folder in ("source", "release"):
        shutil.copytree(repo / folder, tmp_path / folder)
    (tmp_path / "rlhf_course").symlink_to(repo / "rlhf_course")
    path = tmp_path / "release" / "kl_penalty_zh" / NOTEBOOK_KL
    nb = notebooks.read(path)
    notebooks.cells_by_grade_id(nb)["kl_variance"].source += "\nper_token = torch.expm1(d) - d\n"
    nbformat.write(nb, str(path))
    leaks, _ = answer_leaks(tmp_path)
    assert leaks == [f"release/kl_penalty_zh/{NOTEBOOK_KL} cell kl_variance: `torch.expm1(d) - d` is kl_penalty's "
                     "solution `torch.expm1(d) - d`"]


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
