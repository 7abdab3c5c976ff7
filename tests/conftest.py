import os
import sys
import time
from pathlib import Path

import matplotlib
import pytest

from tests.support.course import REPO, copy_course

# In-process figures render off-screen; kernels the tests start keep their inline backend
# (an MPLBACKEND in the environment would override it and hide every notebook plot).
matplotlib.use("Agg")

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


@pytest.fixture
def course(tmp_path) -> Path:
    return copy_course(tmp_path / "course")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def _sandbox_required():
    from rlhf_course.grading.sandbox import sandbox_available
    pytest.fail(f"sandbox unavailable in CI: {sandbox_available()}")


# The slowest files first: `make test` gives each of its two workers one file at a time, so a long file that
# starts last runs on alone at the end.  Files not named keep pytest's order after these; the order within a
# file never changes.  Seconds of one worker in a fresh-clone CI run of 2026-12-04 (521 s in all):
SLOWEST_FIRST = (
    "tests/classroom/test_course_on_jupyterhub.py",  # 135 (`make hub` generates its own release)
    "tests/grading/test_roundtrip.py",  # 106: stock nbgrader autograde of 17 notebooks; generates the shared release
    "tests/grading/test_batch.py",  # 93
    "tests/lab/test_frontier.py",  # 89: the fresh sweep
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
    "tests/lab/test_ppo_dpo.py",  # 22
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
