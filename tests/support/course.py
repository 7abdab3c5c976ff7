"""A course directory for a test: the instructor's inputs copied, the release generated once per run,
and what the sandbox needs (the marker for tests that need one; the processes a batch left behind)."""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from rlhf_course import COURSE_FILES, copy_course_files

REPO = Path(__file__).resolve().parent.parent.parent


def cell_points(assignment: str, root: Path = REPO, folder: str = "source") -> dict[str, float]:
    """What each grade cell of an assignment's notebooks in ``folder`` (source/, or release/: what students fetch)
    is worth (``nbgrader.points``, the one truth: the checks declare none): grade id -> points, written answers
    included."""
    from rlhf_course.course import notebooks
    points = {}
    for path in sorted((root / folder / assignment).glob("*.ipynb")):
        nb = notebooks.read(path)
        graded = [notebooks.grade_id(cell) for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")]
        points.update(notebooks.points_of(nb, graded))
    return points


@functools.cache
def repo_course():
    """This repository's course (a :class:`~rlhf_course.course.settings.Course`, read once): what tests that only
    read the course's inputs (its checks, catalogues, translations) hand to the package."""
    from rlhf_course.course.settings import Course
    return Course.at(REPO)


def gradebook_url(course: Path) -> str:
    """The gradebook of the course in that folder, as its configuration names it (``CourseDirectory.db_url``)."""
    from rlhf_course.course.settings import Course
    return Course.at(course).db_url


def copy_course(destination: Path) -> Path:
    """A scratch course directory: the instructor's inputs only, nothing generated."""
    return copy_course_files(destination, REPO)


def deploy_module(name: str):
    """``deploy/z2jh/<name>.py``, imported (the deploy folder is scripts, not a package)."""
    import importlib.util
    import sys
    path = REPO / "deploy" / "z2jh" / f"{name}.py"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


RELEASE_CACHE = Path(tempfile.gettempdir()) / f"rlhf-course-test-releases-{os.getuid()}"  # per user: /tmp is shared


def _inputs_key(course: Path) -> str:
    """The course's inputs, the due date and this test run (all of pytest-xdist's workers share it)."""
    digest = hashlib.sha256()
    for name in COURSE_FILES:
        top = course / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(course)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(os.environ.get("RLHF_DUE_DATE", "").encode())
    digest.update(os.environ.get("PYTEST_XDIST_TESTRUNUID", f"pid {os.getpid()}").encode())
    return digest.hexdigest()[:20]


def release_course(course: Path) -> Path:
    """What ``release.generate_release(course)`` makes of a course's inputs (the language editions'
    sources, release/ and the gradebook's assignments, due dates and grade cells), generated once per
    test run for given inputs and copied: nbgrader generate_assignment for every assignment costs about
    20 s of CPU, and a dozen test files need the same release.  A gradebook outside the course
    (RLHF_GRADEBOOK_URL) is generated for."""
    from rlhf_course.course.settings import Course
    from rlhf_course.grading import release
    if os.environ.get("RLHF_GRADEBOOK_URL"):
        release.generate_release(Course.at(course))
        return course
    RELEASE_CACHE.mkdir(exist_ok=True)
    for stale in RELEASE_CACHE.iterdir():  # earlier test runs'
        if time.time() - stale.stat().st_mtime > 86400:
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    key = _inputs_key(course)
    generated = RELEASE_CACHE / key / "course"
    with open(RELEASE_CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker may be generating the same release
        if not (RELEASE_CACHE / key / ".complete").exists():
            shutil.rmtree(RELEASE_CACHE / key, ignore_errors=True)
            generated.mkdir(parents=True)
            copy_course_files(generated, course)  # the inputs only: anything else a test added stays its own
            release.generate_release(Course.at(generated))
            (RELEASE_CACHE / key / ".complete").touch()
    shutil.copytree(generated, course, dirs_exist_ok=True)
    return course


def _needs_sandbox():
    from rlhf_course.grading.sandbox.sandbox import sandbox_available
    problem = sandbox_available()
    if problem and os.environ.get("CI"):
        # CI installs bubblewrap (.ci/run): a missing sandbox there is a failure, not a skip
        # (the fixture, in tests/conftest.py, fails the test).
        return pytest.mark.usefixtures("_sandbox_required")
    return pytest.mark.skipif(problem is not None, reason=f"sandbox unavailable: {problem}")


needs_sandbox = _needs_sandbox()


def leftover_sandbox_processes() -> dict[int, list[int]]:
    """Processes of sandbox uids whose slot no grader holds (uid -> pids): what a finished batch
    left behind.  Slots another grader on this machine holds right now (another test run) are
    not counted, so the check holds on a shared machine too."""
    from rlhf_course.grading.sandbox.sandbox import FIRST_UID, SLOT_COUNT, SLOT_LOCKS, processes_of
    left = {}
    for slot in range(SLOT_COUNT):
        pids = processes_of(FIRST_UID + slot)
        if not pids:
            continue
        lock = SLOT_LOCKS / f"slot-{slot}.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # in use by a grader that is still running
        finally:
            os.close(fd)
        left[FIRST_UID + slot] = pids
    return left


def course_with_own_exchange(tmp_path: Path, monkeypatch, course_id: str) -> tuple[Path, Path, Path, dict]:
    """A released course and a student's folder on one exchange of their own under ``tmp_path``, as `make lab` sets
    them up: ``(course, exchange, home, env)``, ``env`` the student's commands' Jupyter config (the course's
    exchange classes, ``course_id``)."""
    exchange = tmp_path / "exchange"
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(exchange))
    course = release_course(copy_course(tmp_path / "course"))
    home, config = tmp_path / "student", tmp_path / "config"
    home.mkdir(), config.mkdir()
    (config / "nbgrader_config.py").write_text(
        f"from rlhf_course import exchange\nexchange.configure(get_config(), {str(exchange)!r}, {course_id!r})\n")
    return course, exchange, home, {"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
