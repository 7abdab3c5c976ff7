"""An instructor upgrading mid-term with a gradebook an older `extend` filled with empty submission rows (one per
edition the student never took, shown as 0 / 50 in the Formgrader and counted in the exports):
`python -m rlhf_course.grading empty-submissions` lists them and changes nothing, `--remove` removes them and only
them (their extensions kept in extensions.json), and a real submission, graded or only collected, is never
touched."""
from __future__ import annotations

import csv
import datetime as dt
import warnings

import pytest

from rlhf_course.course import extension_record
from rlhf_course.course.settings import Course
from rlhf_course.grading import deadlines
from rlhf_course.grading.app import main as course_command
from tests.support.course import copy_course

DUE = dt.datetime(2026, 12, 18, 23, 59)
POINTS = {"tests": 44, "lab_question_1": 6}


def _old_extend(gb, assignment, student, hours):
    """What `extend` did before: a submission row for the edition, created to carry the extension."""
    from sqlalchemy.exc import SAWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_submission(assignment, student, extension=dt.timedelta(hours=hours))


@pytest.fixture
def course(tmp_path, monkeypatch):
    """ada submitted and was graded on rlhf (44 + 6); the old extend gave her 24 h on rlhf and left an empty rlhf_zh
    row; ben submitted nothing and has an empty row of each edition carrying 48 h; cy's rlhf_zh was collected
    (submitted/cy/rlhf_zh) and not graded yet; dee's rlhf was graded, its folders since cleaned away."""
    from nbgrader.api import Gradebook
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(tmp_path / "exchange"))
    root = copy_course(tmp_path / "course")
    with Gradebook(Course.at(root).db_url) as gb:
        for assignment in ("rlhf", "rlhf_zh"):
            gb.add_assignment(assignment, duedate=DUE)
            gb.add_notebook("nb", assignment)
            for name, points in POINTS.items():
                gb.add_grade_cell(name, "nb", assignment, max_score=points, cell_type="code")
        for student in ("ada", "ben", "cy", "dee"):
            gb.add_student(student)
        for student in ("ada", "dee"):
            gb.add_submission("rlhf", student, timestamp=DUE - dt.timedelta(hours=2))
            for name, points in POINTS.items():
                gb.find_grade(name, "nb", "rlhf", student).auto_score = points
                gb.find_grade(name, "nb", "rlhf", student).needs_manual_grade = False
        gb.db.commit()
        for edition in ("rlhf", "rlhf_zh"):
            _old_extend(gb, edition, "ada", 24)
            _old_extend(gb, edition, "ben", 48)
        _old_extend(gb, "rlhf_zh", "cy", 12)  # then cy submitted that edition, collected
    collected = Course.at(root).folder("submitted", "cy", "rlhf_zh")
    collected.mkdir(parents=True)
    (collected / "nb.ipynb").write_text("{}")
    Course.at(root).folder("submitted", "ada", "rlhf").mkdir(parents=True)
    return root


def _submissions(root) -> dict[tuple[str, str], tuple]:
    from nbgrader.api import Gradebook
    with Gradebook(Course.at(root).db_url) as gb:
        return {(a.name, s.student.id): (s.timestamp, s.extension, s.score) for a in gb.assignments
                for s in a.submissions}


def _command(root, *args) -> int:
    return course_command(["empty-submissions", "--course-root", str(root), *args])


def test_empty_rows_are_listed_and_nothing_changes_until_told(course, capsys):
    before = _submissions(course)
    assert _command(course) == 0
    said = capsys.readouterr().out
    listed = [line.split()[:2] for line in said.splitlines() if "(no submission time" in line]
    assert listed == [["ben", "rlhf"], ["ada", "rlhf_zh"], ["ben", "rlhf_zh"]], said
    assert "ben                  rlhf_zh          (no submission time, no files, no grade, extension +48 h)" in said
    assert "3 empty submission row(s): remove them with `python -m rlhf_course.grading empty-submissions --remove`" \
        in said
    assert _submissions(course) == before and not (course / extension_record.RECORD).exists()


