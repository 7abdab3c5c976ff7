"""An error a user of the course causes is a CourseError, and every grader command ends on one the same way:
"<command> did not run: <message>" on stderr, exit code 2, nothing else printed and no traceback."""
from __future__ import annotations

import pytest

from rlhf_course.course.due_dates import DeadlineError
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

