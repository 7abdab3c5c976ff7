"""An error a user of the course causes is a CourseError, and every grader command ends on one the same way:
"<command> did not run: <message>" on stderr, exit code 2, nothing else printed and no traceback."""
from __future__ import annotations

import pytest

from rlhf_course.course.dates import DeadlineError
from rlhf_course.course.errors import CourseError
from rlhf_course.course.settings import NotReady
from rlhf_course.exchange.collect import Refused
from rlhf_course.exchange.deadlines import PublishError
from rlhf_course.grading import app
from rlhf_course.grading.editions import StaleTranslation
from rlhf_course.grading.gradebook.lms_export import UnknownFormat
from rlhf_course.grading.intake import Unreadable
from rlhf_course.grading.pages.class_report import ReportError
from rlhf_course.grading.pages.returned_feedback import StalePages


def test_the_errors_a_user_causes_share_one_base_and_keep_their_old_ones():
    for error, old_base in [(DeadlineError, ValueError), (NotReady, RuntimeError), (Refused, Exception),
                            (PublishError, RuntimeError), (StaleTranslation, RuntimeError),
                            (UnknownFormat, ValueError), (Unreadable, Exception), (ReportError, ValueError),
                            (StalePages, RuntimeError)]:
        assert issubclass(error, CourseError) and issubclass(error, old_base), error


@pytest.mark.parametrize("argv, command, names", [
    (["extend", "ada"], "extend", "usage: python -m rlhf_course.grading extend STUDENT ASSIGNMENT"),
    (["extend", "ada", "rlhf"], "extend", "give either --hours or --until"),
    (["export", "--format=excel"], "export", "excel"),
    (["editions", "revisit", "rlhf.zh-CN.json"], "editions revisit", "usage:"),
    (["report", "--language=fr", "rlhf"], "report", "no report written: "),
])
def test_each_command_ends_a_users_error_in_one_line_and_exit_code_2(course, capsys, argv, command, names):
    code = app.main([*argv, "--course-root", str(course)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith(f"{command} did not run: ") and names in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""



@pytest.mark.parametrize("setting, typed", [
    ("c.RlhfCourse.due_date", '"next friday"'),
    ("c.RlhfCourse.due_dates['rlhf_zh']", '{"rlhf": "2026-12-18 23:59 UTC", "rlhf_zh": "next friday"}'),
])
@pytest.mark.parametrize("argv, command", [(["report"], "report"), (["export"], "export"),
                                           (["editions", "status"], "editions status"), (["release"], "release")])
def test_a_due_date_that_is_no_date_stops_every_command_as_the_configuration_loads(course, capsys, setting, typed,
                                                                                    argv, command):
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(f"\n{setting.split('[')[0]} = {typed}\n")
    before = sorted(course.rglob("*"))
    code = app.main([*argv, "--course-root", str(course)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith(f"{command} did not run: {setting} is not a date: 'next friday'"), err
    assert "write it as '2026-12-20 18:00 UTC'" in err and "Traceback" not in err and out == ""
    assert sorted(course.rglob("*")) == before  # nothing written, not even a gradebook


def test_a_due_date_given_on_the_command_line_is_checked_too(course, capsys):
    assert app.main(["export", "--RlhfCourse.due_date=someday", "--course-root", str(course)]) == 2
    assert capsys.readouterr().err.startswith("export did not run: c.RlhfCourse.due_date is not a date: 'someday'")


def test_a_due_date_nbgrader_reads_is_accepted(course, capsys):
    with open(course / "nbgrader_config.py", "a") as config:
        config.write('\nc.RlhfCourse.due_dates = {"rlhf": "2026-12-18T23:59:00+01:00", "grpo": "2027-01-10 23:59"}\n')
    assert app.main(["export", "--course-root", str(course)]) == 0, capsys.readouterr()


@pytest.mark.parametrize("argv, command", [(["report"], "report"), (["export"], "export"),
                                           (["extend", "--list"], "extend")])
def test_a_gradebook_whose_server_does_not_answer_is_one_line_naming_the_setting(course, capsys, argv, command):
    """A PostgreSQL gradebook on a port nothing listens on (a mistyped URL, a server down): the database's own
    reason, what to check, exit code 2, no traceback."""
    closed = "postgresql+psycopg2://grader:secret@127.0.0.1:1/rlhf"
    code = app.main([*argv, f"--CourseDirectory.db_url={closed}", "--course-root", str(course)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith(f"{command} stopped: the gradebook's database failed: "), err
    assert "port 1 failed" in err and "c.CourseDirectory.db_url" in err and "secret" not in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_gradebook_connection_dropped_mid_batch_is_not_said_as_a_command_that_did_not_run(monkeypatch, capsys):
    """PostgreSQL terminated the grader's connection after some submissions were recorded (pg_terminate_backend,
    as walked with a real server and Dask): the line said "grade did not run" and ended its reason in "..", though
    what was graded before stays recorded."""
    from sqlalchemy.exc import OperationalError

    reason = ("server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n"
              "\tbefore or while processing the request.\n")

    def drops(self):
        raise OperationalError("UPDATE grade SET ...", {}, Exception(reason))
    monkeypatch.setattr(app.RlhfGrader, "initialize", lambda self, argv=None: None)
    monkeypatch.setattr(app.RlhfGrader, "start", drops)
    assert app.main(["grade"]) == 2
    err = capsys.readouterr().err
    assert " stopped: the gradebook's database failed: server closed the connection unexpectedly This probably " \
           "means the server terminated abnormally before or while processing the request.  Check" in err, err
    assert "did not run" not in err and ".." not in err
