"""The deadline the exchange holds (rlhf_course/exchange/deadlines.py): what a student is told in `nbgrader list`
and on submit, in the edition's language; each student's extension readable by that student alone (real Unix
users); the feedback page's deadline line; the committed build of the lab extension kept in step with its source."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from rlhf_course.exchange import deadlines
from rlhf_course.exchange.fetch import StrictExchangeList
from rlhf_course.exchange.submit import StrictExchangeSubmit
from rlhf_course.grading.pages.feedback import deadline_line

REPO = Path(__file__).resolve().parents[2]
COURSE = "rlhf-course"
EMPTY_NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'  # submit reads it
DUE = dt.datetime(2026, 12, 18, 23, 59)
ME = os.environ.get("USER") or __import__("getpass").getuser()


def test_how_late_in_whole_minutes_never_zero_in_both_languages():
    due = deadlines.Deadline("rlhf", DUE)
    assert due.verdict(DUE + dt.timedelta(hours=2, minutes=10, seconds=59)) == \
        "late by 2 h 10 min: the late penalty applies"
    assert due.verdict(DUE + dt.timedelta(seconds=1)) == "late by 1 min: the late penalty applies"
    assert due.verdict(DUE) == "on time"
    zh = deadlines.Deadline("rlhf_zh", DUE, "zh-CN", dt.timedelta(hours=48))
    assert zh.verdict(DUE + dt.timedelta(hours=50, minutes=10)) == "迟交 2 小时 10 分钟，将扣除迟交罚分"
    assert zh.verdict(DUE + dt.timedelta(hours=47)) == "按时提交"  # within the extension
    assert zh.sentence() == "截止时间 2026-12-18 23:59 UTC，你的延期 +48 小时（至 2026-12-20 23:59 UTC）"
    assert zh.sentence("en") == "due 2026-12-18 23:59 UTC, your extension +48 h (until 2026-12-20 23:59 UTC)"


@pytest.fixture
def exchange(tmp_path, monkeypatch):
    """A course-local exchange with `rlhf` and `rlhf_zh` released (as the current user: student and instructor)."""
    root = tmp_path / "exchange"
    for assignment in ("rlhf", "rlhf_zh"):
        (root / COURSE / "outbound" / assignment).mkdir(parents=True)
        (root / COURSE / "outbound" / assignment / "a.ipynb").write_text(EMPTY_NOTEBOOK)
    (root / COURSE / "inbound").mkdir()
    monkeypatch.chdir(tmp_path)
    return root


def _run(cls, root, assignment="", **traits):
    config = Config()
    config.Exchange.root = str(root)
    config.Exchange.cache = str(root.parent / "submit-cache")  # never the user's own nbgrader_cache
    config.CourseDirectory.course_id = COURSE
    config.CourseDirectory.assignment_id = assignment
    coursedir = CourseDirectory(config=config)
    app = cls(coursedir=coursedir, authenticator=Authenticator(config=config), config=config, **traits)
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    app.log = logging.getLogger(f"test-deadlines-{id(app)}")
    app.log.addHandler(handler)
    app.log.setLevel(logging.INFO)
    result = app.start()
    return result, lines


def test_list_and_submit_tell_the_student_the_deadline_and_how_late(exchange):
    deadlines.publish_due_date(str(exchange), COURSE, "rlhf", DUE, "en")
    due_zh = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(hours=50, minutes=10)
    deadlines.publish_due_date(str(exchange), COURSE, "rlhf_zh", due_zh, "zh-CN")
    deadlines.publish_extensions(str(exchange), COURSE, {ME: {"rlhf_zh": dt.timedelta(hours=48)}})
    released, lines = _run(StrictExchangeList, exchange)
    assert f"{COURSE} rlhf [due 2026-12-18 23:59 UTC]" in lines, lines
    assert any(line.startswith(f"{COURSE} rlhf_zh [截止时间 ") and "你的延期 +48 小时" in line for line in lines), lines
    assert {a["assignment_id"]: a["deadline"]["extension_hours"] for a in released} == {"rlhf": 0, "rlhf_zh": 48}

    for assignment in ("rlhf", "rlhf_zh"):  # the student's copies, fetched
        shutil.copytree(exchange / COURSE / "outbound" / assignment, Path(assignment))
    _, on_time = _run(StrictExchangeSubmit, exchange, "rlhf")
    _, late = _run(StrictExchangeSubmit, exchange, "rlhf_zh")
    assert any(": on time (due 2026-12-18 23:59 UTC)." in line for line in on_time), on_time
    told = [line for line in late if line.startswith("已提交 rlhf_zh")]
    assert told and "迟交 2 小时 10 分钟，将扣除迟交罚分" in told[0] and "你的延期 +48 小时" in told[0], late

    other = exchange / COURSE / "inbound" / "zed+rlhf_zh+2026-12-05 10:00:00.000000 UTC"  # a classmate's entry
    other.mkdir()
    (other / "a.ipynb").write_text(EMPTY_NOTEBOOK)
    submitted, lines = _run(StrictExchangeList, exchange, inbound=True)  # what the Assignment List's Submit gets
    # an instructor listing inbound sees others' entries: nothing is said of their lateness (their extensions
    # are not readable here)
    assert [s["submissions"][-1]["lateness"] for s in submitted if s["student_id"] == "zed"] == [None]
    lateness = {s["assignment_id"]: s["submissions"][-1]["lateness"] for s in submitted if s["student_id"] == ME}
    assert lateness["rlhf"]["text"]["en"] == "on time" and lateness["rlhf"]["seconds_late"] == 0
    assert lateness["rlhf_zh"]["text"]["en"] == "late by 2 h 10 min: the late penalty applies", lateness
    assert any("[迟交 2 小时 10 分钟" in line for line in lines), lines


def test_without_a_deadline_in_the_exchange_nothing_is_claimed(exchange):
    released, lines = _run(StrictExchangeList, exchange)
    assert [a["deadline"] for a in released] == [None, None] and f"{COURSE} rlhf" in lines
    (exchange / COURSE / "deadlines").mkdir()
    (exchange / COURSE / "deadlines" / "rlhf.json").write_text("{not json")  # damaged: as if absent
    assert deadlines.read(str(exchange), COURSE, "rlhf", ME) is None


def test_a_name_that_cannot_be_a_file_is_refused_and_nothing_written(exchange, caplog):
    with pytest.raises(deadlines.PublishError, match="cannot name a file"):
        deadlines.publish_due_date(str(exchange), COURSE, "../rlhf", DUE, "en")
    skipped = deadlines.publish_extensions(str(exchange), COURSE, {"../instructor": {"rlhf": dt.timedelta(hours=1)}},
                                           logging.getLogger("publish"))
    assert skipped == ["../instructor"] and "the id cannot name a file" in caplog.text
    assert not list((exchange / COURSE / "deadlines" / "extensions").iterdir())
    assert not (exchange / COURSE / "instructor.json").exists() and not list((exchange / COURSE).glob("*.json"))
    with pytest.raises(deadlines.PublishError, match="no course 'other'"):
        deadlines.publish_due_date(str(exchange), "other", "rlhf", DUE, "en")


@pytest.fixture(scope="module")
def two_students():
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd"):
        pytest.skip("needs root, setpriv and useradd")
    from rlhf_course.classroom.accounts import add_account, remove_accounts
    names = ["rlhfd_ann", "rlhfd_ben"]
    base = Path(tempfile.mkdtemp(prefix="rlhf-deadlines-"))
    base.chmod(0o755)
    remove_accounts(names)
    for name in names:
        add_account(name, base / "home" / name)
    yield base, names
    remove_accounts(names)
    shutil.rmtree(base, ignore_errors=True)


READ_AS_STUDENT = """\
import json, os, sys
root, own, other = sys.argv[1:]
for what, action in [("own", lambda: json.load(open(own))["extensions"]),
                     ("other", lambda: open(other).read()),
                     ("list", lambda: os.listdir(os.path.dirname(own))),
                     ("overwrite own", lambda: open(own, "w").write("{}"))]:
    try:
        print(what, "ALLOWED", action())
    except PermissionError:
        print(what, "denied")
