"""nbgrader release_assignment publishes exactly what `make release` generated: a notebook edited in release/ (a
student's answers), a solution region or hidden-test code is refused, naming the file and why; a course released
straight from the committed release/ (no `make release`, no gradebook yet) still has its due date."""
import json
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK, copy_course_files
from rlhf_course.course import notebooks, private_files, release_manifest
from rlhf_course.grading import examples
from tests.support.command_session import OwnCommandSession
from tests.support.course import REPO, copy_course, release_course, repo_course

COURSE_ID = "rlhf-course"
IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".*"]


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """The file's nbgrader commands in one process of this user's (nbgrader's app reset between them, as its own
    tests run it): the guard is what is tested, not a command's start, and each new process pays nbgrader's
    imports (2-3 CPU-s)."""
    with OwnCommandSession(tmp_path_factory.mktemp("commands")) as session:
        yield session


def _release(commands, course: Path, exchange: Path, *args: str):
    """``nbgrader release_assignment ARGS`` in the course folder, to the exchange at ``exchange``; its output in
    ``stdout`` (stderr with it)."""
    return commands.nbgrader("release_assignment", *args, cwd=course, env={"RLHF_EXCHANGE_ROOT": str(exchange)},
                             check=False)


def test_an_edited_release_notebook_is_refused(tmp_path, commands, repo):
    course = release_course(copy_course(tmp_path / "course"))
    outbound = tmp_path / "exchange" / COURSE_ID / "outbound" / ASSIGNMENT
    edited = course / "release" / ASSIGNMENT / NOTEBOOK  # a student's answers, saved over the release
    nbformat.write(notebooks.fill_answers(notebooks.read(edited), examples.answers_for(repo_course(), ())), str(edited))
    proc = _release(commands, course, tmp_path / "exchange", ASSIGNMENT)
    said = proc.stdout
    assert proc.returncode != 0, said
    assert f"release/{ASSIGNMENT}/{NOTEBOOK} differs from what `make release` generated" in said, said
    assert "run `make release`" in said
    assert "line(s) of the source's solution or hidden tests" in said, said  # the correct answers themselves
    assert not outbound.exists()


def test_a_release_without_a_manifest_is_refused(tmp_path, commands):
    course = release_course(copy_course(tmp_path / "course"))
    outbound = tmp_path / "exchange" / COURSE_ID / "outbound" / ASSIGNMENT
    (course / "release" / release_manifest.MANIFEST).unlink()
    proc = _release(commands, course, tmp_path / "exchange", ASSIGNMENT)
    assert proc.returncode != 0 and f"records no release of {ASSIGNMENT!r}" in proc.stdout
    assert not outbound.exists()


def test_solution_and_hidden_test_regions_are_refused_even_when_recorded(tmp_path, repo):
    """A release generated wrongly (its hash recorded all the same) still gives nothing away."""
    source_folder, release_folder = tmp_path / "source", tmp_path / "release"
    shutil.copytree(repo / "source" / ASSIGNMENT, source_folder / ASSIGNMENT)
    shutil.copytree(repo / "release" / ASSIGNMENT, release_folder / ASSIGNMENT)
    assert release_manifest.problems(release_folder, source_folder, ASSIGNMENT, IGNORE) == [
        f"{release_folder / release_manifest.MANIFEST} records no release of {ASSIGNMENT!r}: {release_manifest.REMAKE}"]
    release_manifest.record(release_folder, [ASSIGNMENT], IGNORE)
    assert release_manifest.problems(release_folder, source_folder, ASSIGNMENT, IGNORE) == []

    source = notebooks.read(source_folder / ASSIGNMENT / NOTEBOOK)
    hidden = next(c.source for c in source.cells if "### BEGIN HIDDEN TESTS" in c.source)
    solution = next(c.source for c in source.cells if notebooks.is_answer_cell(c) and "### BEGIN SOLUTION" in c.source)
    leaked = notebooks.read(release_folder / ASSIGNMENT / NOTEBOOK)
    answer_cells = [c for c in leaked.cells if notebooks.is_answer_cell(c)]
    answer_cells[0].source = solution
    test_cell = next(i for i, c in enumerate(leaked.cells) if c.cell_type == "code" and not notebooks.is_answer_cell(c))
    leaked.cells[test_cell].source = hidden.replace("### BEGIN HIDDEN TESTS\n", "").replace("### END HIDDEN TESTS", "")
    nbformat.write(leaked, str(release_folder / ASSIGNMENT / NOTEBOOK))
    release_manifest.record(release_folder, [ASSIGNMENT], IGNORE)  # as if `make release` had made it so
    reasons = release_manifest.problems(release_folder, source_folder, ASSIGNMENT, IGNORE)
    where = f"release/{ASSIGNMENT}/{NOTEBOOK}"
    assert any(r.startswith(f"{where}: cell ") and "holds a solution region ('### BEGIN SOLUTION')" in r
               for r in reasons), reasons
    assert any(r.startswith(f"{where}: cell {test_cell + 1} holds ") and "hidden tests" in r
               and "rlhf_hidden_checks" in r for r in reasons), reasons
    assert all(r.endswith("it would give answers away") for r in reasons)

    stray = release_folder / ASSIGNMENT / "answers.py"  # a file the release did not make
    stray.write_text("x = 1\n")
    assert f"release/{ASSIGNMENT}/answers.py was not made by `make release`" in " ".join(
        release_manifest.problems(release_folder, source_folder, ASSIGNMENT, IGNORE))


