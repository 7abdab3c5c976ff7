"""The whole nbgrader loop with separate Unix users: release -> fetch -> submit (twice, and late)
-> collect -> autograde -> feedback -> fetch_feedback, and what one student cannot do to another."""
import contextlib
import csv
import datetime as dt
import json
import os
import shutil
import stat
import time
from pathlib import Path

import nbformat
import pytest

from rlhf_course import ASSIGNMENT, NOTEBOOK
from rlhf_course.grading import examples
from rlhf_course.course import notebooks
from rlhf_course.grading.app import main as course_command

from tests.support.course import copy_course, release_course, repo_course

from tests.support.accounts import INSTRUCTORS
from tests.support.command_session import CommandSession

pytestmark = pytest.mark.slow
COURSE_ID = "rlhf-course"
GRPO, GRPO_NOTEBOOK = "grpo", "grpo.ipynb"

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
    for student in (alice, bob):  # what a JupyterHub admin puts in /etc/jupyter/nbgrader_config.py
        config_dir = student.home / ".jupyter"
        config_dir.mkdir()
        (config_dir / "nbgrader_config.py").write_text(STUDENT_CONFIG.format(root=str(exchange), course=COURSE_ID))
        for path in (config_dir, config_dir / "nbgrader_config.py"):
            os.chown(path, student.uid, student.gid)
    # Each person's commands in one process of theirs (tests/support/command_session.py): as that user, each
    # command configured anew; nbgrader's start-up once per person, not once per command.
    with CommandSession(instructor) as as_instructor, CommandSession(alice) as as_alice, \
            CommandSession(bob) as as_bob:
        as_instructor.nbgrader("release_assignment", ASSIGNMENT, cwd=course, env=env)
        as_instructor.nbgrader("release_assignment", GRPO, cwd=course, env=env)
        # Alice fetches both assignments in one command (nbgrader's fetch_assignment takes several), Bob the first
        as_alice.nbgrader("fetch_assignment", ASSIGNMENT, GRPO)
        as_bob.nbgrader("fetch_assignment", ASSIGNMENT)

        reference = examples.answers_for(repo_course(), ())
        alice_nb = alice.home / ASSIGNMENT / NOTEBOOK
        as_alice.nbgrader("submit", ASSIGNMENT)  # first submission: untouched
        # no pause: entries' times (their names' and the kernel's change times) are kept to the microsecond
        write_as(alice, alice_nb, notebooks.fill_answers(notebooks.read(alice_nb), reference))
        as_alice.nbgrader("submit", ASSIGNMENT)  # second submission: the one that counts
        # The due date falls between Alice's last submission and Bob's: now, to the microsecond, after her submit.
        due = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        as_instructor.nbgrader("db", "assignment", "add", ASSIGNMENT, f"--duedate={due}", cwd=course, env=env)
        # the changed due date into the exchange, where Bob's submit reads it (as after a change in the Formgrader)
        as_instructor.course_command("publish-deadlines", cwd=course, env=env)
        # Bob is late without a pause: his entry comes after the commands above
        bob_nb = bob.home / ASSIGNMENT / NOTEBOOK
        write_as(bob, bob_nb, notebooks.fill_answers(notebooks.read(bob_nb), reference))
        bob_submit = as_bob.nbgrader("submit", ASSIGNMENT)

        # The third assignment, the same way: Alice (who fetched it) answers GRPO and submits it.
        grpo_nb = alice.home / GRPO / GRPO_NOTEBOOK
        grpo_answers = notebooks.solution_answers(notebooks.read(repo / "source" / GRPO / GRPO_NOTEBOOK))
        write_as(alice, grpo_nb, notebooks.fill_answers(notebooks.read(grpo_nb), grpo_answers))
        as_alice.nbgrader("submit", GRPO)

        inbound = exchange / COURSE_ID / "inbound"
        submissions = {s.name: sorted(inbound.glob(f"{s.name}+{ASSIGNMENT}+*")) for s in (alice, bob)}

        # Attacks on the collect, from the students' own accounts, all in the same collect as the honest entries.
        grace_nb = grace_notebook(people["grace"], bob_nb)
        for student, script in ((bob, BOB_ATTACKS), (people["mallory"], MALLORY_ATTACKS),
                                (people["grace"], GRACE_ATTACKS)):
            student.python(script.format(inbound=str(inbound), assignment=ASSIGNMENT, notebook=NOTEBOOK,
                                         alice=alice.name, own=student.name, own_notebook=str(
                                             grace_nb if student is people["grace"] else bob_nb), course=str(course)))
        started = time.monotonic()
        collect = as_instructor.nbgrader("collect", ASSIGNMENT, cwd=course, env=env)
        collect_seconds = time.monotonic() - started
        as_instructor.nbgrader("collect", GRPO, cwd=course, env=env)
        # `sudo make grade`: trusted grading as root (the command's own main, in this root process; the command
        # line's process is tests/grading/test_grader_attacks.py's), outputs handed back to the course's owner.
        with environment(env):
            assert course_command(["grade", "--course-root", str(course)]) == 0
        assert (course / "gradebook.db").stat().st_uid == instructor.uid
        as_instructor.nbgrader("release_feedback", ASSIGNMENT, cwd=course, env=env)
        as_instructor.nbgrader("release_feedback", GRPO, cwd=course, env=env)
        # grades.csv is the trusted grader's, written by the course's export plugin as `nbgrader export` runs it
        # (tests/grading/test_editions.py: the configuration names the plugin; its rows): no instructor's export
        assert (course / "grades.csv").stat().st_uid == instructor.uid  # handed back: the instructor can export
        as_alice.nbgrader("fetch_feedback", ASSIGNMENT, GRPO)
        as_bob.nbgrader("fetch_feedback", ASSIGNMENT)
    return {"people": people, "exchange": exchange, "course": course, "inbound": inbound,
            "submissions": submissions, "collect_log": collect.stdout + collect.stderr,
            "collect_seconds": collect_seconds, "bob_submit": bob_submit.stdout + bob_submit.stderr}


