"""A student who makes inbound entries by the thousand costs collect only their newest few: the rest are
counted and reported once, never opened, and the latest honest submission is still the one collected (no Unix
users needed: the test's own user is the student; another owner needs root)."""
import csv
import datetime as dt
import os
import pwd
import time

import pytest
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory

from rlhf_course.exchange.collect import StrictExchangeCollect

ASSIGNMENT = "ps1"
ME = pwd.getpwuid(os.getuid()).pw_name
EXAMINED = 5


@pytest.fixture
def course(tmp_path):
    inbound = tmp_path / "exchange" / "course" / "inbound"
    inbound.mkdir(parents=True)
    root = tmp_path / "course"
    root.mkdir()
    return inbound, root


def entry(inbound, claimed: str, answer: str, *, owner: int | None = None, fifo: bool = False, student=ME):
    """An entry as submit makes one (a notebook and timestamp.txt), its name claiming any time at all."""
    path = inbound / f"{student}+{ASSIGNMENT}+{claimed}"
    path.mkdir()
    (path / "answer.ipynb").write_text(answer)
    (path / "timestamp.txt").write_text(claimed)
    if fifo:
        os.mkfifo(path / "pipe")
    if owner is not None:
        for item in [path, *path.iterdir()]:
            os.chown(item, owner, -1, follow_symlinks=False)
    time.sleep(0.005)  # a change time is a clock tick's (some milliseconds): each entry in its own tick
    return path


def collect(root, *, before_duedate=False, watch=None):
    coursedir = CourseDirectory(root=str(root), assignment_id=ASSIGNMENT, course_id="course")
    exchange = StrictExchangeCollect(coursedir=coursedir, root=str(root.parent / "exchange"),
                                     max_entries_examined=EXAMINED, before_duedate=before_duedate)
    if watch is not None:
        check = exchange._check_entry
        exchange._check_entry = lambda e: (watch.append(e.name), check(e))[1]
    exchange.init_src()
    exchange.copy_files()
    with open(root / "collect_report.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return exchange, rows


def collected(root) -> str:
    return (root / "submitted" / ME / ASSIGNMENT / "answer.ipynb").read_text()


def test_only_the_newest_entries_are_examined_and_the_latest_honest_one_wins(course, caplog):
    """Older entries named for the future, the past and nonsense times: never opened, counted once."""
    inbound, root = course
    for i in range(20):
        entry(inbound, f"2099-01-{i + 1:02d} 00:00:00.000000 UTC" if i % 2 else f"1970-01-{i + 1:02d} 00:00:00 UTC",
              f"junk {i}")
    for i in range(3):  # newer than the flood, and refused
        entry(inbound, f"2098-01-0{i + 1} 00:00:00 UTC", f"fifo {i}", fifo=True)
    entry(inbound, "2026-01-01 00:00:00.000000 UTC", "honest")
    watched = []
    with caplog.at_level("WARNING"):
        _, rows = collect(root, watch=watched)
    assert collected(root) == "honest"
    assert len(watched) == EXAMINED  # the honest entry, the 3 refused, the newest of the flood
    assert not any(name.endswith(f"+2099-01-{n:02d} 00:00:00.000000 UTC") for name in watched for n in range(1, 19))
    summary = [row for row in rows if row["status"] == "not examined"]
    assert [(r["student"], r["entry"]) for r in summary] == [(ME, "19 older entries")], rows
    assert summary[0]["reason"].startswith(f"{ME}: 19 older entries not examined (collect examines each student's "
                                           f"newest {EXAMINED}")
    assert len(rows) == EXAMINED + 1 and rows[0] == summary[0]  # first: the class report shows the first flagged
    assert summary[0]["flag"] == "19 older entries not examined"
    assert [r.getMessage() for r in caplog.records].count(summary[0]["reason"]) == 1


def test_entries_made_in_a_classmates_name_cost_their_maker_not_the_classmate(course):
    """Another user's flood of entries named for this student, all newer than the student's own."""
    if os.geteuid() != 0:
        pytest.skip("making entries owned by another user needs root")
    inbound, root = course
    entry(inbound, "2026-01-01 00:00:00 UTC", "older honest")
    entry(inbound, "2026-01-02 00:00:00 UTC", "honest")
    other = os.getuid() + 4242
    for i in range(30):
        entry(inbound, f"2099-02-{i % 28 + 1:02d} {i // 28:02d}:00:00 UTC", f"forged {i}", owner=other)
    watched = []
    _, rows = collect(root, watch=watched)
    assert collected(root) == "honest"
    assert len(watched) == EXAMINED + 2  # the maker's newest 5 (refused) and the student's own two
    (summary,) = [row for row in rows if row["status"] == "not examined"]
    assert (summary["student"], summary["entry"]) == (f"uid {other}", "25 older entries")
    forged = [row for row in rows if row["status"] == "refused"]
    assert len(forged) == EXAMINED and all(f"made by uid {other}, not by {ME}" in r["reason"] for r in forged)


def test_with_before_duedate_the_latest_on_time_entry_wins_over_a_late_flood(course):
    inbound, root = course
    entry(inbound, "2026-01-01 00:00:00 UTC", "early")
    entry(inbound, "2026-01-02 00:00:00 UTC", "on time")
    time.sleep(0.02)
    due = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    time.sleep(0.02)
    for i in range(12):
        entry(inbound, f"2025-12-31 00:00:{i:02d} UTC", f"late {i}")  # claims to be early: the name is not believed
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "course") as gradebook:
        gradebook.update_or_create_assignment(ASSIGNMENT, duedate=due)
    watched = []
    _, rows = collect(root, before_duedate=True, watch=watched)
    assert collected(root) == "on time"
    assert len(watched) == EXAMINED + 2  # the newest 5 (late) and the newest on time (both)
    (summary,) = [row for row in rows if row["status"] == "not examined"]
    assert summary["entry"] == "7 older entries"


def test_a_later_collect_for_one_student_replaces_their_summary_and_keeps_the_others(course):
    inbound, root = course
    for i in range(EXAMINED + 3):
        entry(inbound, f"2026-01-01 00:00:0{i} UTC", f"answer {i}")
    _, rows = collect(root)
    assert collected(root) == f"answer {EXAMINED + 2}"
    coursedir = CourseDirectory(root=str(root), assignment_id=ASSIGNMENT, course_id="course", student_id=ME)
    again = StrictExchangeCollect(coursedir=coursedir, root=str(root.parent / "exchange"),
                                  max_entries_examined=EXAMINED)
    again.init_src()
    again.copy_files()
    with open(root / "collect_report.csv", newline="") as handle:
        again_rows = list(csv.DictReader(handle))
    assert [row["entry"] for row in again_rows] == [row["entry"] for row in rows]  # the summary once
    assert [row["status"] for row in again_rows].count("not examined") == 1
