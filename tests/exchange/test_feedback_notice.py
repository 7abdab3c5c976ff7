"""Fetch Feedback when there is no feedback to fetch says so, in the edition's language: nothing submitted, or
submitted and no feedback released yet, is an error naming which (nothing was fetched); feedback for an earlier
submission but not the latest is fetched, with a warning naming both.  In process: the course's exchange class
against a temporary exchange and submit cache, as nbgrader's own tests of fetch_feedback lay them out."""
from __future__ import annotations

import datetime as dt
import logging

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from nbgrader.utils import notebook_hash
from traitlets.config import Config

from rlhf_course import i18n
from rlhf_course.exchange import deadlines
from rlhf_course.exchange.fetch import FEEDBACK_NOTICE, StrictExchangeFetchFeedback

COURSE_ID = "rlhf-course"
STUDENT = "alice"
NOTEBOOK_ID = "rlhf_building_blocks"
SECRET = "a submission's secret"
FIRST, LATEST = "2026-12-01 10:00:00.000000 UTC", "2026-12-03 16:30:00.000000 UTC"


@pytest.fixture
def places(tmp_path):
    """(exchange root, submit cache, the student's folder)"""
    paths = tmp_path / "exchange", tmp_path / "cache", tmp_path / "student"
    for path in paths:
        path.mkdir()
    return paths


def _submitted(cache, assignment: str, timestamp: str, secret: str = SECRET) -> None:
    """A submission as nbgrader submit records it in the student's cache."""
    folder = cache / COURSE_ID / f"{STUDENT}+{assignment}+{timestamp}"
    folder.mkdir(parents=True)
    (folder / f"{NOTEBOOK_ID}.ipynb").write_text("{}")
    (folder / "timestamp.txt").write_text(timestamp)
    (folder / "submission_secret.txt").write_text(secret)


def _feedback_released(root, secret: str = SECRET) -> None:
    """What release_feedback puts in the exchange for the submission made with ``secret``."""
    feedback = root / COURSE_ID / "feedback"
    feedback.mkdir(parents=True, exist_ok=True)
    (feedback / f"{notebook_hash(secret=secret, notebook_id=NOTEBOOK_ID)}.html").write_text("<p>feedback</p>")


def _fetch_feedback(places, assignment: str, monkeypatch) -> StrictExchangeFetchFeedback:
    root, cache, student = places
    monkeypatch.setenv("USER", STUDENT)  # nbgrader's get_username: whose extension a deadline reads
    config = Config()
    config.Exchange.root, config.Exchange.cache, config.Exchange.assignment_dir = str(root), str(cache), str(student)
    config.CourseDirectory.course_id, config.CourseDirectory.assignment_id = COURSE_ID, assignment
    fetch = StrictExchangeFetchFeedback(coursedir=CourseDirectory(config=config),
                                        authenticator=Authenticator(config=config), config=config)
    fetch.start()
    return fetch


def test_before_any_submission_fetch_feedback_says_there_is_none_to_fetch(places, monkeypatch):
    _feedback_released(places[0], "another student's secret")
    with pytest.raises(ExchangeError) as refused:
        _fetch_feedback(places, "rlhf", monkeypatch)
    assert str(refused.value) == (
        "No feedback for rlhf: you have not submitted it from this account. Feedback comes after you submit, once "
        "your instructor has graded the submission and released its feedback.")
    assert FEEDBACK_NOTICE.get() == {"language": i18n.ENGLISH, "text": str(refused.value)}


@pytest.mark.parametrize("anyone_has_feedback", [False, True])
def test_submitted_but_no_feedback_released_is_said_not_silent(places, monkeypatch, anyone_has_feedback):
    """Whether or not the instructor has released anyone's feedback yet (before the first release the exchange has
    no feedback folder: stock nbgrader then fails with "Assignment not found")."""
    root, cache, student = places
    _submitted(cache, "rlhf", LATEST)
    if anyone_has_feedback:
        _feedback_released(root, "another student's secret")
    with pytest.raises(ExchangeError) as refused:
        _fetch_feedback(places, "rlhf", monkeypatch)
    assert str(refused.value) == ("No feedback for rlhf yet: your instructor releases it after grading; your "
                                  "submission of 2026-12-03 16:30 UTC is kept.")
    assert not (student / "rlhf" / "feedback").exists()


def test_the_chinese_edition_says_it_in_chinese(places, monkeypatch):
    root, cache, _ = places
    (root / COURSE_ID).mkdir()  # as release_assignment made it
    deadlines.publish_due_date(str(root), COURSE_ID, "rlhf_zh", dt.datetime(2100, 1, 1), i18n.CHINESE,
                               edition_of="rlhf")
    _submitted(cache, "rlhf_zh", LATEST)
    with pytest.raises(ExchangeError) as refused:
        _fetch_feedback(places, "rlhf_zh", monkeypatch)
    assert str(refused.value) == "rlhf_zh 还没有反馈：老师评分后才会发布反馈；你在 2026-12-03 16:30 UTC 的提交已保存。"
    assert FEEDBACK_NOTICE.get()["language"] == i18n.CHINESE


def test_feedback_for_an_earlier_submission_only_is_fetched_and_says_which(places, monkeypatch, caplog):
    root, cache, student = places
    _submitted(cache, "rlhf", FIRST, secret="the first submission's secret")
    _submitted(cache, "rlhf", LATEST)
    _feedback_released(root, "the first submission's secret")
    with caplog.at_level(logging.WARNING):
        _fetch_feedback(places, "rlhf", monkeypatch)
    assert (student / "rlhf" / "feedback" / FIRST / f"{NOTEBOOK_ID}.html").is_file()
    sentence = (f"Fetched the feedback on your rlhf submission of 2026-12-01 10:00 UTC (in rlhf/feedback/{FIRST}). "
                "Your latest submission, of 2026-12-03 16:30 UTC, has no feedback yet: your instructor releases it "
                "after grading.")
    assert FEEDBACK_NOTICE.get() == {"language": i18n.ENGLISH, "text": sentence}
    assert sentence in caplog.text