"""


def test_each_student_reads_their_own_extension_and_no_one_elses(two_students):
    base, (ann, ben) = two_students
    root = base / "exchange"
    (root / COURSE / "outbound").mkdir(parents=True)
    root.chmod(0o755), (root / COURSE).chmod(0o755)
    skipped = deadlines.publish_extensions(str(root), COURSE, {ann: {"rlhf": dt.timedelta(hours=48)},
                                                               ben: {"rlhf": dt.timedelta(hours=12)},
                                                               "nobody_here": {"rlhf": dt.timedelta(hours=1)}})
    assert skipped == ["nobody_here"]  # no Unix account: not published (it still holds in grading)
    seen = {}
    for student, other in ((ann, ben), (ben, ann)):
        out = subprocess.run(["setpriv", f"--reuid={student}", f"--regid={student}", "--init-groups",
                              "/usr/bin/python3", "-c", READ_AS_STUDENT, str(root), deadlines.extension_path(str(root), COURSE, student),
                              deadlines.extension_path(str(root), COURSE, other)],
                             capture_output=True, text=True, check=True).stdout
        seen[student] = out
    assert "own ALLOWED {'rlhf': 172800.0}" in seen[ann] and "own ALLOWED {'rlhf': 43200.0}" in seen[ben], seen
    for out in seen.values():
        assert "other denied" in out and "list denied" in out and "overwrite own denied" in out, out
    # Withdrawn: the file stays, with no extension in it (the gradebook no longer has one); off the roster: gone
    deadlines.publish_extensions(str(root), COURSE, {ann: {}, ben: {"rlhf": dt.timedelta(hours=12)}})
    assert json.loads(Path(deadlines.extension_path(str(root), COURSE, ann)).read_text())["extensions"] == {}
    deadlines.publish_extensions(str(root), COURSE, {ben: {"rlhf": dt.timedelta(hours=12)}})
    assert not Path(deadlines.extension_path(str(root), COURSE, ann)).exists()


STAT_AS_STUDENT = """\
import json, os, sys
print(json.dumps({path: [getattr(os.stat(path), f) for f in ("st_size", "st_mode", "st_uid", "st_gid", "st_blocks",
                                                              "st_atime_ns", "st_mtime_ns", "st_ctime_ns")]
                  for path in sys.argv[1:]}))
