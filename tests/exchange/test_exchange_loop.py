"""The whole nbgrader loop with separate Unix users: release -> fetch -> submit (twice, and late)
-> collect -> autograde -> feedback -> fetch_feedback, and what one student cannot do to another."""
import csv
import datetime as dt
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import course as pipeline
from rlhf_course.grading import notebooks

from tests.conftest import copy_course, release_course

from .conftest import INSTRUCTORS

pytestmark = pytest.mark.slow
COURSE_ID = "rlhf-course"

STUDENT_CONFIG = """\
from rlhf_course import exchange
exchange.configure(get_config(), {root!r}, {course!r})
"""


def write_as(user, path: Path, nb) -> None:
    nbformat.write(nb, str(path))
    os.chown(path, user.uid, user.gid)


@pytest.fixture(scope="module")
def loop(people, repo):
    instructor, alice, bob, base = people["instructor"], people["alice"], people["bob"], people["base"]
    exchange = base / "exchange"
    exchange.mkdir()
    os.chown(exchange, instructor.uid, instructor.gid)
    # The course as `make release` leaves it (generated once per test run: tests/test_release.py
    # checks the generation), handed to the instructor, who releases it to the exchange.
    course = release_course(copy_course(instructor.home / "course"))
    shutil.chown(course, instructor.name, INSTRUCTORS)
    for path in course.rglob("*"):
        shutil.chown(path, instructor.name, INSTRUCTORS)
    env = {"RLHF_EXCHANGE_ROOT": str(exchange)}
    instructor.nbgrader("release_assignment", ASSIGNMENT, cwd=course, env=env)

    for student in (alice, bob):  # what a JupyterHub admin puts in /etc/jupyter/nbgrader_config.py
        config_dir = student.home / ".jupyter"
        config_dir.mkdir()
        (config_dir / "nbgrader_config.py").write_text(STUDENT_CONFIG.format(root=str(exchange), course=COURSE_ID))
        for path in (config_dir, config_dir / "nbgrader_config.py"):
            os.chown(path, student.uid, student.gid)
        student.nbgrader("fetch_assignment", ASSIGNMENT)

    reference = pipeline.answers_for(repo, ())
    alice_nb = alice.home / ASSIGNMENT / NOTEBOOK
    alice.nbgrader("submit", ASSIGNMENT)  # first submission: untouched
    time.sleep(1.1)
    write_as(alice, alice_nb, notebooks.fill_answers(notebooks.read(alice_nb), reference))
    alice.nbgrader("submit", ASSIGNMENT)  # second submission: the one that counts
    # The due date falls between Alice's last submission and Bob's.
    time.sleep(1.1)
    due = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    instructor.nbgrader("db", "assignment", "add", ASSIGNMENT, f"--duedate={due}", cwd=course, env=env)
    time.sleep(1.1)
    bob_nb = bob.home / ASSIGNMENT / NOTEBOOK
    write_as(bob, bob_nb, notebooks.fill_answers(notebooks.read(bob_nb), reference))
    bob.nbgrader("submit", ASSIGNMENT)

    inbound = exchange / COURSE_ID / "inbound"
    submissions = {s.name: sorted(inbound.glob(f"{s.name}+{ASSIGNMENT}+*")) for s in (alice, bob)}

    instructor.nbgrader("collect", ASSIGNMENT, cwd=course, env=env)
    # `sudo make grade`: trusted grading as root, outputs handed back to the course's owner.
    grading = subprocess.run([sys.executable, "-m", "rlhf_course.grading.batch", "--course-root", str(course)],
                             cwd=course, env=dict(os.environ, **env), capture_output=True, text=True)
    assert grading.returncode == 0, grading.stdout[-3000:] + grading.stderr[-3000:]
    assert (course / "gradebook.db").stat().st_uid == instructor.uid
    instructor.nbgrader("release_feedback", ASSIGNMENT, cwd=course, env=env)
    instructor.nbgrader("export", cwd=course, env=env)
    for student in (alice, bob):
        student.nbgrader("fetch_feedback", ASSIGNMENT)
    return {"people": people, "exchange": exchange, "course": course, "inbound": inbound,
            "submissions": submissions}