def test_feedback_for_the_latest_submission_is_fetched_with_nothing_more_said(places, monkeypatch):
    root, cache, student = places
    _submitted(cache, "rlhf", FIRST, secret="the first submission's secret")
    _submitted(cache, "rlhf", LATEST)
    _feedback_released(root)
    _fetch_feedback(places, "rlhf", monkeypatch)
    assert (student / "rlhf" / "feedback" / LATEST / f"{NOTEBOOK_ID}.html").is_file()
    assert FEEDBACK_NOTICE.get() is None


def test_the_assignment_lists_answer_carries_the_notice_for_its_dialog(places, monkeypatch):
    """nbgrader's handler calls the manager's fetch_feedback, discards its answer and answers with
    list_assignments: the course's manager adds ``notice`` to that list, once, in the edition's language."""
    import traceback

    from rlhf_course.classroom.submit_refusal import _PlainRefusals

    class Manager:  # nbgrader's AssignmentList, as far as the handler uses it
        def fetch_feedback(self, course_id, assignment_id):
            try:
                _fetch_feedback(places, assignment_id, monkeypatch)
            except Exception:
                return {"success": False, "value": traceback.format_exc()}
            return {"success": True}

        def list_assignments(self, course_id=None):
            return {"success": True, "value": [{"course_id": course_id, "assignment_id": "rlhf_zh"}]}

    root, cache, _ = places
    (root / COURSE_ID).mkdir()
    deadlines.publish_due_date(str(root), COURSE_ID, "rlhf_zh", None, i18n.CHINESE, edition_of="rlhf")
    _submitted(cache, "rlhf_zh", LATEST)
    manager = _PlainRefusals(Manager())
    assert not manager.fetch_feedback(COURSE_ID, "rlhf_zh")["success"]
    listed = manager.list_assignments(course_id=COURSE_ID)
    assert listed["value"] == [{"course_id": COURSE_ID, "assignment_id": "rlhf_zh"}]
    assert listed["notice"] == {"title": "rlhf_zh 的反馈", "text": "rlhf_zh 还没有反馈：老师评分后才会发布反馈；你在 "
                                                               "2026-12-03 16:30 UTC 的提交已保存。"}
    assert "notice" not in manager.list_assignments(course_id=COURSE_ID)  # said once, not on every refresh

    _feedback_released(root)
    assert manager.fetch_feedback(COURSE_ID, "rlhf_zh")["success"]
    assert "notice" not in manager.list_assignments(course_id=COURSE_ID)  # fetched: the list shows it

    _submitted(cache, "rlhf_zh", "2026-12-05 09:15:00.000000 UTC", secret="a later submission's secret")
    assert manager.fetch_feedback(COURSE_ID, "rlhf_zh")["success"]  # the earlier one's fetched, the latest named
    assert manager.list_assignments(course_id=COURSE_ID)["notice"] == {
        "title": "rlhf_zh 的反馈",
        "text": f"已获取你在 2026-12-03 16:30 UTC 提交的 rlhf_zh 的反馈（在 rlhf_zh/feedback/{LATEST}）。你最近一次"
                "提交（2026-12-05 09:15 UTC）还没有反馈：老师评分后才会发布。"}

    monkeypatch.setattr(StrictExchangeFetchFeedback, "ensure_root", lambda self: self.fail(
        "Unreadable exchange directory, please contact your instructor: /srv/exchange"))
    manager.fetch_feedback(COURSE_ID, "rlhf_zh")  # another refusal of the exchange's: its sentence, not silence
    assert manager.list_assignments(course_id=COURSE_ID)["notice"] == {
        "title": "Feedback for rlhf_zh", "text": "Unreadable exchange directory, please contact your instructor: "
                                                 "/srv/exchange"}


def test_on_the_command_line_nothing_to_fetch_exits_non_zero_with_the_sentence(places, monkeypatch, tmp_path):
    """``nbgrader fetch_feedback`` as a student types it (nbgrader's app, in a command process as nbgrader's own tests
    run it): nothing fetched is a failure a script can test; feedback on an earlier submission only is a success,
    with the warning."""
    from tests.support.command_session import OwnCommandSession

    root, cache, student = places
    (tmp_path / "config").mkdir()
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)  # no course config: the flags below only
    env = {"JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    command = ("fetch_feedback", "rlhf", "--course", COURSE_ID, f"--Exchange.root={root}", f"--Exchange.cache={cache}",
               "--ExchangeFactory.fetch_feedback=rlhf_course.exchange.fetch.StrictExchangeFetchFeedback")
    _submitted(cache, "rlhf", FIRST, secret="the first submission's secret")
    with OwnCommandSession(student) as commands:
        refused = commands.nbgrader(*command, env=env, check=False)
        assert refused.returncode != 0, refused.stdout
        assert ("No feedback for rlhf yet: your instructor releases it after grading; your submission of 2026-12-01 "
                "10:00 UTC is kept.") in refused.stdout, refused.stdout

        _feedback_released(root, "the first submission's secret")
        _submitted(cache, "rlhf", LATEST)
        fetched = commands.nbgrader(*command, env=env, check=False)
        assert fetched.returncode == 0, fetched.stdout
        assert "Your latest submission, of 2026-12-03 16:30 UTC, has no feedback yet" in fetched.stdout, fetched.stdout
    assert (student / "rlhf" / "feedback" / FIRST / f"{NOTEBOOK_ID}.html").is_file()