"""


def test_every_student_s_file_has_the_same_footprint_with_or_without_an_extension(two_students):
    """What a classmate's stat says (they cannot read the file): existence, size, mode, owner, times; the same
    for a student with 48 h, one with 24 h and one with none."""
    base, (ann, ben) = two_students
    root = base / "exchange-stat"
    (root / COURSE / "outbound").mkdir(parents=True)
    root.chmod(0o755), (root / COURSE).chmod(0o755)
    for ann_has, ben_has in (({"rlhf": dt.timedelta(hours=48)}, {}),
                             ({"rlhf": dt.timedelta(hours=24)}, {"rlhf": dt.timedelta(hours=48), "grpo": dt.timedelta(hours=1)})):
        deadlines.publish_extensions(str(root), COURSE, {ann: ann_has, ben: ben_has})
        paths = [deadlines.extension_path(str(root), COURSE, student) for student in (ann, ben)]
        out = subprocess.run(["setpriv", f"--reuid={ann}", f"--regid={ann}", "--init-groups", "/usr/bin/python3", "-c",
                              STAT_AS_STUDENT, *paths], capture_output=True, text=True, check=True).stdout
        mine, theirs = json.loads(out).values()
        assert mine[:7] == theirs[:7], (mine, theirs)  # size, mode, owner, group, blocks, access and modification times
        assert abs(mine[7] - theirs[7]) < 1e9  # change times: this publish's, within a second
        assert json.loads(Path(paths[0]).read_text())["extensions"] == {
            a: e.total_seconds() for a, e in ann_has.items()}


def test_the_feedback_line_comes_from_the_gradebook_in_both_languages():
    data = {"due": DUE, "extension": dt.timedelta(hours=48), "submitted": DUE + dt.timedelta(hours=50, minutes=10),
            "seconds_late": 7800.0, "penalty": 6.0}
    assert deadline_line(data, "en") == ("due 2026-12-18 23:59 UTC, your extension +48 h, submitted 2026-12-21 "
                                         "02:09 UTC: late by 2 h 10 min (penalty -6 points)")
    assert deadline_line(data, "zh-CN") == ("截止时间 2026-12-18 23:59 UTC，你的延期 +48 小时，提交于 2026-12-21 02:09 UTC："
                                            "迟交 2 小时 10 分钟（扣 6 分）")
    on_time = {"due": DUE, "extension": None, "submitted": DUE - dt.timedelta(hours=1), "seconds_late": -3600.0,
               "penalty": None}
    assert deadline_line(on_time, "en") == "due 2026-12-18 23:59 UTC, submitted 2026-12-18 22:59 UTC: on time"
    assert deadline_line({"due": None, "submitted": DUE}, "en") == ""


def test_the_committed_lab_extension_is_built_from_its_source():
    """CI never runs npm: the prebuilt extension is committed, with the hash of the sources it was built from
    (jupyter/labextension/record-source-hash.js); rebuild it (`npm run build` there) after changing them."""
    folder = REPO / "jupyter" / "labextension"
    digest = hashlib.sha256()
    for name in ("package.json", "src/index.js", "style/index.css"):
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    recorded = (folder / "rlhf-course-deadlines" / "source-sha256.txt").read_text().strip()
    assert recorded == digest.hexdigest(), "the committed build is older than its source: run `npm run build`"
    built = json.loads((folder / "rlhf-course-deadlines" / "package.json").read_text())
    assert built["name"] == "rlhf-course-deadlines" and "load" in built["jupyterlab"]["_build"]
