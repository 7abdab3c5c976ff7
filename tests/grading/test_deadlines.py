"""Deadlines as a term lives them: a due date per assignment that a release never overwrites, and
extensions per student granted by one command, kept in the gradebook's extension (which nbgrader's late
penalty reads), refused with a clear message and nothing written when asked wrongly."""
from __future__ import annotations

import csv
import datetime as dt

import pytest

from rlhf_course import ASSIGNMENT
from rlhf_course.grading import app, deadlines, examples, release
from rlhf_course.grading.gradebook import lms_export
from rlhf_course.grading.gradebook.export import MISSING, EditionsCsvExport
from rlhf_course.grading.pages import class_report
from rlhf_course.course import due_dates
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, release_course

pytestmark = pytest.mark.slow  # the shared release, then one generate_assignment

SET_IN_THE_FORMGRADER = dt.datetime(2027, 1, 15, 12, 0)
DUE = dt.datetime(2026, 12, 18, 23, 59)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("deadlines") / "course")
    release_course(root)
    root_course = Course.at(root)
    examples.write_submission(root_course, "ada", examples.answers_for(root_course, ()))
    from nbgrader.api import Gradebook
    with Gradebook(root_course.db_url) as gb:
        for student in ("ada", "ben"):
            gb.update_or_create_student(student)
        for assignment in (ASSIGNMENT, f"{ASSIGNMENT}_zh"):  # the test run's default is far in the future
            gb.update_or_create_assignment(assignment, duedate=DUE)
    return root


def _gradebook_state(root):
    """Every assignment's due date and every submission's extension: what a refused command must not change."""
    from nbgrader.api import Gradebook
    with Gradebook(Course.at(root).db_url) as gb:
        return {a.name: (a.duedate, sorted((s.student.id, s.extension) for s in a.submissions))
                for a in gb.assignments}


def _extend(root, *args) -> int:
    return app.main(["extend", "--course-root", str(root), *args])


def test_a_release_records_each_assignments_due_date_only_where_the_gradebook_has_none(course):
    from nbgrader.api import Gradebook
    configured = Course.at(course).with_config(RlhfCourse={"due_dates": {"kl_penalty": "2027-01-10 23:59 UTC"}})
    url = configured.db_url
    with Gradebook(url) as gb:
        gb.find_assignment("kl_penalty").duedate = None  # as a new assignment: no date yet
        gb.db.commit()
    release.generate_release(configured, ["kl_penalty"])
    with Gradebook(url) as gb:
        assert gb.find_assignment("kl_penalty").duedate == dt.datetime(2027, 1, 10, 23, 59)
        gb.update_or_create_assignment("kl_penalty", duedate=SET_IN_THE_FORMGRADER)  # the instructor changes it
    release.generate_release(configured, ["kl_penalty"])  # and releases again
    with Gradebook(url) as gb:
        assert gb.find_assignment("kl_penalty").duedate == SET_IN_THE_FORMGRADER
        assert gb.find_assignment(ASSIGNMENT).duedate == DUE  # not released this time: untouched
    assert due_dates.due_date_for(configured, "grpo") == configured.settings()[0].due_date  # the default


