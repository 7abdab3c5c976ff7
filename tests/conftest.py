import functools
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import matplotlib
import nbgrader.api
import pytest
import sqlalchemy

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


@sqlalchemy.event.listens_for(sqlalchemy.engine.Engine, "connect")
def _scratch_gradebooks_commit_without_a_disk_sync(connection, _record) -> None:
    """Every gradebook these processes open is a test's scratch copy (SQLite; see above): its commits need not
    wait for the disk (a sync each, 5-10 ms under load: a batch of 112 submissions commits about 340 times).
    A commit still survives the crash of a process, which is all a test could do to it; nbgrader's own commands
    (subprocesses) keep SQLite's default."""
    if isinstance(connection, sqlite3.Connection):
        connection.execute("PRAGMA synchronous=OFF")


# A new gradebook asks `alembic heads` (a Python subprocess) for the version it records; the answer is the installed
# nbgrader's and the same every time, so a test process asks once (the first new gradebook still records the
# real answer; nbgrader's own commands, subprocesses, ask as they always do).
nbgrader.api.get_alembic_version = functools.cache(nbgrader.api.get_alembic_version)


@pytest.fixture(scope="session")
def lab_stage_cache(tmp_path_factory) -> Path:
    """A folder for the lab's SFT policy and reward model (RLHF_LAB_CACHE, rlhf_course/lab/shared_stages.py), one
    per test run and shared by its workers: the first test to need a pair of them trains it, the next ones with
    the same settings, seed and thread count load it (exactly the trained numbers: tests/lab/test_shared_stages.py).
    Never a previous run's: each run trains its own once."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lab-stage-cache"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def course(tmp_path) -> Path:
    return copy_course(tmp_path / "course")


@pytest.fixture
def chinese(monkeypatch):
    """This process speaks Chinese for the test (figures drawn with the CJK font), matplotlib's settings restored
    and figures closed after; skipped without a CJK font, failed in CI (.ci/run installs one)."""
    import matplotlib.pyplot as plt

    from rlhf_course import i18n
    if i18n.cjk_font() is None:
        if os.environ.get("CI"):
            pytest.fail("no CJK font installed: .ci/run installs fonts-noto-cjk")
        pytest.skip("no CJK font on this machine (Debian: apt install fonts-noto-cjk)")
    monkeypatch.setattr(i18n, "_language", i18n.CHINESE)
    with matplotlib.rc_context():
        yield
    plt.close("all")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def _sandbox_required():
    from rlhf_course.grading.sandbox.sandbox import sandbox_available
    pytest.fail(f"sandbox unavailable in CI: {sandbox_available()}")


# The slowest files first: `make test` gives each of its two workers one file at a time, so a long file that
# starts last runs on alone at the end.  Each file's seconds, measured (a whole run's wall seconds of its tests),
# are in tests/durations.json: `RLHF_TEST_CPU_LOG=/tmp/cpu.jsonl make test && python bench/durations.py
# /tmp/cpu.jsonl` writes it (run it again when a file's cost changes much).  A file found under another folder is
# known by its name; a file it does not name yet (a new one) goes first, as if it were the slowest.  The order
# within a file never changes.
DURATIONS = Path(__file__).with_name("durations.json")


def file_seconds() -> dict[str, float]:
    """tests/durations.json: test file (path from the checkout) -> seconds."""
    if not DURATIONS.exists():
        return {}
    return {path: measured["seconds"] for path, measured in json.loads(DURATIONS.read_text())["files"].items()}


def pytest_collection_modifyitems(config, items):
    seconds = file_seconds()
    by_name: dict[str, list[float]] = {}
    for path, value in seconds.items():
        by_name.setdefault(Path(path).name, []).append(value)

    def slowest_first(item) -> float:
        path = item.nodeid.split("::", 1)[0]
        if path in seconds:
            return -seconds[path]
        same_name = by_name.get(Path(path).name, [])
        return -same_name[0] if len(same_name) == 1 else -float("inf")

    items.sort(key=slowest_first)  # stable: the order within a file stays


# Where the suite's CPU goes (the suite keeps both cores busy, so its time is its CPU): with
# RLHF_TEST_CPU_LOG=path, each test appends a JSON line with its wall seconds and the CPU seconds of
# its worker process and of the processes it started and waited for (kernels, nbgrader commands,
# sandboxes, servers stopped by a fixture's teardown are counted where the teardown ran), its worker's pid, the
# machine's 1-minute load average and the clock time (epoch seconds) when it ended.  bench/durations.py makes
# tests/durations.json from it; bench/suite_cpu.py finds where the CPU goes and where the cores wait.
_CPU_LOG = os.environ.get("RLHF_TEST_CPU_LOG")
if _CPU_LOG:
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
                                  "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "pid": os.getpid(),
                                  "load": round(os.getloadavg()[0], 2), "ended": round(time.time(), 2)}) + "\n")