@contextlib.contextmanager
def environment(variables: dict[str, str]):
    """This process's environment with ``variables`` set, as it was afterwards; and its torch thread count."""
    import torch
    saved, threads = dict(os.environ), torch.get_num_threads()
    os.environ.update(variables)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        torch.set_num_threads(threads)  # the grader judges on one thread


ATTACK_PRELUDE = """\
import datetime as dt, os, shutil
inbound, assignment, notebook = {inbound!r}, {assignment!r}, {notebook!r}
def claim(minutes):
    return (dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
def entry(student, stamp):
    path = os.path.join(inbound, "+".join((student, assignment, stamp)))
    os.mkdir(path)
    with open(os.path.join(path, "timestamp.txt"), "w") as f:
        f.write(stamp)
    return path
"""
# Bob: an entry named for Alice, newer than hers; his own newest entry's notebook a link to the
# instructor's source notebook; an entry name with a terminal escape in it.
BOB_ATTACKS = ATTACK_PRELUDE + """
forged = entry({alice!r}, claim(30))
text = open({own_notebook!r}).read()
open(os.path.join(forged, notebook), "w").write(text.replace('"cells": [', '"cells": [{{"cell_type": "markdown", "id": "forged", "metadata": {{}}, "source": "FORGED BY BOB"}},', 1))
linked = entry({own!r}, claim(40))
os.symlink(os.path.join({course!r}, "source", assignment, notebook), os.path.join(linked, notebook))
entry({own!r} + "\\x1b[2J", claim(50))
"""
# Mallory: a linked folder (the instructor's hidden checks), a link to /dev/zero, a FIFO; nothing honest.
# The FIFO's entry claims to be the newest (stock collect would take it and stop with a traceback).
MALLORY_ATTACKS = ATTACK_PRELUDE + """
os.symlink(os.path.join({course!r}, "instructor"), os.path.join(entry({own!r}, claim(1)), "instructor"))
os.symlink("/dev/zero", os.path.join(entry({own!r}, claim(2)), notebook))
os.mkfifo(os.path.join(entry({own!r}, claim(3)), notebook))
"""
# Grace: a correct notebook submitted late by hand, under an old date (in the name and in timestamp.txt).
GRACE_ATTACKS = ATTACK_PRELUDE + """
shutil.copyfile({own_notebook!r}, os.path.join(entry({own!r}, "2020-01-01 09:00:00.000000 UTC"), notebook))
"""


def grace_notebook(grace, correct: Path) -> Path:
    path = grace.home / NOTEBOOK
    shutil.copyfile(correct, path)
    os.chown(path, grace.uid, grace.gid)
    return path


