"""A student who submits one language edition after the other is warned, on submit, in the edition's language, that
the new submission replaces the other (and any manual grade on it); not when nothing is replaced.  The Assignment
List's data carries the same sentence for its Submit button (the course's lab extension shows it there)."""
import logging
import os
import shutil

from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from rlhf_course.exchange import deadlines
from rlhf_course.exchange.fetch import StrictExchangeList
from rlhf_course.exchange.submit import StrictExchangeSubmit
from tests.support.command_session import OwnCommandSession
from tests.support.course import course_with_own_exchange

COURSE_ID = "rlhf-course"
EMPTY_NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'  # submit reads it
WARNING_ZH = "这次提交将取代你在 "


def test_submitting_the_other_edition_warns_that_it_replaces_the_first(tmp_path, monkeypatch):
    course, exchange, home, env = course_with_own_exchange(tmp_path, monkeypatch, COURSE_ID)
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


def _in_process(cls, exchange, cache, assignment=""):
    """nbgrader's exchange command ``cls`` run in this process, as the current user (student and instructor)."""
    config = Config()
    config.Exchange.root = str(exchange)
    config.Exchange.cache = str(cache)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.assignment_id = assignment
    app = cls(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config), config=config)
    app.log = logging.getLogger(f"test-edition-replaced-{id(app)}")
    return app.start()


def test_the_assignment_list_says_beside_submit_what_submitting_would_replace(tmp_path, monkeypatch):
    """The Assignment List's data (the course's exchange List, as its fetched rows get it): each fetched edition says
    what submitting it now would replace, the sentence submit warns with, in both languages and in the edition's
    language; nothing before the other edition was submitted, nothing once this edition is the latest."""
    exchange, cache = tmp_path / "exchange", tmp_path / "cache"
    for assignment, language in (("rlhf", "en"), ("rlhf_zh", "zh-CN")):
        (exchange / COURSE_ID / "outbound" / assignment).mkdir(parents=True)
        (exchange / COURSE_ID / "outbound" / assignment / "a.ipynb").write_text(EMPTY_NOTEBOOK)
        deadlines.publish_due_date(str(exchange), COURSE_ID, assignment, None, language, edition_of="rlhf")
    (exchange / COURSE_ID / "inbound").mkdir()
    monkeypatch.chdir(tmp_path)

    def replaces() -> dict:
        listed = _in_process(StrictExchangeList, exchange, cache)
        return {info["assignment_id"]: info["replaces"] for info in listed if info["status"] == "fetched"}

    for assignment in ("rlhf", "rlhf_zh"):  # fetched
        shutil.copytree(exchange / COURSE_ID / "outbound" / assignment, tmp_path / assignment)
    assert replaces() == {"rlhf": None, "rlhf_zh": None}
    _in_process(StrictExchangeSubmit, exchange, cache, "rlhf")
    [entry] = os.listdir(cache / COURSE_ID)
    when = entry.split("+")[2]
    after_rlhf = replaces()
    assert after_rlhf["rlhf"] is None, after_rlhf
    said = after_rlhf["rlhf_zh"]
    assert said["edition"] == "rlhf" and said["language"] == "zh-CN" and said["timestamp"] == when[:16] + " UTC", said
    assert said["text"] == {
        "en": f"This replaces your rlhf submission of {said['timestamp']} (and any manual grade on it): only the "
              "latest submission of either edition is graded.",
        "zh-CN": f"这次提交将取代你在 {said['timestamp']} 提交的 rlhf（以及对它的任何人工评分）：两个版本中只有最后一次"
                 "提交会被评分。"}
    _in_process(StrictExchangeSubmit, exchange, cache, "rlhf_zh")
    after_zh = replaces()
    assert after_zh["rlhf_zh"] is None and after_zh["rlhf"]["edition"] == "rlhf_zh", after_zh
    assert after_zh["rlhf"]["language"] == "en" and after_zh["rlhf"]["text"]["en"].startswith(
        "This replaces your rlhf_zh submission of "), after_zh
