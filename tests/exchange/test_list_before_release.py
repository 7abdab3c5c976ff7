"""A student's `nbgrader list` (and the Assignment List, which lists through the same class) before anything is
released: nothing listed and a sentence that says why, in English and Chinese, not nbgrader's "exchange directory
does not exist" error; a course without due dates prints none ("[no due date]" said nothing)."""
from rlhf_course import i18n
from rlhf_course.course.settings import Course
from rlhf_course.exchange.local import NOTHING_RELEASED
from rlhf_course.grading import release
from tests.support.course import copy_course

COURSE_ID = "rlhf-course"


def _student(tmp_path, exchange):
    home, config = tmp_path / "student", tmp_path / "config"
    home.mkdir(), config.mkdir()
    (config / "nbgrader_config.py").write_text(
        f"from rlhf_course import exchange\nexchange.configure(get_config(), {str(exchange)!r}, {COURSE_ID!r})\n")
    env = {"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(tmp_path / "data")}

    def nbgrader(*args):
        proc = release.nbgrader(home, *args, extra_env=env, check=False)
        return proc.returncode, proc.stdout + proc.stderr
    return nbgrader


def test_listing_an_exchange_not_made_yet_says_nothing_is_released(tmp_path):
    code, said = _student(tmp_path, tmp_path / "no-exchange-yet")("list")
    assert code == 0, said
    assert NOTHING_RELEASED in said and i18n.t(NOTHING_RELEASED, i18n.CHINESE) in said
    assert "does not exist" not in said and "ERROR" not in said


def test_a_course_without_due_dates_lists_none(tmp_path, monkeypatch):
    exchange = tmp_path / "exchange"
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(exchange))
    monkeypatch.setenv("RLHF_DUE_DATE", "")  # the course sets no due date
    # the one assignment listed, generated here: no other test's release has this due date to share (release_course)
    course = copy_course(tmp_path / "course")
    release.generate_release(Course.at(course), ["rlhf"])
    release.nbgrader(course, "release_assignment", "rlhf")
    code, said = _student(tmp_path, exchange)("list")
    assert code == 0 and "rlhf-course rlhf" in said, said
    assert "no due date" not in said, said
