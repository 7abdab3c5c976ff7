"""The collect's copy of one inbound entry, checked again while it copies (no Unix users needed):
what the student changes between the check and the copy is refused there, and an earlier collected
submission is never lost to a refused one.  tests/exchange/test_exchange_loop.py runs the attacks
through the real exchange."""
import csv
import datetime as dt
import os
import pwd
import subprocess

import pytest
from nbgrader.coursedir import CourseDirectory

from rlhf_course.exchange.collect import CollectFailed, Refused, StrictExchangeCollect

ASSIGNMENT = "ps1"
ME = pwd.getpwuid(os.getuid()).pw_name
NAME = f"{ME}+{ASSIGNMENT}+2026-01-01 00:00:00.000000 UTC"


@pytest.fixture
def collect(tmp_path):
    inbound = tmp_path / "inbound"
    (inbound / NAME / "data").mkdir(parents=True)
    (inbound / NAME / "answer.ipynb").write_text("{}")
    (inbound / NAME / "data" / "notes.txt").write_text("x" * 900)
    course = tmp_path / "course"
    course.mkdir()
    coursedir = CourseDirectory(root=str(course), assignment_id=ASSIGNMENT)
    exchange = StrictExchangeCollect(coursedir=coursedir, max_entry_bytes=1000)
    exchange.inbound_fd = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY)
    entry = exchange._parse_name(NAME)
    assert (entry.student, entry.uid, entry.reason) == (ME, os.getuid(), "")
    yield exchange, entry, inbound / NAME, course / "submitted" / ME / ASSIGNMENT
    os.close(exchange.inbound_fd)


def checked(exchange, entry):
    exchange._check_entry(entry)
    assert entry.kernel is not None and not entry.reason
    return entry


def test_an_entry_within_the_limits_is_copied_with_the_kernel_time(collect):
    exchange, entry, source, dest = collect
    exchange._collect(checked(exchange, entry))
    assert entry.status == "collected"
    assert (dest / "data" / "notes.txt").read_text() == "x" * 900 and (dest / "answer.ipynb").read_text() == "{}"
    latest = max(os.lstat(path).st_ctime_ns for path in [source, *source.rglob("*")])
    expected = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=latest // 1000)
    assert (dest / "timestamp.txt").read_text() == expected.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    assert "claims" in entry.flag  # the name says 2026-01-01


def test_bytes_are_counted_as_read_and_a_refused_update_loses_nothing(collect):
    exchange, entry, source, dest = collect
    exchange._collect(checked(exchange, entry))
    before = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    exchange.update = True
    second = checked(exchange, exchange._parse_name(NAME))
    second.kernel = entry.kernel + dt.timedelta(seconds=1)  # newer, so the collect replaces the first
    with open(source / "data" / "notes.txt", "a") as grown:  # grows after it was checked
        grown.write("y" * 500)
    with pytest.raises(Refused, match="more than 1000 bytes"):
        exchange._collect(second)
    assert {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert [p.name for p in dest.parent.iterdir()] == [ASSIGNMENT]  # no staging folder left behind


@pytest.mark.parametrize("swap, reason", [
    (lambda path: (path.unlink(), path.symlink_to("/dev/zero")), "notes.txt is a symbolic link"),
    (lambda path: (path.unlink(), os.mkfifo(path)), "notes.txt is a FIFO"),
])
def test_a_file_swapped_after_the_check_is_refused_at_the_copy(collect, swap, reason):
    exchange, entry, source, dest = collect
    checked(exchange, entry)
    swap(source / "data" / "notes.txt")
    with pytest.raises(Refused, match=f"data/{reason}"):
        exchange._collect(entry)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_too_many_files_or_folders_too_deep_are_refused(collect):
    exchange, entry, source, _ = collect
    exchange.max_entry_items = 2
    with pytest.raises(Refused, match="more than 2 files and folders"):
        exchange._check_entry(entry)
    exchange.max_entry_items, exchange.max_entry_depth = 1000, 3
    (source / "a" / "b" / "c").mkdir(parents=True)
    with pytest.raises(Refused, match="a/b/c: folders nested deeper than 3 levels"):
        exchange._check_entry(entry)


def test_an_entry_or_a_file_owned_by_someone_else_is_refused(collect):
    exchange, entry, source, _ = collect
    entry.uid = os.getuid() + 1
    with pytest.raises(Refused, match=rf"made by .*, not by {ME} whom it names"):
        exchange._check_entry(entry)
    if os.geteuid() == 0:  # a file the student did not make (a hard link to someone else's, say)
        entry.uid = os.getuid()
        os.chown(source / "answer.ipynb", os.getuid() + 1, -1)
        with pytest.raises(Refused, match="answer.ipynb is owned by .*, not by the student"):
            exchange._check_entry(entry)


def test_the_default_size_limit_is_nbgraders_submit_limit(tmp_path):
    coursedir = CourseDirectory(root=str(tmp_path), max_dir_size=123)
    assert StrictExchangeCollect(coursedir=coursedir)._entry_byte_limit() == 123_000


def test_a_copy_that_cannot_be_written_stops_the_collect_and_blames_no_entry(collect):
    exchange, entry, _, dest = collect
    dest.parent.parent.write_text("not a folder")  # submitted/ cannot hold anything
    with pytest.raises(CollectFailed, match="cannot write the collected copy of .*submitted"):
        exchange._collect(checked(exchange, entry))


def test_a_folder_on_another_file_system_is_refused(collect):
    """A student with fusermount could mount a file system that never answers a read on their entry."""
    exchange, entry, source, _ = collect
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "none", str(source / "data")],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting needs root")
    try:
        with pytest.raises(Refused, match="data is on another file system than the exchange"):
            exchange._check_entry(entry)
    finally:
        subprocess.run(["umount", str(source / "data")], check=True)