def collect_report(loop) -> dict[str, dict]:
    with open(loop["course"] / "collect_report.csv", newline="") as handle:
        return {row["entry"]: row for row in csv.DictReader(handle)}


def grades(loop) -> dict[str, dict]:
    with open(loop["course"] / "grades.csv") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}


def entries_of(loop, student: str, assignment: str = ASSIGNMENT) -> dict[str, dict]:
    return {name: row for name, row in collect_report(loop).items()
            if name.startswith(student) and row["assignment"] == assignment}


def test_an_entry_named_for_a_classmate_is_refused_and_theirs_collected(loop):
    alice, bob = loop["people"]["alice"], loop["people"]["bob"]
    notebook = (loop["course"] / "submitted" / alice.name / ASSIGNMENT / NOTEBOOK).read_text()
    assert "FORGED BY BOB" not in notebook
    assert float(grades(loop)[alice.name]["raw_score"]) == 44
    rows = entries_of(loop, alice.name)
    forged = [row for row in rows.values() if row["status"] == "refused"]
    assert len(forged) == 1 and forged[0]["reason"] == f"made by {bob.name}, not by {alice.name} whom it names", rows
    assert forged[0]["entry"] in loop["collect_log"]
    collected = [row for row in rows.values() if row["status"] == "collected"]
    assert [row["entry"] for row in collected] == [loop["submissions"][alice.name][-1].name]


def test_links_are_never_followed(loop):
    course, bob, mallory = loop["course"], loop["people"]["bob"], loop["people"]["mallory"]
    # Bob's real (late) submission is collected instead of his linked one, as a plain file with his own work.
    collected = course / "submitted" / bob.name / ASSIGNMENT / NOTEBOOK
    assert not collected.is_symlink() and "BEGIN SOLUTION" not in collected.read_text()
    assert not (course / "submitted" / mallory.name).exists()
    assert not list((course / "submitted").rglob("*hidden_checks*"))
    rows = entries_of(loop, bob.name)
    linked = [row for row in rows.values() if row["status"] == "refused" and row["entry"].startswith(bob.name + "+")]
    assert [row["reason"] for row in linked] == [f"{NOTEBOOK} is a symbolic link"], rows
    assert [row["entry"] for row in rows.values() if row["status"] == "collected"] == \
        [loop["submissions"][bob.name][-1].name]
    assert "instructor is a symbolic link" in {row["reason"] for row in entries_of(loop, mallory.name).values()}


def test_special_files_are_refused_and_the_collect_goes_on(loop):
    course, mallory = loop["course"], loop["people"]["mallory"]
    rows = entries_of(loop, mallory.name)
    assert sorted(row["reason"] for row in rows.values()) == sorted([
        "instructor is a symbolic link", f"{NOTEBOOK} is a symbolic link", f"{NOTEBOOK} is a FIFO"]), rows
    assert {row["status"] for row in rows.values()} == {"refused"}
    assert f"Nothing collected for {mallory.name}: every entry of theirs was refused" in loop["collect_log"]
    assert loop["collect_seconds"] < 30  # a blocked FIFO or /dev/zero would never end
    size = sum(path.stat().st_size for path in (course / "submitted").rglob("*") if path.is_file())
    assert size < 2_000_000, size
    # Students after Mallory (alphabetically and in the log) are collected.
    assert (course / "submitted" / loop["people"]["grace"].name / ASSIGNMENT / NOTEBOOK).is_file()


def test_a_malformed_entry_name_is_refused_and_shown_escaped(loop):
    bob = loop["people"]["bob"]
    (row,) = [row for name, row in collect_report(loop).items() if name.startswith(bob.name + "\\x1b[2J+")]
    assert row["status"] == "refused" and row["reason"].startswith("malformed entry name"), row
    assert "\x1b" not in loop["collect_log"] and "\x1b" not in (loop["course"] / "collect_report.csv").read_text()


