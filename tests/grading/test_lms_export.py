"""Grades an LMS takes (`python -m rlhf_course.grading export --format canvas|moodle|long`) and grades.csv: one row
per student of the roster, the editions folded into their assignment, the late penalty applied, a missing
submission blank (never 0.0), every cell inert in a spreadsheet, each LMS's documented column headers; an assignment
only generated (recorded in the gradebook by `make release`) and never released to students has no column."""
from __future__ import annotations

import csv
import datetime as dt

import pytest

from rlhf_course.grading.gradebook import lms_export
from rlhf_course.grading.app import main as course_command
from rlhf_course.grading.gradebook.export import EditionsCsvExport
from tests.support.course import REPO, repo_course

# Canvas's gradebook import: the identity columns its own export writes, then one column per assignment.
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Moodle's CSV grade import reads the format its CSV grade export writes: the user's profile fields, one column
# per grade item; the import maps "ID number" to useridnumber or "Email address" to useremail, and reads an
# empty grade as no grade.
MOODLE_IDENTITY = ["First name", "Last name", "ID number", "Email address"]
DUE = dt.datetime(2026, 12, 18, 23, 59)


def _gradebook(tmp_path) -> str:
    """A class of four: ada (English edition, on time, 44 + a person's 1.5), bea (Chinese edition, late: 30 - 6),
    cy (submitted nothing), a student whose id and name are formulas (KL assignment only, 11); grpo and grpo_zh
    recorded as `make release` records them, and nobody submitted either."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        for assignment, cells in (("rlhf", {"tests": 44, "lab_question_1": 6}),
                                  ("rlhf_zh", {"tests": 44, "lab_question_1": 6}), ("kl_penalty", {"kl": 11}),
                                  ("grpo", {"grpo": 40}), ("grpo_zh", {"grpo": 40})):
            gb.add_assignment(assignment, duedate=DUE)
            gb.add_notebook("nb", assignment)
            for name, points in cells.items():
                gb.add_grade_cell(name, "nb", assignment, max_score=points, cell_type="code")
        gb.add_student("ada", first_name="Ada", last_name="Lovelace", email="ada@uni.example")
        gb.add_student("bea", first_name="Bea", last_name="Zhang, Jr.", email="bea@uni.example")
        gb.add_student("cy", first_name="Cy", last_name="Young")
        gb.add_student("=1+1", first_name="-2+3", last_name='=HYPERLINK("http://evil.example")', email="@SUM(A1)")
        _submit(gb, "rlhf", "ada", {"tests": 44, "lab_question_1": 1.5}, DUE - dt.timedelta(hours=1))
        _submit(gb, "rlhf_zh", "bea", {"tests": 30, "lab_question_1": 0}, DUE + dt.timedelta(hours=3), penalty=6)
        _submit(gb, "kl_penalty", "=1+1", {"kl": 11}, DUE)
    return url


def _submit(gb, assignment, student, scores, when, penalty=None):
    gb.add_submission(assignment, student, timestamp=when)
    for name, score in scores.items():
        grade = gb.find_grade(name, "nb", assignment, student)
        grade.auto_score = score
    gb.find_submission_notebook("nb", assignment, student).late_submission_penalty = penalty
    gb.db.commit()


def _rows(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _released(exchange, *assignments):
    """The exchange as `nbgrader release_assignment` leaves it: each assignment a folder in outbound/."""
    for assignment in assignments:
        (exchange / "rlhf-course" / "outbound" / assignment).mkdir(parents=True)


def _course(gradebook, exchange):
    return repo_course().with_config(CourseDirectory={"db_url": gradebook, "course_id": "rlhf-course"},
                                     Exchange={"root": str(exchange)})


@pytest.fixture
def gradebook(tmp_path):
    return _gradebook(tmp_path)


@pytest.fixture
def exchange(tmp_path):
    """rlhf (both editions) and kl_penalty released; grpo only generated."""
    _released(tmp_path / "exchange", "rlhf", "rlhf_zh", "kl_penalty")
    return tmp_path / "exchange"


def test_canvas_one_row_per_student_with_its_documented_headers(gradebook, exchange, tmp_path):
    path = lms_export.write(_course(gradebook, exchange), "canvas", tmp_path / "canvas.csv")
    header, *rows = _rows(path)
    assert header == CANVAS_IDENTITY + ["kl_penalty", "rlhf"]  # the editions folded into their assignment
    by_login = {row[3]: dict(zip(header, row)) for row in rows}
    assert sorted(by_login) == ["'=1+1", "ada", "bea", "cy"]  # the roster, each once
    assert by_login["ada"]["Student"] == "Lovelace, Ada" and by_login["ada"]["rlhf"] == "45.5"
    assert by_login["bea"]["Student"] == "Zhang, Jr., Bea" and by_login["bea"]["rlhf"] == "24"  # 30 - 6 late
    assert by_login["cy"]["rlhf"] == "" and by_login["cy"]["kl_penalty"] == ""  # missing: blank, never 0
    assert by_login["ada"]["kl_penalty"] == ""
    evil = by_login["'=1+1"]
    assert evil["kl_penalty"] == "11" and evil["Student"].startswith("'=HYPERLINK")


def test_moodle_one_row_per_student_with_its_documented_headers(gradebook, exchange, tmp_path):
    path = lms_export.write(_course(gradebook, exchange), "moodle", tmp_path / "moodle.csv")
    header, *rows = _rows(path)
    assert header == MOODLE_IDENTITY + ["kl_penalty", "rlhf"]
    by_id = {row[2]: dict(zip(header, row)) for row in rows}
    assert by_id["ada"] == {"First name": "Ada", "Last name": "Lovelace", "ID number": "ada",
                            "Email address": "ada@uni.example", "kl_penalty": "", "rlhf": "45.5"}
    assert by_id["bea"]["rlhf"] == "24" and by_id["cy"]["rlhf"] == ""
    assert by_id["'=1+1"]["First name"] == "'-2+3" and by_id["'=1+1"]["Email address"] == "'@SUM(A1)"


def test_long_one_row_per_student_and_assignment_saying_missing(gradebook, exchange, tmp_path):
    path = lms_export.write(_course(gradebook, exchange), "long", tmp_path / "long.csv")
    with open(path, newline="") as handle:
        rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
    assert len(rows) == 4 * 2
    bea = rows[("bea", "rlhf")]
    assert (bea["edition"], bea["status"], bea["raw_score"], bea["late_penalty"], bea["score"], bea["max_score"]) == \
        ("rlhf_zh", "submitted", "30", "6", "24", "50")
    cy = rows[("cy", "rlhf")]
    assert (cy["status"], cy["raw_score"], cy["score"], cy["max_score"]) == ("missing", "", "", "50")


def test_an_assignment_never_released_has_no_column_until_it_is_released_or_submitted(gradebook, tmp_path):
    """grpo is in the gradebook (`make release` recorded it) but no student was given it: a column would read as
    work every student left undone (a new, empty assignment in Canvas).  Its column appears once either edition is
    in the exchange, and stays for an assignment students submitted after it left the exchange.  An empty submission
    row (tests/grading/test_empty_submissions.py) is no submission."""
    import warnings

    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning
    exchange = tmp_path / "exchange"
    _released(exchange, "rlhf", "rlhf_zh")  # kl_penalty is no longer in the exchange; "=1+1" submitted it
    course = _course(gradebook, exchange)
    with Gradebook(gradebook) as gb, warnings.catch_warnings():  # an older `extend` made an empty row for cy
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_submission("grpo_zh", "cy", extension=dt.timedelta(hours=24))
    for fmt in ("canvas", "moodle"):
        header = _rows(lms_export.write(course, fmt, tmp_path / f"{fmt}.csv"))[0]
        assert header[-2:] == ["kl_penalty", "rlhf"] and "grpo" not in header, header
    with open(lms_export.write(course, "long", tmp_path / "long.csv"), newline="") as handle:
        assert {r["assignment"] for r in csv.DictReader(handle)} == {"kl_penalty", "rlhf"}
    _released(exchange, "grpo_zh")  # the Chinese edition alone: the assignment is released
    header = _rows(lms_export.write(course, "canvas", tmp_path / "canvas.csv"))[0]
    assert header == CANVAS_IDENTITY + ["grpo", "kl_penalty", "rlhf"]
    by_login = {row[3]: dict(zip(header, row)) for row in _rows(tmp_path / "canvas.csv")[1:]}
    assert {row["grpo"] for row in by_login.values()} == {""}  # released, nobody submitted: blank, never 0


def test_grades_csv_leaves_a_missing_submission_blank_and_says_so(gradebook, tmp_path):
    from nbgrader.api import Gradebook
    with Gradebook(gradebook) as gb:
        EditionsCsvExport(to=str(tmp_path / "grades.csv"), course_root=str(REPO)).export(gb)
    with open(tmp_path / "grades.csv", newline="") as handle:
        rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(handle)}
    cy = rows[("cy", "rlhf")]
    assert (cy["raw_score"], cy["late_submission_penalty"], cy["score"], cy["status"]) == ("", "", "", "missing")
    ada = rows[("ada", "rlhf")]
    assert float(ada["score"]) == 45.5 and ada["status"] == "submitted"


def test_the_command_writes_the_file_and_refuses_an_unknown_format(tmp_path, capsys, monkeypatch):
    from tests.support.course import copy_course
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(tmp_path / "exchange"))  # the course's nbgrader_config.py reads it
    course = copy_course(tmp_path / "course")
    _gradebook(course)  # the course's own gradebook.db
    assert course_command(["export", "--course-root", str(course), "--format", "canvas"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    written = course / "grades-canvas.csv"
    assert str(written) in said and "4 students x 2 assignment(s) (kl_penalty, rlhf)" in said
    assert ("left out, never released to students (in the gradebook, not in the exchange, nobody submitted): grpo"
            in said), said
    assert _rows(written)[0][:5] == CANVAS_IDENTITY
    assert course_command(["export", "--course-root", str(course), "--format", "blackboard"]) == 2
    assert "unknown format 'blackboard': one of canvas, moodle, long" in capsys.readouterr().err


def test_the_command_names_the_students_whose_grades_still_need_a_person(tmp_path, capsys, monkeypatch):
    """An export before the manual grading is done writes those submissions' scores as they stand (an unscored
    submission's zeros, a written answer's 0): the command says whose, so they are not uploaded as final."""
    from nbgrader.api import Gradebook

    from tests.support.course import copy_course
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(tmp_path / "exchange"))
    course = copy_course(tmp_path / "course")
    url = _gradebook(course)
    with Gradebook(url) as gb:
        for submission in (s for assignment in gb.assignments for s in assignment.submissions):
            for grade in submission.notebooks[0].grades:  # as grading leaves them: scored, nothing waiting
                grade.needs_manual_grade = False
        gb.find_grade("lab_question_1", "nb", "rlhf_zh", "bea").needs_manual_grade = True
        gb.db.commit()
    assert course_command(["export", "--course-root", str(course)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert ("1 student(s) with grades that still need a person, exported as they stand: bea (rlhf)" in said
            and "ada" not in said)
    with Gradebook(url) as gb:
        graded = gb.find_grade("lab_question_1", "nb", "rlhf_zh", "bea")
        graded.manual_score, graded.needs_manual_grade = 0.5, False
        gb.db.commit()
    assert course_command(["export", "--course-root", str(course)]) == 0
    assert "needs a person" not in capsys.readouterr().err


@pytest.mark.parametrize("fmt", lms_export.FORMATS)
def test_the_default_export_file_is_kept_out_of_git_as_grades_csv_is(fmt):
    """The export's default file holds every student's grades in the course root, like grades.csv: a course kept
    in git must not commit it."""
    import shutil
    import subprocess
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    for name in ("grades.csv", f"grades-{fmt}.csv"):
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "--no-index", name])
        assert ignored.returncode == 0, f"{name} is not git-ignored"