def test_ignored_names_count_toward_the_limit_and_the_listing_stops_there(collect, monkeypatch):
    """300,000 empty `.*` files were collected (ignored, so never counted): now each name listed counts."""
    exchange, entry, source, _ = collect
    for i in range(50):
        (source / f".hidden-{i}").touch()
    listed = []
    scandir = os.scandir

    class Counted:
        def __init__(self, fd):
            self.listing = scandir(fd)

        def __enter__(self):
            return (listed.append(item.name) or item for item in self.listing)

        def __exit__(self, *exc):
            self.listing.close()

    monkeypatch.setattr(os, "scandir", Counted)
    exchange.max_entry_items = 10
    with pytest.raises(Refused, match=r"more than 10 files and folders \(ignored names such as \.\* included\)"):
        exchange._check_entry(entry)
    assert len(listed) == 11  # the listing stopped: the top folder holds 52 names
    monkeypatch.setattr(os, "scandir", scandir)
    exchange.max_entry_items = 53 + 1  # answer.ipynb, data/, data/notes.txt and the 50 hidden files
    checked(exchange, entry)


def test_the_collect_report_is_inert_in_a_spreadsheet(tmp_path):
    """An entry name and a file name in an entry are the student's: a formula in either is written as text."""
    inbound = tmp_path / "exchange" / "course" / "inbound"
    formula = '=HYPERLINK("evil.example";"open me")'  # a file name holds no '/'
    (inbound / f"{formula}+{ASSIGNMENT}+x").mkdir(parents=True)
    (inbound / NAME).mkdir()
    os.mkfifo(inbound / NAME / "+1+cmd")
    root = tmp_path / "course"
    root.mkdir()
    coursedir = CourseDirectory(root=str(root), assignment_id=ASSIGNMENT, course_id="course")
    exchange = StrictExchangeCollect(coursedir=coursedir, root=str(tmp_path / "exchange"))
    exchange.init_src()
    exchange.copy_files()
    with open(root / "collect_report.csv", newline="") as handle:
        rows = {row["entry"]: row for row in csv.DictReader(handle)}
    assert rows[f"'{formula}+{ASSIGNMENT}+x"]["reason"].startswith("malformed entry name"), rows
    assert rows[NAME]["reason"] == "'+1+cmd is a FIFO", rows
    exchange.coursedir.student_id = ME  # a later collect for one student keeps the other rows, still inert
    exchange.init_src()
    exchange.copy_files()
    with open(root / "collect_report.csv", newline="") as handle:
        assert sorted(row["entry"] for row in csv.DictReader(handle)) == sorted(rows)


def collected(tmp_path, update: bool = False, caplog=None) -> dict[str, dict]:
    """nbgrader collect of ASSIGNMENT from the exchange under tmp_path into its course (init_src, then copy_files,
    as nbgrader runs them): the collect report's rows by entry."""
    root = tmp_path / "course"
    root.mkdir(exist_ok=True)
    coursedir = CourseDirectory(root=str(root), assignment_id=ASSIGNMENT, course_id="course")
    exchange = StrictExchangeCollect(coursedir=coursedir, root=str(tmp_path / "exchange"), update=update)
    exchange.init_src()
    exchange.copy_files()
    with open(root / "collect_report.csv", newline="") as handle:
        return {row["entry"]: row for row in csv.DictReader(handle)}


def test_a_submission_made_after_the_collect_is_said_with_update_and_never_taken_silently(tmp_path, caplog):
    """The student submits again after the instructor collected: the next collect keeps the older copy (nbgrader's
    rule: only --update replaces one), and says so: a warning naming the student and `--update`, the newer entry's
    row in the collect report flagged (the class report shows flagged rows), not "kept"."""
    def named_now():  # as nbgrader submit names an entry: the time is now, so no clock is flagged
        return f"{ME}+{ASSIGNMENT}+{dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S.%f UTC')}"
    inbound = tmp_path / "exchange" / "course" / "inbound"
    first = named_now()
    (inbound / first).mkdir(parents=True)
    (inbound / first / "answer.ipynb").write_text("first")
    dest = tmp_path / "course" / "submitted" / ME / ASSIGNMENT
    assert collected(tmp_path)[first]["status"] == "collected"
    again = collected(tmp_path)  # nothing new: the same entry, already collected
    assert (again[first]["status"], again[first]["reason"], again[first]["flag"]) == ("kept", "already collected", "")

    second = named_now()
    (inbound / second).mkdir()
    (inbound / second / "answer.ipynb").write_text("second")
    caplog.clear()
    with caplog.at_level("WARNING"):
        rows = collected(tmp_path)
    assert (dest / "answer.ipynb").read_text() == "first"  # nbgrader's rule: the collected copy stays
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"{ME} submitted {ASSIGNMENT} again" in line and f"nbgrader collect --update {ASSIGNMENT}" in line
               and "`make grade` grades the older" in line for line in said), said
    newer = rows[second]
    assert newer["status"] == "not collected" and f"nbgrader collect --update {ASSIGNMENT}" in newer["reason"]
    assert "submitted again after the collect" in newer["flag"]
    assert rows[first]["status"] == "not latest"

    rows = collected(tmp_path, update=True)
    assert (dest / "answer.ipynb").read_text() == "second" and rows[second]["status"] == "collected"
    assert not rows[second]["flag"].startswith("submitted again")
