import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import matplotlib
import pytest

from rlhf_course import COURSE_FILES

# In-process figures render off-screen; kernels the tests start keep their inline backend
# (an MPLBACKEND in the environment would override it and hide every notebook plot).
matplotlib.use("Agg")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "instructor"))  # instructor-only modules, for the tests

# nbgrader calls `alembic` and kernels run `python` from PATH: use this interpreter's environment.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
# `make test` runs two test processes on two cores: the tiny LM's training (here, in the notebooks' kernels,
# in the lab a browser drives) takes one thread each, not two (two two-thread runs side by side measured
# 3-4x slower than alone; one thread each, about 1.4x).
# Everything else torch does in these processes and in the kernels and graders they start is small
# enough for one thread too (OMP_NUM_THREADS, read when torch starts).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("RLHF_LAB_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
os.environ.pop("RLHF_GRADEBOOK_URL", None)  # tests always use a gradebook inside their own copy
os.environ.pop("RLHF_EXCHANGE_ROOT", None)
# Submissions made by the tests are on time whatever today's date; the late-policy test sets its own.
os.environ["RLHF_DUE_DATE"] = "2100-01-01 00:00:00 UTC"


def copy_course(destination: Path) -> Path:
    """A scratch course directory: the instructor's inputs only, nothing generated."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in COURSE_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, destination / name)
    return destination


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
    """What ``pipeline.generate_release(course)`` makes of a course's inputs (the language editions'
    sources, release/ and the gradebook's assignments, due dates and grade cells), generated once per
    test run for given inputs and copied: nbgrader generate_assignment for every assignment costs about
    20 s of CPU, and a dozen test files need the same release.  A gradebook outside the course
    (RLHF_GRADEBOOK_URL) is generated for."""
    from rlhf_course.grading import course as pipeline
    if os.environ.get("RLHF_GRADEBOOK_URL"):
        pipeline.generate_release(course)
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
            for name in COURSE_FILES:  # the inputs only: anything else a test added stays its own
                src = course / name
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, generated / name)
            pipeline.generate_release(generated)
            (RELEASE_CACHE / key / ".complete").touch()
    shutil.copytree(generated, course, dirs_exist_ok=True)
    return course


@pytest.fixture
def course(tmp_path) -> Path:
    return copy_course(tmp_path / "course")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def _needs_sandbox():
    from rlhf_course.grading.sandbox import sandbox_available
    problem = sandbox_available()
    if problem and os.environ.get("CI"):
        # CI installs bubblewrap (.ci/run): a missing sandbox there is a failure, not a skip.
        return pytest.mark.usefixtures("_sandbox_required")
    return pytest.mark.skipif(problem is not None, reason=f"sandbox unavailable: {problem}")


@pytest.fixture
def _sandbox_required():
    from rlhf_course.grading.sandbox import sandbox_available
    pytest.fail(f"sandbox unavailable in CI: {sandbox_available()}")


needs_sandbox = _needs_sandbox()


def leftover_sandbox_processes() -> dict[int, list[int]]:
    """Processes of sandbox uids whose slot no grader holds (uid -> pids): what a finished batch
    left behind.  Slots another grader on this machine holds right now (another test run) are
    not counted, so the check holds on a shared machine too."""
    import fcntl

    from rlhf_course.grading.sandbox import FIRST_UID, SLOT_COUNT, SLOT_LOCKS, processes_of
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


# The slowest files first: `make test` gives each of its two workers one file at a time, so a long file that
# starts last runs on alone at the end.  Files not named keep pytest's order after these; the order within a
# file never changes.  Seconds of one worker in a fresh-clone CI run of 2026-12-04 (521 s in all):
SLOWEST_FIRST = (
    "tests/hub/test_course_on_jupyterhub.py",  # 135 (`make hub` generates its own release)
    "tests/grading/test_roundtrip.py",  # 106: stock nbgrader autograde of 17 notebooks; generates the shared release
    "tests/grading/test_batch.py",  # 93
    "tests/test_frontier.py",  # 89: the fresh sweep
    "tests/exchange/test_exchange_loop.py",  # 40-72
    "tests/browser/test_explorers_in_lab.py",  # 59
    "tests/browser/test_assignment_list.py",  # 57
    "tests/grading/test_chinese_edition.py",  # 50
    "tests/test_notebooks_execute.py",  # 47
    "tests/grading/test_grader_attacks.py",  # 45
    "tests/grading/test_scaling.py",  # 44
    "tests/browser/test_formgrader_offline.py",  # 41
    "tests/browser/test_lab_views.py",  # 33
    "tests/grading/test_course_elsewhere.py",  # 30
    "tests/test_release.py",  # 24
    "tests/lab/test_demo.py",  # 22
    "tests/grading/test_gradebook_records.py",  # 14
    "tests/grading/test_two_assignments.py",  # 12
)


def pytest_collection_modifyitems(config, items):
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(SLOWEST_FIRST)))  # stable


# Where the suite's CPU goes (the suite keeps both cores busy, so its time is its CPU): with
# RLHF_TEST_CPU_LOG=path, each test appends a JSON line with its wall seconds and the CPU seconds of
# its worker process and of the processes it started and waited for (kernels, nbgrader commands,
# sandboxes, servers stopped by a fixture's teardown are counted where the teardown ran).
_CPU_LOG = os.environ.get("RLHF_TEST_CPU_LOG")
if _CPU_LOG:
    import json
    import resource

    def _cpu_seconds() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        wall, cpu = time.perf_counter(), _cpu_seconds()
        yield
        with open(_CPU_LOG, "a") as log:
            log.write(json.dumps({"test": item.nodeid, "wall": round(time.perf_counter() - wall, 2),
                                  "cpu": round(_cpu_seconds() - cpu, 2),
                                  "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}) + "\n")