def test_the_submission_time_is_the_kernels(loop):
    course, grace = loop["course"], loop["people"]["grace"]
    graded = grades(loop)[grace.name]
    assert float(graded["raw_score"]) == 44 and float(graded["late_submission_penalty"]) == 2.0, graded
    (row,) = entries_of(loop, grace.name).values()
    assert row["status"] == "collected" and row["claimed_time"].startswith("2020-01-01 09:00:00"), row
    assert "the entry name claims" in row["flag"] and "timestamp.txt claims" in row["flag"], row
    stamp = (course / "submitted" / grace.name / ASSIGNMENT / "timestamp.txt").read_text()
    assert stamp == row["kernel_time"] and not stamp.startswith("2020"), stamp
    # Honest entries: the kernel agrees with the student's clock, nothing is flagged.
    for student in ("alice", "bob"):
        name = loop["people"][student].name
        honest = [r for r in entries_of(loop, name).values() if r["entry"] in
                  {p.name for p in loop["submissions"][name]}]
        assert len(honest) == len(loop["submissions"][name]) and not any(r["flag"] for r in honest), honest


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
    kernel_time = dt.datetime.fromisoformat((collected / "timestamp.txt").read_text().removesuffix(" UTC"))
    claimed = dt.datetime.fromisoformat((latest / "timestamp.txt").read_text().removesuffix(" UTC"))
    assert abs((kernel_time - claimed).total_seconds()) < 5
    with open(course / "grades.csv") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}
    assert float(rows[alice.name]["raw_score"]) == 44 and float(rows[alice.name]["late_submission_penalty"]) == 0
    assert float(rows[bob.name]["raw_score"]) == 44
    assert float(rows[bob.name]["late_submission_penalty"]) == 2.0  # 2 points per started hour
    assert float(rows[bob.name]["score"]) == 42
    # Bob was told on submitting, from the deadline in the exchange (accepted all the same)
    told = [line for line in loop["bob_submit"].splitlines() if "late by" in line]
    assert len(told) == 1 and "late by 1 min: the late penalty applies (due " in told[0], loop["bob_submit"]


def test_each_student_fetches_only_their_own_feedback(loop):
    for name in ("alice", "bob"):
        student = loop["people"][name]
        pages = list((student.home / ASSIGNMENT / "feedback").rglob("*.html"))
        assert len(pages) == 1, pages
        stamp = pages[0].parent.name
        own = (loop["submissions"][student.name][-1] / "timestamp.txt").read_text().strip()
        assert stamp == own  # the feedback of their own latest submission, under the time their clock gave it
        page = pages[0].read_text()  # the trusted grader's page, as the student opens it
        assert f"{ASSIGNMENT}: 44 / 50" in page and "Tests: 44 / 44" in page and "ppo_gradient" in page
        assert "BEGIN HIDDEN TESTS" not in page and "run_check" not in page


def test_the_third_assignment_goes_round_the_same_loop(loop):
    """GRPO released, fetched, answered and submitted by Alice, collected, graded by the trusted grader in the
    same batch as the first assignment, its feedback released and fetched by her: 11 of 11 tests, the written
    answers awaiting a person."""
    alice = loop["people"]["alice"]
    assert (loop["course"] / "submitted" / alice.name / GRPO / GRPO_NOTEBOOK).is_file()
    pages = list((alice.home / GRPO / "feedback").rglob("*.html"))
    assert len(pages) == 1, pages
    page = pages[0].read_text()
    assert f"{GRPO}: 11 / 15" in page and "Tests: 11 / 11" in page and "grpo_bessel_std" in page
    assert "BEGIN HIDDEN TESTS" not in page and "run_check" not in page
    assert not (loop["people"]["bob"].home / GRPO).exists()  # Bob never fetched it
    with open(loop["course"] / "grades.csv") as handle:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(handle)}
    assert float(rows[(GRPO, alice.name)]["raw_score"]) == 11


BYTE_CODE_CHECK = """\
import importlib.machinery, importlib.util, json, os, sys
def spec_of(name):  # found as the import system finds it, without running the packages (torch's import: ~2 s)
    spec = importlib.util.find_spec(name.split(".")[0])
    for part in name.split(".")[1:]:
        spec = importlib.machinery.PathFinder.find_spec(part, spec.submodule_search_locations)
    return spec
stale = {}
for name in sys.argv[1:]:
    spec = spec_of(name)
    source, cached = spec.origin, spec.cached
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
               "jupyterlab.labapp", "rlhf_course.grading.app")
    stale = json.loads(people["alice"].run(people["alice"].server.python, "-c", BYTE_CODE_CHECK, *modules).stdout)
    assert stale == {}, stale