def test_a_release_says_when_the_gradebook_keeps_another_due_date_than_the_configuration(course, capsys,
                                                                                     monkeypatch):
    """An instructor who moves a due date in nbgrader_config.py and runs `make release` again is told that the
    gradebook's date stays (the one the late penalty uses), and how to change it; the same date says nothing."""
    from nbgrader.api import Gradebook
    with Gradebook(Course.at(course).db_url) as gb:
        gb.update_or_create_assignment("kl_penalty", duedate=SET_IN_THE_FORMGRADER)
    monkeypatch.setenv("RLHF_DUE_DATE", "2027-01-10 23:59 UTC")  # the course's nbgrader_config.py reads it
    assert app.main(["release", "--course-root", str(course), "kl_penalty"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert ("kl_penalty: the gradebook's due date 2027-01-15 12:00 UTC stays, not nbgrader_config.py's "
            "2027-01-10 23:59 UTC") in said
    assert "nbgrader db assignment add kl_penalty --duedate=" in said and "publish-deadlines" in said
    with Gradebook(Course.at(course).db_url) as gb:
        assert gb.find_assignment("kl_penalty").duedate == SET_IN_THE_FORMGRADER  # kept, as before
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(course / "walk-exchange"))
    handed_out = release.nbgrader(course, "release_assignment", "kl_penalty")  # says the same
    assert "kl_penalty: the gradebook's due date 2027-01-15 12:00 UTC stays" in " ".join(handed_out.stderr.split())
    monkeypatch.setenv("RLHF_DUE_DATE", "2027-01-15 12:00 UTC")
    assert app.main(["release", "--course-root", str(course), "kl_penalty"]) == 0
    assert "stays" not in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["carol", ASSIGNMENT, "--hours", "48"], "no student 'carol'"),
    (["ada", "rlhf_final", "--hours", "48"], "no assignment 'rlhf_final'"),
    (["ada", ASSIGNMENT, "--until", "next tuesday-ish"], "not a date"),
    (["ada", ASSIGNMENT, "--until", "2026-12-10 12:00 UTC"], "is not after the due date"),
    (["ada", ASSIGNMENT, "--hours", "-5"], "--hours must be more than 0"),
    (["ada", ASSIGNMENT], "give either --hours or --until"),
    (["ada", ASSIGNMENT, "--hours", "2", "--until", "2026-12-20 12:00 UTC"], "give either --hours or --until"),
])
def test_a_wrong_extension_is_refused_with_its_reason_and_nothing_written(course, capsys, args, says):
    before = _gradebook_state(course)
    assert _extend(course, *args) == 2
    assert says in capsys.readouterr().err
    assert _gradebook_state(course) == before