def test_remove_takes_only_the_empty_rows_and_keeps_their_extensions(course, capsys):
    before = _submissions(course)
    assert _command(course, "--remove") == 0
    said = capsys.readouterr().out
    assert "3 empty submission row(s) removed" in said
    after = _submissions(course)
    assert set(after) == {("rlhf", "ada"), ("rlhf", "dee"), ("rlhf_zh", "cy")}  # the real ones, graded or collected
    assert all(after[key] == before[key] for key in after)  # untouched: time, extension, score
    assert after[("rlhf", "ada")][2] == 50
    # ben's 48 h lived only on his empty rows: kept for whichever edition he submits; ada's too, as `extend`
    # records every extension it grants now
    assert extension_record.read(Course.at(course)) == {"ada": {"rlhf": dt.timedelta(hours=24)},
                                                        "ben": {"rlhf": dt.timedelta(hours=48)}}
    assert {(e.student, e.assignment, e.hours, e.submitted) for e in deadlines.extensions(Course.at(course))} == {
        ("ada", "rlhf", 24, True), ("ben", "rlhf", 48, False), ("cy", "rlhf_zh", 12, True)}
    assert _command(course) == 0 and "no empty submission rows" in capsys.readouterr().out
    assert _command(course, "--remove") == 0 and "no empty submission rows" in capsys.readouterr().out


def test_an_extension_already_recorded_is_not_replaced(course, capsys):
    extension_record.write(Course.at(course), {"ben": {"rlhf": dt.timedelta(hours=72)}})  # granted again since
    assert _command(course, "--remove") == 0
    assert extension_record.read(Course.at(course))["ben"] == {"rlhf": dt.timedelta(hours=72)}


def test_the_lms_export_leaves_an_empty_row_blank_and_names_it(course, capsys):
    """ben's empty rows are no submission: blank in the LMS's file, never 0 (the Formgrader shows them until they
    are removed, so the command names them)."""
    def ben_in_canvas():
        assert course_command(["export", "--course-root", str(course)]) == 0
        with open(course / "grades-canvas.csv", newline="") as handle:
            return {row["SIS Login ID"]: row for row in csv.DictReader(handle)}["ben"]["rlhf"]
    assert ben_in_canvas() == ""
    said = " ".join(capsys.readouterr().err.split())
    assert ("3 empty submission row(s) (no file, no grade: an older `extend` made them), exported as no submission "
            "but shown in the Formgrader as submissions scored 0: ben (rlhf), ada (rlhf_zh), ben (rlhf_zh); "
            "`python -m rlhf_course.grading empty-submissions --remove` removes them") in said, said
    assert _command(course, "--remove") == 0
    assert ben_in_canvas() == ""
    assert "empty submission" not in capsys.readouterr().err


def test_a_damaged_record_of_extensions_stops_the_removal_before_anything_changes(course, capsys):
    (course / extension_record.RECORD).write_text("{not json")
    before = _submissions(course)
    assert _command(course, "--remove") == 2
    assert "extensions.json is not the record of extensions" in capsys.readouterr().err
    assert _submissions(course) == before


def test_make_grade_names_the_empty_rows_it_leaves(course, capsys, monkeypatch):
    """`make grade` grades what was submitted and leaves empty rows as they are: it says so, and how to remove them
    (the grading itself is stood in for: it is not what is tested here)."""
    from rlhf_course.grading import batch
    monkeypatch.setattr(batch, "grade_all", lambda *args, **kwargs: [])
    assert course_command(["grade", "--course-root", str(course)]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert ("3 empty submission row(s) (no file, no grade: an older `extend` made them) show in the Formgrader, "
            "grades.csv and the class report as submissions scored 0: ben (rlhf), ada (rlhf_zh), ben (rlhf_zh); "
            "`python -m rlhf_course.grading empty-submissions --remove` removes them") in said, said
    assert _command(course, "--remove") == 0
    assert course_command(["grade", "--course-root", str(course)]) == 0
    assert "empty submission" not in capsys.readouterr().err