def test_exchange_permissions(loop):
    exchange, inbound = loop["exchange"], loop["inbound"]
    assert stat.S_IMODE(exchange.stat().st_mode) == 0o755  # not stock nbgrader's 0777
    assert stat.S_IMODE(inbound.stat().st_mode) == 0o3733  # create entries; cannot list, rename or delete them
    for folders in loop["submissions"].values():
        for folder in folders:
            assert stat.S_IMODE(folder.stat().st_mode) == 0o770
            assert folder.stat().st_gid == loop["people"]["instructor"].gid
            for path in folder.iterdir():
                assert stat.S_IMODE(path.stat().st_mode) == 0o640, path


def test_a_student_cannot_list_read_or_overwrite_another_submission(loop):
    bob = loop["people"]["bob"]
    target = loop["submissions"][loop["people"]["alice"].name][-1]
    code = f"""
import os
results = []
for attempt, action in [
        ("list inbound", lambda: os.listdir({str(loop['inbound'])!r})),
        ("list submission", lambda: os.listdir({str(target)!r})),
        ("read notebook", lambda: open({str(target / NOTEBOOK)!r}).read()),
        ("overwrite notebook", lambda: open({str(target / NOTEBOOK)!r}, "w").write("x")),
        ("add a file", lambda: open({str(target / 'extra.txt')!r}, "w").write("x")),
        ("move submission away", lambda: os.rename({str(target)!r}, {str(target) + '-moved'!r})),
        ("delete submission", lambda: os.rmdir({str(target)!r}))]:
    try:
        action()
        results.append(attempt + ": ALLOWED")
    except PermissionError:
        results.append(attempt + ": denied")
    except OSError as exc:
        results.append(attempt + ": " + type(exc).__name__)
print("\\n".join(results))
"""
    out = bob.python(code).stdout
    assert "ALLOWED" not in out, out
    assert out.count("denied") == 7, out


def test_latest_submission_counts_and_late_one_is_penalised(loop):
    course, alice, bob = loop["course"], loop["people"]["alice"], loop["people"]["bob"]
    assert len(loop["submissions"][alice.name]) == 2
    latest = loop["submissions"][alice.name][-1]
    collected = course / "submitted" / alice.name / ASSIGNMENT
    assert (collected / "timestamp.txt").read_text() == (latest / "timestamp.txt").read_text()
    with open(course / "grades.csv") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}
    assert float(rows[alice.name]["raw_score"]) == 44 and float(rows[alice.name]["late_submission_penalty"]) == 0
    assert float(rows[bob.name]["raw_score"]) == 44
    assert float(rows[bob.name]["late_submission_penalty"]) == 2.0  # 2 points per started hour
    assert float(rows[bob.name]["score"]) == 42


def test_each_student_fetches_only_their_own_feedback(loop):
    for name in ("alice", "bob"):
        student = loop["people"][name]
        pages = list((student.home / ASSIGNMENT / "feedback").rglob("*.html"))
        assert len(pages) == 1, pages
        stamp = pages[0].parent.name
        own = (loop["course"] / "submitted" / student.name / ASSIGNMENT / "timestamp.txt").read_text().strip()
        assert stamp == own  # the feedback of their own latest submission
        page = pages[0].read_text()  # the trusted grader's page, as the student opens it
        assert f"{ASSIGNMENT}: 44 / 50" in page and "Tests: 44 / 44" in page and "ppo_gradient" in page
        assert "BEGIN HIDDEN TESTS" not in page and "run_check" not in page


BYTE_CODE_CHECK = """\
import importlib, json, os, sys
stale = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    source, cached = module.__spec__.origin, module.__spec__.cached
    if not os.path.exists(cached):
        stale[name] = "no cache"
        continue
    with open(cached, "rb") as f:
        header = f.read(16)
    info = os.stat(source)  # a timestamp cache: the source's mtime and size, as the importer checks
    if (int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")) != \\
            (int(info.st_mtime) & 0xFFFFFFFF, info.st_size & 0xFFFFFFFF):
        stale[name] = "stale cache"
print(json.dumps(stale))
"""


def test_a_students_imports_come_from_byte_code_caches(people):
    """The server's packages carry their byte code: the users cannot write there, and compiling
    torch, Jupyter and nbgrader from source in every kernel and server would double their start."""
    modules = ("torch", "torch.nn.functional", "nbgrader.apps.nbgraderapp", "jupyter_server.serverapp",
               "jupyterlab.labapp", "rlhf_course.grading.course")
    stale = json.loads(people["alice"].run(people["alice"].server.python, "-c", BYTE_CODE_CHECK, *modules).stdout)
    assert stale == {}, stale