def test_an_extension_for_a_penalised_graded_submission_says_it_applies_at_the_next_grading(course, capsys):
    """The late penalty is written when a submission is graded: an extension granted after that leaves it in the
    gradebook, the export and the feedback until `make grade` runs again, and the command says so."""
    import warnings

    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning
    with Gradebook(Course.at(course).db_url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission trips a harmless autoflush warning
        gb.update_or_create_student("cleo")
        submission = gb.update_or_create_submission(ASSIGNMENT, "cleo", timestamp=DUE + dt.timedelta(minutes=5))
        submission.notebooks[0].late_submission_penalty = 2.0  # as grading it wrote
        gb.db.commit()
    assert _extend(course, "cleo", ASSIGNMENT, "--until", "2027-06-01 12:00 UTC") == 0
    said = " ".join(capsys.readouterr().err.split())
    assert (f"cleo's graded submission of {ASSIGNMENT} keeps its late penalty of 2 points until it is graded "
            f"again: `make grade ASSIGNMENT={ASSIGNMENT}`") in said
    assert _extend(course, "ben", ASSIGNMENT, "--until", "2027-06-01 12:00 UTC") == 0  # nothing graded: no note
    assert "late penalty" not in capsys.readouterr().err


def test_an_extension_already_past_is_refused(course, capsys):
    now = dt.datetime(2027, 3, 1)
    with pytest.raises(deadlines.DeadlineError, match="already past"):
        deadlines.grant_extension(Course.at(course), "ada", ASSIGNMENT, hours=24, now=now)


def _submissions(root) -> dict:
    """(assignment, student) -> the submission's extension, for every submission row of the gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(Course.at(root).db_url) as gb:
        return {(a.name, s.student.id): s.extension for a in gb.assignments for s in a.submissions}


def _graded(root, student, assignment, timestamp=None):
    """What trusted grading writes for a submission of ``assignment`` (no cells: only its row matters here)."""
    from nbgrader.api import Gradebook

    from rlhf_course import NOTEBOOK
    from rlhf_course.grading.gradebook.gradebook import record_in_gradebook
    from rlhf_course.grading.results import GRADED, SubmissionResult
    with Gradebook(Course.at(root).db_url) as gb:
        record_in_gradebook(gb, SubmissionResult(student, GRADED, assignment, NOTEBOOK), timestamp,
                            granted=deadlines.granted(Course.at(root)))


def _exported(root) -> dict:
    """grades.csv as the course exports it: (student, base assignment) -> its row."""
    from nbgrader.api import Gradebook
    with Gradebook(Course.at(root).db_url) as gb:
        EditionsCsvExport(to=str(root / "grades.csv"), course_root=str(root)).export(gb)
    return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(open(root / "grades.csv"))}


def test_an_extension_reaches_only_the_edition_submitted_and_waits_for_one_not_yet_submitted(course, capsys):
    _graded(course, "ada", ASSIGNMENT, dt.datetime(2026, 12, 19, 10, 0))  # ada submitted the English edition
    assert _extend(course, "ben", ASSIGNMENT, "--hours", "48") == 0  # ben has submitted nothing yet
    assert "+48 h (due 2026-12-18 23:59 UTC, until 2026-12-20 23:59 UTC; not submitted yet" in capsys.readouterr().out
    assert _extend(course, "ada", ASSIGNMENT, "--until", "2026-12-19 11:59 UTC") == 0  # 12 h
    rows = _submissions(course)
    assert rows[ASSIGNMENT, "ada"] == dt.timedelta(hours=12)  # the edition she submitted
    # no row for an edition (or a student) that submitted nothing: the Formgrader lists no phantom 0 / 50
    assert (f"{ASSIGNMENT}_zh", "ada") not in rows and not any(student == "ben" for _, student in rows), rows
    assert _exported(course)["ben", ASSIGNMENT]["status"] == MISSING  # not a submission scored 0
    lms = lms_export.write(Course.at(course), "long", course / "long.csv")
    assert {(r["student_id"], r["assignment"]): r["status"] for r in csv.DictReader(open(lms))}[
        "ben", ASSIGNMENT] == "missing"
    report = class_report.build(Course.at(course), ASSIGNMENT, [ASSIGNMENT, f"{ASSIGNMENT}_zh"])
    assert "ada" in [row.student for row in report.rows] and "ben" not in [row.student for row in report.rows]
    assert _extend(course, "--list") == 0
    listed = capsys.readouterr().out
    for line in ("ada                  rlhf             +12 h",
                 "ben                  rlhf             +48 h (due 2026-12-18 23:59 UTC, until 2026-12-20 23:59 UTC; "
                 "not submitted yet: for the edition they submit)"):
        assert line in listed, listed
    assert "rlhf_zh" not in listed, listed
    _graded(course, "ben", f"{ASSIGNMENT}_zh", dt.datetime(2026, 12, 20, 10, 0))  # ben submits the Chinese edition
    rows = _submissions(course)
    assert rows[f"{ASSIGNMENT}_zh", "ben"] == dt.timedelta(hours=48) and (ASSIGNMENT, "ben") not in rows
    from nbgrader.api import Gradebook
    with Gradebook(Course.at(course).db_url) as gb:
        assert gb.find_submission(f"{ASSIGNMENT}_zh", "ben").total_seconds_late == 0  # what the late penalty reads
        assert gb.find_submission(ASSIGNMENT, "ada").total_seconds_late == 0  # after the due date, within 12 h
    rows = _exported(course)
    assert float(rows["ben", ASSIGNMENT]["extension_hours"]) == 48  # the editions folded, as the course reports
    assert float(rows["ada", ASSIGNMENT]["extension_hours"]) == 12
    assert rows["ada", "grpo"]["extension_hours"] == ""


def test_publish_deadlines_puts_the_gradebooks_dates_in_the_exchange_or_says_why_not(course, capsys):
    import json
    assert app.main(["publish-deadlines", "--course-root", str(course)]) == 2
    assert "no course 'rlhf-course' in the exchange" in capsys.readouterr().err  # never released: nothing written
    assert not (course / "exchange").exists()
    outbound = course / "exchange" / "rlhf-course" / "outbound"
    for name in (ASSIGNMENT, f"{ASSIGNMENT}_zh"):  # as release_assignment leaves the exchange
        (outbound / name).mkdir(parents=True)
    assert _extend(course, "ben", ASSIGNMENT, "--hours", "24") == 0  # extend publishes too
    said = capsys.readouterr()
    assert "rlhf: due 2026-12-18 23:59 UTC (in the exchange)" in said.out, said
    deadlines_folder = course / "exchange" / "rlhf-course" / "deadlines"
    assert json.loads((deadlines_folder / f"{ASSIGNMENT}_zh.json").read_text()) == {
        "assignment": f"{ASSIGNMENT}_zh", "due": "2026-12-18 23:59:00 UTC", "language": "zh-CN",
        "edition_of": ASSIGNMENT}
    # ben has no Unix account here: his extension is not in the exchange, and the instructor is told
    assert "not published (see the warnings): " in said.out and "ben" in said.err, said
    assert app.main(["publish-deadlines", "--course-root", str(course)]) == 0


def test_an_extension_granted_before_any_submission_is_published_for_each_edition(course, monkeypatch):
    from nbgrader.api import Gradebook

    from rlhf_course.exchange import deadlines as exchange_deadlines
    with Gradebook(Course.at(course).db_url) as gb:
        gb.update_or_create_student("dana")
    published = {}
    monkeypatch.setattr(exchange_deadlines, "publish_extensions",
                        lambda root, course_id, granted, log=None: published.update(granted) or [])
    assert _extend(course, "dana", f"{ASSIGNMENT}_zh", "--hours", "24") == 0  # named by an edition: the same
    day = dt.timedelta(hours=24)
    assert published["dana"] == {ASSIGNMENT: day, f"{ASSIGNMENT}_zh": day}  # she may submit either
    assert published["ben"][f"{ASSIGNMENT}_zh"] == dt.timedelta(hours=24)  # his submission's, set by the grant
    assert not any(student == "dana" for _, student in _submissions(course))


def test_stock_autograde_gives_its_new_submission_the_extension_granted_before(course):
    """Stock autograde records the submission itself (nbgrader's update_or_create_submission), then runs its
    preprocessors: GrantedExtension, configured before AssignLatePenalties, gives the row dana's extension."""
    import warnings

    import nbformat
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    from rlhf_course.grading.nbgrader_ext import GrantedExtension
    config = Course.at(course).config
    assert "GrantedExtension" in [p.__name__ for p in config.Autograde.autograde_preprocessors]
    with Gradebook(Course.at(course).db_url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission trips a harmless autoflush warning
        gb.update_or_create_submission(ASSIGNMENT, "dana", timestamp=DUE + dt.timedelta(hours=20))
    resources = {"nbgrader": {"student": "dana", "assignment": ASSIGNMENT, "notebook": "rlhf_building_blocks",
                              "db_url": Course.at(course).db_url}}
    GrantedExtension(config=config).preprocess(nbformat.v4.new_notebook(), resources)
    with Gradebook(Course.at(course).db_url) as gb:
        submission = gb.find_submission(ASSIGNMENT, "dana")
        assert submission.extension == dt.timedelta(hours=24) and submission.total_seconds_late == 0
        gb.remove_submission(ASSIGNMENT, "dana")


def test_a_damaged_record_of_extensions_is_named_and_nothing_is_written(course, capsys):
    record = course / "extensions.json"
    kept = record.read_text()
    before = _gradebook_state(course)
    record.write_text("{not json")
    try:
        assert _extend(course, "ada", ASSIGNMENT, "--hours", "30") == 2
        assert "extensions.json is not the record of extensions" in capsys.readouterr().err
        assert _gradebook_state(course) == before and record.read_text() == "{not json"
    finally:
        record.write_text(kept)
