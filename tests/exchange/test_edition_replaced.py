"""A student who submits one language edition after the other is warned, on submit, in the edition's language, that
the new submission replaces the other (and any manual grade on it); not when nothing is replaced."""
from tests.support.command_session import OwnCommandSession
from tests.support.course import copy_course, release_course

COURSE_ID = "rlhf-course"
WARNING_ZH = "这次提交将取代你在 "


def test_submitting_the_other_edition_warns_that_it_replaces_the_first(tmp_path, monkeypatch):
    exchange = tmp_path / "exchange"
    monkeypatch.setenv("RLHF_EXCHANGE_ROOT", str(exchange))
    course = release_course(copy_course(tmp_path / "course"))
    home, config = tmp_path / "student", tmp_path / "config"
    home.mkdir(), config.mkdir()
    (config / "nbgrader_config.py").write_text(
        f"from rlhf_course import exchange\nexchange.configure(get_config(), {str(exchange)!r}, {COURSE_ID!r})\n")
    env = {"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    # the instructor's and the student's commands one after another in one process (nbgrader's app reset between)
    with OwnCommandSession(home) as commands:
        commands.nbgrader("release_assignment", "rlhf", cwd=course)
        commands.nbgrader("release_assignment", "rlhf_zh", cwd=course)

        def student(*args):
            return commands.nbgrader(*args, env=env).stdout

        student("fetch_assignment", "rlhf", "rlhf_zh")
        first = student("submit", "rlhf")
        assert "This replaces" not in first and WARNING_ZH not in first
        replacing = student("submit", "rlhf_zh")
        assert WARNING_ZH in replacing and "提交的 rlhf（以及对它的任何人工评分）：两个版本中只有最后一次提交会被评分。" in replacing, replacing
        again = student("submit", "rlhf_zh")  # rlhf was replaced already: nothing more to say
        assert WARNING_ZH not in again
        back = student("submit", "rlhf")
        assert "This replaces your rlhf_zh submission of " in back and "(and any manual grade on it)" in back, back
