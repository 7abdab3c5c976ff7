"""A large course: grading tasks on an existing Dask cluster (scheduler and workers on
loopback), the gradebook in a real PostgreSQL server, the course directory shared."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import rlhf_catalogue
from rlhf_course import NOTEBOOK
from rlhf_course.grading import batch, examples, instructor, release
from rlhf_course.course import notebooks
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, needs_sandbox

pytestmark = [pytest.mark.slow, needs_sandbox]
PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), None) if Path("/usr/lib/postgresql").exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def empty_the_database(url: str) -> None:
    """Drop every table in the test database: the tests own it (its name says so), and nbgrader
    refuses to regenerate an assignment whose cells differ from those of recorded submissions."""
    from sqlalchemy import MetaData, create_engine
    engine = create_engine(url)
    try:
        tables = MetaData()
        tables.reflect(engine)
        tables.drop_all(engine)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def postgres_url():
    """RLHF_TEST_POSTGRES_URL (set by .ci/run, which starts Debian's cluster), or a private
    server started here from Debian's binaries."""
    if os.environ.get("RLHF_TEST_POSTGRES_URL"):
        url = os.environ["RLHF_TEST_POSTGRES_URL"]
        empty_the_database(url)  # a machine reused between runs keeps last run's gradebook (other cells)
        yield url
        return
    if PG_BIN is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed (.ci/run installs Debian's postgresql)")
        pytest.skip("PostgreSQL is not installed")
    data = Path(tempfile.mkdtemp(prefix="rlhf-test-pg-"))  # the postgres user must reach it
    data.chmod(0o755)
    shutil.chown(data, "postgres", "postgres")
    port = free_port()
    as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(as_postgres + [str(PG_BIN / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    subprocess.run(as_postgres + [str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-l", str(data / "log"), "-w",
                                  "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    subprocess.run(as_postgres + [str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "rlhf"],
                   check=True, capture_output=True)
    yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/rlhf"
    subprocess.run(as_postgres + [str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop"],
                   capture_output=True)
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    port = free_port()
    bin_dir = Path(sys.executable).parent
    logs = tmp_path_factory.mktemp("dask")
    scheduler = subprocess.Popen([str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=open(logs / "scheduler.log", "w"), stderr=subprocess.STDOUT)
    address = f"tcp://127.0.0.1:{port}"
    worker = subprocess.Popen([str(bin_dir / "dask"), "worker", address, "--nworkers", "2", "--nthreads", "1",
                               "--no-dashboard", "--host", "127.0.0.1"],
                              stdout=open(logs / "worker.log", "w"), stderr=subprocess.STDOUT)
    from distributed import Client
    deadline = time.time() + 60
    while True:
        try:
            with Client(address, timeout=5) as client:
                if len(client.scheduler_info()["workers"]) >= 2:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError("the Dask cluster did not come up: " + (logs / "worker.log").read_text()[-2000:])
        time.sleep(0.5)
    yield address
    for process in (worker, scheduler):
        process.terminate()
        process.wait(timeout=30)


def test_dask_workers_grade_into_postgresql(tmp_path, postgres_url, dask_cluster, monkeypatch):
    from nbgrader.api import Gradebook

    monkeypatch.setenv("RLHF_GRADEBOOK_URL", postgres_url)
    course = copy_course(tmp_path / "shared" / "course")  # "shared storage": the same path on every worker
    course_handle = Course.at(course)
    release.generate_release(course_handle, ["rlhf", "kl_penalty"])  # records the two graded here in PostgreSQL
    plan = {"pg_correct_1": (), "pg_correct_2": (), "pg_wrong": ("dpo_missing_beta",), "pg_invalid": None}
    for student, wrong in plan.items():
        folder = examples.write_submission(course_handle, student, examples.answers_for(course_handle, wrong or ()))
        if wrong is None:
            rlhf_catalogue.tamper_notebook(folder / NOTEBOOK, "invalid_json")
    # the second assignment too, in the same command and gradebook
    kl_source = notebooks.read(course / "source" / "kl_penalty" / "kl_penalty.ipynb")
    naive = instructor.load_module(Course.at(course), "kl_penalty_catalogue").WRONG_BY_NAME["kl_naive_exp_minus_one"]
    for student, answers in (("pg_correct_1", notebooks.solution_answers(kl_source)),
                             ("pg_wrong", {"kl_answer": naive.source})):
        examples.write_submission(course_handle, student, answers, assignment="kl_penalty", notebook="kl_penalty.ipynb")
    graded = batch.grade_all(course_handle, dask_address=dask_cluster, show_progress=False)
    results = {r.student: r for r in graded if r.assignment == "rlhf"}
    assert {s: r.state for s, r in results.items()} == {
        "pg_correct_1": "graded", "pg_correct_2": "graded", "pg_wrong": "failed tests", "pg_invalid": "malformed notebook"}
    assert not (course / "gradebook.db").exists()  # everything went to PostgreSQL
    with Gradebook(postgres_url) as gb:
        scores = {s.student.id: s.score for s in gb.assignment_submissions("rlhf")}
        kl_scores = {s.student.id: s.score for s in gb.assignment_submissions("kl_penalty")}
    assert scores["pg_correct_1"] == scores["pg_correct_2"] == 44
    assert scores["pg_wrong"] == 44 - 9 and scores["pg_invalid"] == 0
    assert kl_scores == {"pg_correct_1": 8, "pg_wrong": 7}  # the naive k3 loses only the float32 check
    grades = (course / "grades.csv").read_text()
    assert all(student in grades for student in plan)