def test_the_committed_release_is_released_with_its_due_date(tmp_path, commands, repo):
    """A fresh clone: release/ is committed, the gradebook does not exist yet (no `make release`)."""
    course = copy_course(tmp_path / "course")
    shutil.copytree(repo / "release", course / "release")
    outbound = tmp_path / "exchange" / COURSE_ID / "outbound" / ASSIGNMENT
    proc = _release(commands, course, tmp_path / "exchange", ASSIGNMENT)
    said = proc.stdout
    assert proc.returncode == 0, said
    assert f"{ASSIGNMENT}: due 2100-01-01 00:00 UTC (in the exchange)" in said, said
    assert (outbound / NOTEBOOK).is_file()
    published = json.loads((tmp_path / "exchange" / COURSE_ID / "deadlines" / f"{ASSIGNMENT}.json").read_text())
    assert published["due"] == "2100-01-01 00:00:00 UTC"


def test_a_course_other_accounts_can_read_is_not_released_to_a_shared_exchange(tmp_path, commands):
    """A fresh clone is world-readable (umask 022): released to an exchange outside the course, every student with
    an account on this machine could read its solutions and hidden tests.  Refused before anything is copied, with
    the fix; released once the course is private, or where the course says no student shares the machine."""
    course = Path(tempfile.mkdtemp(prefix="rlhf-readable-course-", dir="/tmp"))
    try:
        course.chmod(0o755)  # as `git clone` leaves it, below /tmp (searchable by everyone)
        copy_course_files(course)
        shutil.copytree(REPO / "release", course / "release")  # the committed release: no `make release` first
        shared = tmp_path / "shared"
        proc = _release(commands, course, shared, "kl_penalty")
        said = proc.stdout
        assert proc.returncode != 0, said
        assert f"every account on this machine could read {course}'s source/" in said, said
        assert "instructor/" in said and f"chmod o-rwx {course}" in said, said
        assert not (shared / COURSE_ID / "outbound" / "kl_penalty").exists()  # nothing went out

        proc = _release(commands, course, tmp_path / "pod", "kl_penalty",
                        "--RlhfCourse.students_share_this_machine=False")
        assert proc.returncode == 0, proc.stdout
        assert (tmp_path / "pod" / COURSE_ID / "outbound" / "kl_penalty").is_dir()

        course.chmod(0o750)  # the fix it names
        proc = _release(commands, course, shared, "kl_penalty")
        assert proc.returncode == 0, proc.stdout
        assert (shared / COURSE_ID / "outbound" / "kl_penalty").is_dir()
    finally:
        shutil.rmtree(course, ignore_errors=True)


def test_a_course_local_exchange_is_one_persons_and_not_refused(tmp_path):
    """`make lab`'s exchange lies inside the course (one person, the checkout's owner): nothing to refuse."""
    course = tmp_path / "course"
    copy_course_files(course)
    assert private_files.exposure_reason(course, course / "exchange", exposed={"source": [course / "source"]}) is None
    reason = private_files.exposure_reason(course, tmp_path / "shared", exposed={"source": [course / "source"]})
    assert reason is not None and f"chmod o-rwx {course}" in reason
